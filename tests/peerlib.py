"""Run the Go peers of tests/peers (upstream code that judges gpuprov's outputs).

`run_peer("device-plugin-config", path)` returns the JSON the peer printed and its exit status.
The binaries are built by scripts/setup.sh (tests/peers/build.py) into a cache keyed by the
harness's sources. Without them a test is skipped, unless GPUPROV_REQUIRE_PEERS=1 (set by
scripts/test.sh and so in CI), where a missing peer is a failure: CI must never pass by not
asking the peers.
"""
import importlib.util
import json
import os
import subprocess

import pytest

from testlib import REPO

_BUILD = os.path.join(REPO, "tests", "peers", "build.py")


def _build_module():
    spec = importlib.util.spec_from_file_location("gpuprov_peers_build", _BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def peer_binary(name="peers"):
    """Path of a built peer binary; skips (or fails under GPUPROV_REQUIRE_PEERS=1) without it."""
    path = os.path.join(_build_module().build_dir(), name)
    if os.access(path, os.X_OK):
        return path
    message = "Go peer %r is not built for these sources (run scripts/setup.sh or python %s)" % (name, _BUILD)
    if os.environ.get("GPUPROV_REQUIRE_PEERS") == "1":
        pytest.fail(message)
    pytest.skip(message)


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
                            capture_output=True, text=True, timeout=timeout)
    if result.returncode not in (0, 1):
        raise AssertionError("peers %s %s: exit %d\n%s" % (subcommand, " ".join(map(str, args)),
                                                            result.returncode, result.stderr))
    try:
        data = json.loads(result.stdout)
    except ValueError as exc:
        raise AssertionError("peers %s printed no JSON (%s): %r / %r" % (subcommand, exc, result.stdout[-500:],
                                                                        result.stderr[-2000:])) from None
    return PeerResult(result.returncode, data, result.stderr)
