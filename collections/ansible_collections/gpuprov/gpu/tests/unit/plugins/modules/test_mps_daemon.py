# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The mps_daemon module end to end: arguments in, JSON out, fakes underneath."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprov.gpu.plugins.modules import mps_daemon
from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.mps_node import mps_node  # noqa: F401  pylint: disable=unused-import


def run_module(capsys, node, check_mode=False, diff=False, **args):
    params = {"pipe_directory": node.pipe, "log_directory": node.log, "timeout": 5}
    params.update(args)
    params["_ansible_check_mode"] = check_mode
    params["_ansible_diff"] = diff
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            mps_daemon.main()
    return json.loads(capsys.readouterr().out)


def warning_texts(result):
    """Warnings as text: ansible-core 2.19 sends them as structured summaries."""
    return [w["event"]["msg"] if isinstance(w, dict) else w for w in result.get("warnings", [])]


def test_start_then_idempotent(capsys, mps_node):
    node = mps_node()
    first = run_module(capsys, node, replicas=2)
    assert first["changed"] is True and "failed" not in first
    assert first["daemon"]["running"] is True
    assert node.daemon()["default_active_thread_percentage"] == 50.0

    second = run_module(capsys, node, replicas=2)
    assert second["changed"] is False
    assert "warnings" not in second


def test_check_and_diff_mode(capsys, mps_node):
    node = mps_node()
    result = run_module(capsys, node, check_mode=True, diff=True, active_thread_percentage=30,
                        pinned_memory_limit="10G")
    assert result["changed"] is True
    uuid0 = node.uuids()[0]
    assert result["diff"]["before"]["daemon_running"] is False
    assert result["diff"]["after"]["daemon_running"] is True
    assert result["diff"]["before"]["compute_mode"][uuid0] == "DEFAULT"
    assert result["diff"]["after"]["compute_mode"][uuid0] == "EXCLUSIVE_PROCESS"
    assert result["diff"]["after"]["limits"]["pinned_memory_limit_mib"][uuid0] == 10240
    assert result["diff"]["before"]["directories"]["pipe_directory"]["exists"] is False
    assert node.daemon() is None and not os.path.exists(node.pipe)
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]


def test_no_diff_key_without_diff_mode(capsys, mps_node):
    node = mps_node()
    assert "diff" not in run_module(capsys, node)


def test_limit_change_warning_reaches_the_user(capsys, mps_node):
    node = mps_node()
    run_module(capsys, node, active_thread_percentage=50)
    node.client("start_server -uid 0")
    result = run_module(capsys, node, active_thread_percentage=20)
    assert result["changed"] is True
    assert any("servers %d" % node.daemon()["servers"][0]["pid"] in w and "keep their old limits" in w
               for w in warning_texts(result))


def test_mig_refusal_is_a_clean_failure(capsys, mps_node):
    node = mps_node(gpus=[("A100-80GB", 2)])
    node.set_mig(0, True)
    result = run_module(capsys, node)
    assert result["failed"] is True
    assert result["msg"].startswith("GPU 0 (%s) has MIG mode enabled" % node.uuids()[0])
    assert "Traceback" not in result["msg"]


def test_stop(capsys, mps_node):
    node = mps_node()
    run_module(capsys, node)
    result = run_module(capsys, node, state="stopped")
    assert result["changed"] is True and result["daemon"]["stopped"] is True
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]
    assert run_module(capsys, node, state="stopped")["changed"] is False


def test_manage_compute_mode_false_leaves_it_alone(capsys, mps_node):
    node = mps_node()
    result = run_module(capsys, node, manage_compute_mode=False)
    assert result["changed"] is True and node.daemon()["alive"] is True
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]
    assert [g["compute_mode_after"] for g in result["gpus"]] == ["DEFAULT", "DEFAULT"]
    run_module(capsys, node, state="stopped", manage_compute_mode=False)
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]


@pytest.mark.parametrize("args, message", [
    ({"service": "gpuprov mps; reboot"}, "is not a systemd unit name"),
    ({"timeout": 0}, "timeout must be at least 1 second"),
    ({"active_thread_percentage": 0}, "greater than 0 and at most 100"),
    ({"active_thread_percentage": 150}, "greater than 0 and at most 100"),
    ({"pinned_memory_limit": "lots"}, "unexpected pinned memory limit reply"),
    ({"pinned_memory_limit": -5}, "positive number of MiB"),
    ({"replicas": 0}, "replicas must be at least 1"),
])
def test_bad_arguments(capsys, mps_node, args, message):
    node = mps_node()
    result = run_module(capsys, node, **args)
    assert result["failed"] is True
    assert message in result["msg"]
    assert node.daemon() is None


def test_missing_mps_binary(capsys, mps_node, monkeypatch):
    node = mps_node()
    monkeypatch.setenv("PATH", "/nonexistent")
    result = run_module(capsys, node)
    assert result["failed"] is True
    assert "nvidia-cuda-mps-control is not on the PATH" in result["msg"]


def test_no_driver(capsys, mps_node):
    node = mps_node()
    os.unlink(node.nvml_state)  # a node without libnvidia-ml
    result = run_module(capsys, node)
    assert result["failed"] is True
    assert "install the NVIDIA driver" in result["msg"]
