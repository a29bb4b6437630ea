import pytest

from testlib import REPO


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
