# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Run the Go peers (upstream code that judges gpuprov's outputs).

`run_peer("device-plugin-config", path)` returns the JSON the peer printed and its exit status.
The peers are the repository's test-only Go module tests/peers, named by ``GPUPROV_PEERS_DIR``
(the repository's root conftest.py sets it, as it sets GPUPROV_FAKES_DIR); nothing here
searches the file system for it. Its build.py (run by scripts/setup.sh) builds the binaries
into a cache keyed by the harness's sources and says where they are. Without the variable or
the binaries a test is skipped, unless GPUPROV_REQUIRE_PEERS=1 (set by scripts/test.sh and so
in CI), where a missing peer is a failure: CI must never pass by not asking the peers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os
import subprocess

import pytest

PEERS_DIR_ENV = "GPUPROV_PEERS_DIR"


def unavailable(message):
    """Skip the test, or fail it under GPUPROV_REQUIRE_PEERS=1."""
    if os.environ.get("GPUPROV_REQUIRE_PEERS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def peers_dir():
    """The Go harness folder (tests/peers of the repository)."""
    path = os.environ.get(PEERS_DIR_ENV)
    if not path or not os.path.isfile(os.path.join(path, "build.py")):
        unavailable("%s does not name the Go peer harness (tests/peers of the repository; its root "
                    "conftest.py sets it)" % PEERS_DIR_ENV)
    return path


def _build_module():
    path = os.path.join(peers_dir(), "build.py")
    spec = importlib.util.spec_from_file_location("gpuprov_peers_build", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peer_binary(name="peers"):
    """Path of a built peer binary; skips (or fails under GPUPROV_REQUIRE_PEERS=1) without it."""
    path = os.path.join(_build_module().build_dir(), name)
    if os.access(path, os.X_OK):
        return path
    unavailable("Go peer %r is not built for these sources (run scripts/setup.sh or python %s)"
                % (name, os.path.join(peers_dir(), "build.py")))


class PeerResult:
    def __init__(self, returncode, data, stderr):
        self.returncode = returncode
        self.data = data
        self.stderr = stderr

    @property
    def error(self):
        """The peer's own error text, or None when it accepted the input."""
        if isinstance(self.data, dict) and set(self.data) == {"error"}:
            return self.data["error"]
        return None

    def __repr__(self):
        return "PeerResult(rc=%d, data=%r, stderr=%r)" % (self.returncode, self.data, self.stderr[-2000:])


def run_peer(subcommand, *args, stdin=None, timeout=120, binary="peers"):
    """Run `peers SUBCOMMAND ARGS...`; exit 0 is the peer's result, 1 its error, 2 a usage
    mistake of the test (raised)."""
    result = subprocess.run([peer_binary(binary), subcommand, *map(str, args)], input=stdin,
                            capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode not in (0, 1):
        raise AssertionError("peers %s %s: exit %d\n%s" % (subcommand, " ".join(map(str, args)),
                                                           result.returncode, result.stderr))
    try:
        data = json.loads(result.stdout)
    except ValueError as exc:
        raise AssertionError("peers %s printed no JSON (%s): %r / %r" % (subcommand, exc, result.stdout[-500:],
                                                                         result.stderr[-2000:])) from None
    return PeerResult(result.returncode, data, result.stderr)
