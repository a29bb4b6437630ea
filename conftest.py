"""Make the in-repo collection importable as ansible_collections.gpuprov.gpu in tests, and
name the fakes folder and the Go peer harness for the collection's unit tests.

Ansible's own loader finds it through ansible.cfg (collections_path = ./collections);
plain pytest imports need the same folder on sys.path. The collection's unit tests read the
fakes' location from GPUPROV_FAKES_DIR (tests/unit/plugins/module_utils/fakes_dir.py) and the
Go peers' (tests/peers) from GPUPROV_PEERS_DIR (tests/unit/plugins/test_support/peerlib.py)
rather than searching for them; a value already set wins.
"""
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))
COLLECTIONS = os.path.join(ROOT, "collections")
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
os.environ.setdefault("GPUPROV_FAKES_DIR", os.path.join(ROOT, "roles", "fake_gpu_node", "files"))
os.environ.setdefault("GPUPROV_PEERS_DIR", os.path.join(ROOT, "tests", "peers"))


def pytest_terminal_summary(terminalreporter):
    """The start time of each test control plane (tests/conftest.py's control_plane fixture
    notes them in the session's base temporary folder, one line per pytest worker)."""
    try:
        path = os.path.join(str(terminalreporter.config._tmp_path_factory.getbasetemp()), "control-plane-starts.txt")
    except (AttributeError, OSError):
        return
    if os.path.exists(path):
        terminalreporter.section("control plane")
        with open(path) as handle:
            for line in handle:
                terminalreporter.write_line(line.rstrip())
        os.unlink(path)
