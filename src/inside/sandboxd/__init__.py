# SPDX-License-Identifier: Apache-2.0
"""sandboxd's own helpers inside the sandbox (beside the `mcp` package at /run/sandboxd/python).

`sandboxd.plots`: the matplotlib backend that saves figures to /workspace/out.
"""
