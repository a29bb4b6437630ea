# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""mig_restore_unit end to end: a stand-in restore program (its exit code chosen by the test)
and the fake systemctl (roles/fake_gpu_node/files/bin) on PATH, as on a node."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprov.gpu.plugins.modules import mig_restore_unit

COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FAKE_BIN = os.path.join(COLLECTION, "roles", "fake_gpu_node", "files", "bin")
UNIT = "gpuprov-mig-restore.service"

# Records how it was run, then exits with the code in the file RESTORE_EXIT (0 when absent).
PROGRAM = """import json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "runs.jsonl"), "a") as log:
    log.write(json.dumps({"argv": sys.argv[1:], "env": os.environ.get("GPUPROV_TEST_MARK")}) + "\\n")
exit_file = os.path.join(here, "RESTORE_EXIT")
code = int(open(exit_file).read()) if os.path.exists(exit_file) else 0
print("GPU 0: as planned" if code == 0 else "GPU 0: differs")
sys.stderr.write("" if code in (0, 4) else "NVML: driver not loaded\\n")
sys.exit(code)
"""


class Node(object):
    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.program = tmp_path / "gpuprov-mig-restore"
        self.program.write_text(PROGRAM)
        self.state_file = tmp_path / "mig-state.json"
        self.state_file.write_text('{"format": 1, "gpus": []}\n')
        self.systemd = tmp_path / "systemd.json"
        self.calls = tmp_path / "calls.jsonl"

    def units(self, **unit):
        self.systemd.write_text(json.dumps({"units": {UNIT: dict({"enabled": False}, **unit)}}))

    def exits(self, code):
        (self.dir / "RESTORE_EXIT").write_text(str(code))

    def runs(self):
        path = self.dir / "runs.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def systemctl(self):
        lines = self.calls.read_text().splitlines() if self.calls.exists() else []
        return [" ".join(call["argv"][1:]) for call in map(json.loads, lines) if call["tool"] == "systemctl"]

    def enabled(self):
        return json.loads(self.systemd.read_text())["units"][UNIT].get("enabled")


@pytest.fixture
def node(tmp_path, monkeypatch):
    node = Node(tmp_path)
    monkeypatch.setenv("PATH", FAKE_BIN + os.pathsep + os.environ["PATH"])
    monkeypatch.setenv("GPUPROV_FAKE_SYSTEMD_STATE", str(node.systemd))
    monkeypatch.setenv("GPUPROV_FAKE_CALL_LOG", str(node.calls))
    node.units()
    return node


def run(capsys, node, check_mode=False, **args):
    params = dict(dict(python=sys.executable, program=str(node.program), state_file=str(node.state_file),
                       service=UNIT, _ansible_check_mode=check_mode), **args)
    capsys.readouterr()
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            mig_restore_unit.main()
    return json.loads(capsys.readouterr().out)


def test_a_restore_that_runs_is_enabled_once(capsys, node):
    first = run(capsys, node, environment={"GPUPROV_TEST_MARK": "from-the-unit"})
    assert "failed" not in first, first
    assert first["changed"] is True and first["dry_run"]["rc"] == 0 and first["changes_pending"] is False
    assert first["enabled_before"] == "disabled" and node.enabled() is True
    assert node.runs() == [{"argv": ["--state-file", str(node.state_file), "--dry-run"], "env": "from-the-unit"}]
    assert node.systemctl() == ["is-enabled %s" % UNIT, "enable %s" % UNIT]
    second = run(capsys, node)
    assert second["changed"] is False and second["enabled_before"] == "enabled"
    assert node.systemctl()[2:] == ["is-enabled %s" % UNIT]


def test_changes_pending_pass(capsys, node):
    node.exits(4)
    result = run(capsys, node)
    assert "failed" not in result and result["changes_pending"] is True and node.enabled() is True


@pytest.mark.parametrize("code, meaning", [(3, "NVML is not usable"), (1, "were not restored"), (9, "not one of")])
def test_a_restore_that_would_not_run_at_boot_fails_and_is_not_enabled(capsys, node, code, meaning):
    node.exits(code)
    result = run(capsys, node, daemon_reload=True)
    assert result["failed"] is True and result["changed"] is False
    assert "exited %d (" % code in result["msg"] and meaning in result["msg"], result["msg"]
    assert "left as it was" in result["msg"]
    if code != 9:
        assert "NVML: driver not loaded" in result["msg"]
    assert node.systemctl() == [] and node.enabled() is False


def test_a_masked_unit_is_refused(capsys, node):
    node.units(masked=True)
    result = run(capsys, node)
    assert result["failed"] is True and "is masked" in result["msg"] and "systemctl unmask" in result["msg"]
    assert "enable %s" % UNIT not in node.systemctl()


def test_daemon_reload_comes_before_the_enable(capsys, node):
    result = run(capsys, node, daemon_reload=True)
    assert result["daemon_reloaded"] is True
    assert node.systemctl() == ["daemon-reload", "is-enabled %s" % UNIT, "enable %s" % UNIT]


def test_check_mode_runs_the_dry_run_and_enables_nothing(capsys, node):
    result = run(capsys, node, check_mode=True, daemon_reload=True)
    assert result["changed"] is True and result["daemon_reloaded"] is False
    assert len(node.runs()) == 1 and node.enabled() is False
    assert node.systemctl() == ["is-enabled %s" % UNIT]


def test_a_unit_systemd_does_not_know_fails_naming_it(capsys, node):
    node.systemd.write_text(json.dumps({"units": {}}))
    result = run(capsys, node)
    assert result["failed"] is True and "enable %s exited" % UNIT in result["msg"]


@pytest.mark.parametrize("service", ["", "-x", "a/b"])
def test_a_bad_unit_name_is_refused_before_anything_runs(capsys, node, service):
    result = run(capsys, node, service=service)
    assert result["failed"] is True and "is not a unit name" in result["msg"]
    assert node.runs() == [] and node.systemctl() == []


def test_the_passing_exits_are_the_programs_own():
    """The module keeps its own copy of two exit codes (importing mig_restore would load NVML's
    code in every run); they must stay the program's."""
    from ansible_collections.gpuprov.gpu.plugins.module_utils import mig_restore

    assert mig_restore_unit.PASSING_EXITS == (mig_restore.EXIT_OK, mig_restore.EXIT_CHANGES_NEEDED)
    assert mig_restore_unit.CHANGES_PENDING == mig_restore.EXIT_CHANGES_NEEDED
