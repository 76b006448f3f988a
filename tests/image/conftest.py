"""Fixtures for the image import tests: a scratch area with a sentinel "host" directory outside
the store, checked to be untouched after every import, under both path resolvers."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import imagelib  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "no_binary: does not need build/sandboxd or the rootfs")


class Area:
    def __init__(self, base, resolver):
        self.base = str(base)
        self.outside = os.path.join(self.base, "outside")  # what a hostile layer aims at
        self.store = os.path.join(self.base, "store")
        self.src = os.path.join(self.base, "src")
        self.env = {"SANDBOXD_NO_OPENAT2": "1"} if resolver == "fallback" else {}
        os.makedirs(os.path.join(self.outside, "dir"))
        with open(os.path.join(self.outside, "victim"), "w") as fh:
            fh.write("original\n")
        with open(os.path.join(self.outside, "dir", "keep"), "w") as fh:
            fh.write("keep\n")
        os.symlink("victim", os.path.join(self.outside, "link"))
        self.before = imagelib.snapshot(self.base)

    def layout(self, layers, how="gzip", name="img.oci", config=None):
        return imagelib.make_layout(os.path.join(self.src, name), layers, how, config=config)

    def run(self, src, *opts, name="img"):
        return imagelib.rootfs_cmd("import", src, "--dir", self.store, "--name", name, *opts, env=self.env)

    def tree(self, name="img"):
        return os.path.join(self.store, name)

    def assert_host_untouched(self):
        """Nothing outside the store and the sources changed, nothing new appeared."""
        skip = {self.store, self.src}
        after = imagelib.snapshot(self.base, skip=skip)
        before = {p: v for p, v in self.before.items() if not any(p == s or p.startswith(s + "/") for s in skip)}
        assert after == before
        assert open(os.path.join(self.outside, "victim")).read() == "original\n"
        assert os.stat(os.path.join(self.outside, "victim")).st_nlink == 1

    def assert_no_leftovers(self, name="img"):
        assert imagelib.leftovers(self.store, name) == []


@pytest.fixture(params=["openat2", "fallback"])
def area(request, tmp_path):
    a = Area(tmp_path, request.param)
    yield a
    a.assert_host_untouched()
    a.assert_no_leftovers()
