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
