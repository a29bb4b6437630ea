"""The start gate: ansible-playbook starts up while gpuprov checks its plans, and contacts no host
until told to (gpuprov/runner.py: run_playbook's ``prepare``; plugin_utils/start_gate.py)."""
import os
import sys
import time

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import start_gate
from gpuprov import runner
from gpuprov.options import Vault

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def local_run(tmp_path, monkeypatch):
    """A one-task playbook on a local host; the task writes a marker with the gate's variable as
    the run's commands see it. Returns (playbook, inventory, marker)."""
    monkeypatch.chdir(REPO)  # the repository's ansible.cfg finds the collection's callback
    marker = tmp_path / "task-ran"
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"node": {"ansible_connection": "local",
                                                                     "ansible_python_interpreter": sys.executable}}}}))
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Touch", "hosts": "all", "gather_facts": False,
        "tasks": [{"name": "Write the marker", "ansible.builtin.command": {
            "argv": ["sh", "-c", 'printf "%%s" "${%s-unset}" > "$1"' % start_gate.GATE_FD_VAR, "sh", str(marker)]}}],
    }], sort_keys=False))
    return str(playbook), str(inventory), marker


def test_the_run_waits_for_prepare_and_then_goes_on(local_run):
    playbook, inventory, marker = local_run
    seen = {}

    def started(proc):
        seen["proc"] = proc

    def prepare():
        # ansible-playbook starts up meanwhile, but runs no task until this returns.
        time.sleep(3)
        seen["running while preparing"] = seen["proc"].poll() is None
        seen["ran before the gate opened"] = marker.exists()

    code, summary = runner.run_playbook(playbook, [inventory], started=started, prepare=prepare)

    assert code == 0
    assert seen == {"proc": seen["proc"], "running while preparing": True, "ran before the gate opened": False}
    # The gate's variable and descriptor do not reach what the run starts.
    assert marker.read_text() == "unset"
    assert summary["nodes"]["node"]["status"] == "changed"


def test_a_failing_prepare_stops_the_run_before_any_task(local_run):
    playbook, inventory, marker = local_run
    seen = {}

    def prepare():
        # Long enough for an ungated run to have started its task (about a second here).
        time.sleep(4)
        raise SystemExit(2)

    with pytest.raises(SystemExit) as raised:
        runner.run_playbook(playbook, [inventory], started=lambda proc: seen.setdefault("proc", proc),
                            prepare=prepare)

    assert raised.value.code == 2
    assert not marker.exists()
    assert seen["proc"].returncode is not None  # waited for: no run outlives the command


def test_an_ungated_run_is_as_before(local_run):
    playbook, inventory, marker = local_run

    code, _summary = runner.run_playbook(playbook, [inventory])

    assert code == 0 and marker.read_text() == "unset"


def _gate(data, close=True):
    read_end, write_end = os.pipe()
    os.write(write_end, data)
    if close:
        os.close(write_end)
    return {start_gate.GATE_FD_VAR: str(read_end), "OTHER": "x"}, read_end, write_end


def _is_open(fd):
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def test_the_gate_opens_on_go_and_is_closed_and_forgotten():
    environ, read_end, write_end = _gate(start_gate.GATE_OPEN, close=False)

    start_gate.wait_at_gate(environ)  # returns without waiting for the end of file

    assert environ == {"OTHER": "x"} and not _is_open(read_end)
    os.close(write_end)


@pytest.mark.parametrize("data", [b"", b"g", b"no", b"\x00\x00"])
def test_anything_but_go_stops_the_run_with_exit_2(data):
    environ, read_end, _write_end = _gate(data)

    with pytest.raises(SystemExit) as raised:
        start_gate.wait_at_gate(environ)

    assert raised.value.code == 2
    assert environ == {"OTHER": "x"} and not _is_open(read_end)


@pytest.mark.parametrize("value", ["not-a-number", "99999"])
def test_an_unreadable_gate_stops_the_run_and_says_why(value):
    environ = {start_gate.GATE_FD_VAR: value}

    with pytest.raises(SystemExit) as raised:
        start_gate.wait_at_gate(environ)

    assert "cannot be read" in str(raised.value.code) and "nothing was run" in str(raised.value.code)
    assert environ == {}


def test_without_the_variable_nothing_waits():
    environ = {"OTHER": "x"}
    start_gate.wait_at_gate(environ)
    assert environ == {"OTHER": "x"}


@pytest.mark.parametrize("vault,prompts", [
    (Vault(), False),
    (Vault(password_files=["pw.txt"]), False),
    (Vault(vault_ids=["dev@pw.txt", "prod@/etc/prod-pass"]), False),
    (Vault(ask=True), True),
    (Vault(vault_ids=["dev@prompt"]), True),
    (Vault(vault_ids=["prompt"]), True),
    (Vault(vault_ids=["dev@pw.txt", "@prompt"]), True),
])
def test_a_vault_password_asked_on_the_terminal_is_known(vault, prompts):
    # gpuprov status then checks its plans before ansible-playbook starts: both would read the terminal.
    assert vault.prompts() is prompts
