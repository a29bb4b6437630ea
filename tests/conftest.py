import os

import pytest

from testlib import REPO

# Install Ansible's collection finder before any test module imports the collection, so every
# `ansible_collections.gpuprov.gpu` import goes through one loader. A plain import first makes
# the package a namespace spanning ./collections and an installed copy in site-packages, and a
# later submodule import through the finder then fails ("this loader requires exactly one path").
from gpuprov.cli import use_collection  # noqa: E402

use_collection()


@pytest.fixture
def repo_root():
    return REPO


@pytest.fixture
def gpuprov():
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    from click.testing import CliRunner

    from gpuprov.cli import cli, use_collection

    use_collection()

    def run(*args):
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        return result.exit_code, result.stdout, result.stderr

    return run


# -- the real control plane (tests/controlplane.py) ---------------------------------------------
def _starts_file(config):
    """Where each worker notes its control plane's start; the root conftest.py prints the
    notes in the terminal summary (an xdist controller never loads this file)."""
    base = config._tmp_path_factory.getbasetemp()
    if hasattr(config, "workerinput"):
        base = base.parent
    return os.path.join(str(base), "control-plane-starts.txt")


@pytest.fixture(scope="session")
def control_plane(request, tmp_path_factory):
    """One control plane and node agent per session (per xdist worker), stopped at the end."""
    from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import peer_binary

    from controlplane import ControlPlane

    binary = peer_binary("controlplane")
    plane = ControlPlane.start(str(tmp_path_factory.mktemp("control-plane")), binary=binary)
    # Printed in the terminal summary (the root conftest.py), from every worker.
    with open(_starts_file(request.config), "a") as handle:
        handle.write(plane.describe() + "\n")
    try:
        yield plane
    finally:
        plane.stop()
        restarts = plane.restarts()
        if restarts:
            with open(_starts_file(request.config), "a") as handle:
                handle.write("control plane %s: restarted during the session: %s\n" % (plane.server, "; ".join(restarts)))


@pytest.fixture
def cluster(control_plane):
    """The session's control plane for one test; what the test made is removed afterwards."""
    yield control_plane
    control_plane.reset()
