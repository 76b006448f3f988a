"""pytest configuration for the cgroup subset (tests/cgroup/): reuse the integration helpers
(tests/integration/sbx.py) and register the `refusal` marker.

Run natively (tests/run does, as root) or inside the pure-cgroup2 VM through tests/vm/cgroup-suite."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))


def pytest_configure(config):
    config.addinivalue_line("markers", "refusal: runs where this user has NO cgroup (the shipped default refuses)")
    config.addinivalue_line("markers", "security: an isolation property; never skipped when CI=true")
