# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""module_utils.mps against the fake NVML and the fake nvidia-cuda-mps-control."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat
import sys

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.daemon_manager import MpsDaemonManager
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.directories import parse_mode
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.gpus import Gpu, NvmlGpus
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.replies import parse_memory_limit
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.runners import SubprocessRunner
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml
from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.mps_node import mps_node  # noqa: F401  pylint: disable=unused-import


def converge(node, check_mode=False, binary=None, **params):
    full = {"state": "started", "gpus": ["all"], "pipe_directory": node.pipe, "log_directory": node.log,
            "pipe_directory_mode": "0755", "log_directory_mode": "0755", "manage_compute_mode": True,
            "allow_restart": False}
    full.update(params)
    with Nvml() as nvml:
        manager = MpsDaemonManager(full, NvmlGpus(nvml), SubprocessRunner(timeout=5),
                                   check_mode=check_mode, binary=binary or node.binary)
        return manager.run()


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text, mib", [("20G", 20480), ("20350M", 20350), ("1024", 1024), ("0", None),
                                       ("", None), (" 3G\n", 3072)])
def test_parse_memory_limit(text, mib):
    assert parse_memory_limit(text) == mib


@pytest.mark.parametrize("text", ["Invalid device 7", "12 parsecs", "-1G"])
def test_parse_memory_limit_rejects_other_replies(text):
    with pytest.raises(MpsError, match="unexpected pinned memory limit reply"):
        parse_memory_limit(text)


@pytest.mark.parametrize("value, mode", [("0755", 0o755), ("750", 0o750), (0o700, 0o700), ("2770", 0o2770)])
def test_parse_mode(value, mode):
    assert parse_mode(value, "pipe_directory_mode") == mode


@pytest.mark.parametrize("value", ["rwxr-xr-x", "0999", "", None, True])
def test_parse_mode_rejects(value):
    with pytest.raises(MpsError, match="pipe_directory_mode must be an octal mode"):
        parse_mode(value, "pipe_directory_mode")


# ---------------------------------------------------------------------- start / rerun


def test_start_sets_up_everything(mps_node):
    node = mps_node()
    result = converge(node, replicas=4)

    assert result["changed"] is True
    assert result["daemon"]["running"] is True and result["daemon"]["started"] is True
    uuids = node.uuids()
    daemon = node.daemon()
    assert daemon["alive"] is True
    # one daemon for both GPUs, their UUIDs in index order, so ordinal N is GPU N
    assert daemon["visible_devices"] == ",".join(uuids)
    assert daemon["default_active_thread_percentage"] == 25.0
    # H100-80GB: 81559 MiB // 4
    assert daemon["default_pinned_mem_limits"] == {"0": 20389, "1": 20389}
    assert result["daemon"]["pid"] == daemon["pid"]
    assert node.compute_modes() == ["EXCLUSIVE_PROCESS", "EXCLUSIVE_PROCESS"]
    assert [g["compute_mode_before"] for g in result["gpus"]] == ["DEFAULT", "DEFAULT"]
    assert mode_of(node.pipe) == 0o755 and mode_of(node.log) == 0o755
    assert result["limits"]["before"]["active_thread_percentage"] is None
    assert result["limits"]["after"] == {"active_thread_percentage": 25.0,
                                         "pinned_memory_limit_mib": {uuids[0]: 20389, uuids[1]: 20389}}
    # compute mode is set before the daemon starts, and the limits after it answers
    assert node.commands()[0] == "-d"


def test_second_run_changes_nothing(mps_node):
    node = mps_node()
    converge(node, active_thread_percentage=50, pinned_memory_limit=8192)
    node.clear_calls()

    result = converge(node, active_thread_percentage=50, pinned_memory_limit=8192)

    assert result["changed"] is False
    assert result["warnings"] == []
    sent = node.commands()
    assert "-d" not in sent and "quit" not in sent
    assert not [c for c in sent if c.startswith("set_")]
    assert result["limits"]["before"] == result["limits"]["after"]


def test_limits_change_without_restart_and_warn_about_running_servers(mps_node):
    node = mps_node()
    converge(node, active_thread_percentage=50, pinned_memory_limit=8192)
    pid_before = node.daemon()["pid"]
    assert node.client("start_server -uid 0")[0] == 0
    server_pid = node.daemon()["servers"][0]["pid"]
    node.clear_calls()

    result = converge(node, active_thread_percentage=25, pinned_memory_limit={"1": "4G"})

    assert result["changed"] is True
    assert result["daemon"]["started"] is False and result["daemon"]["restarted"] is False
    assert node.daemon()["pid"] == pid_before
    assert "-d" not in node.commands() and "quit" not in node.commands()
    assert node.daemon()["default_active_thread_percentage"] == 25.0
    assert node.daemon()["default_pinned_mem_limits"] == {"0": 8192, "1": 4096}
    # the running server keeps what it started with
    assert node.client("get_active_thread_percentage %d" % server_pid)[1].strip() == "50.0"
    assert result["servers"] == [server_pid]
    assert any("MPS servers %d" % server_pid in w and "keep their old limits" in w for w in result["warnings"])
    assert result["limits"]["before"]["active_thread_percentage"] == 50.0
    assert result["limits"]["after"]["active_thread_percentage"] == 25.0


def test_limit_change_without_servers_gives_no_warning(mps_node):
    node = mps_node()
    converge(node, active_thread_percentage=50)
    result = converge(node, active_thread_percentage=20)
    assert result["changed"] is True
    assert result["warnings"] == []


# ---------------------------------------------------------------------------- stop


def test_stop_quits_and_restores_default_compute_mode(mps_node):
    node = mps_node()
    converge(node, replicas=2)
    node.clear_calls()

    result = converge(node, state="stopped")

    assert result["changed"] is True
    assert result["daemon"]["stopped"] is True and result["daemon"]["running"] is False
    # the daemon gone means its control endpoint gone: no client call needed to see that
    assert node.commands() == ["get_server_list", "get_default_active_thread_percentage",
                               "get_default_device_pinned_mem_limit 0",
                               "get_default_device_pinned_mem_limit 1", "quit"]
    assert node.daemon() is None
    assert os.listdir(node.pipe) == []  # our metadata went too; the directory stays
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]
    assert [g["compute_mode_after"] for g in result["gpus"]] == ["DEFAULT", "DEFAULT"]

    again = converge(node, state="stopped")
    assert again["changed"] is False


def test_stop_warns_when_servers_end(mps_node):
    node = mps_node()
    converge(node)
    node.client("start_server -uid 1000")
    server_pid = node.daemon()["servers"][0]["pid"]
    result = converge(node, state="stopped")
    assert any("ends its MPS servers %d" % server_pid in w for w in result["warnings"])


# --------------------------------------------------------------------------- stale


def test_stale_pipe_directory_is_detected_and_recovered(mps_node):
    node = mps_node()
    converge(node, active_thread_percentage=40)
    old_pid = node.daemon()["pid"]
    node.kill_daemon()
    assert node.client("get_server_list") == (1, "Cannot find MPS control daemon process\n")
    assert "control" in os.listdir(node.pipe)

    result = converge(node, active_thread_percentage=40)

    assert result["changed"] is True
    assert result["daemon"]["stale_recovered"] is True and result["daemon"]["started"] is True
    assert set(result["daemon"]["removed_files"]) >= {"control", "nvidia-cuda-mps-control.pid"}
    assert any("left by a daemon that died" in w for w in result["warnings"])
    daemon = node.daemon()
    assert daemon["alive"] is True and daemon["pid"] != old_pid
    # a new daemon forgets the old defaults: they had to be set again
    assert daemon["default_active_thread_percentage"] == 40.0
    assert converge(node, active_thread_percentage=40)["changed"] is False


def test_stale_pipe_directory_is_cleaned_on_stop(mps_node):
    node = mps_node()
    converge(node)
    node.kill_daemon()
    result = converge(node, state="stopped")
    assert result["changed"] is True and result["daemon"]["stale_recovered"] is True
    assert os.listdir(node.pipe) == []
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]


def test_empty_pipe_directory_is_not_stale(mps_node):
    node = mps_node()
    os.makedirs(node.pipe, 0o755)
    result = converge(node)
    assert result["daemon"]["stale_recovered"] is False and result["daemon"]["started"] is True


# ----------------------------------------------------------------------------- MIG


def test_refuses_mig_enabled_gpu_and_changes_nothing(mps_node):
    node = mps_node(gpus=[("A100-80GB", 2)])
    node.set_mig(1, True)

    with pytest.raises(MpsError) as err:
        converge(node, replicas=2)

    assert "GPU 1 (%s) has MIG mode enabled" % node.uuids()[1] in str(err.value)
    assert "out of scope" in str(err.value)
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]
    assert not os.path.exists(node.pipe)
    assert node.commands() == []


def test_mig_gpu_left_out_of_gpus_is_fine(mps_node):
    node = mps_node(gpus=[("A100-80GB", 2)])
    node.set_mig(1, True)
    result = converge(node, gpus=["0"])
    assert [g["index"] for g in result["gpus"]] == [0]
    assert node.daemon()["visible_devices"] == node.uuids()[0]
    assert node.compute_modes() == ["EXCLUSIVE_PROCESS", "DEFAULT"]


def test_refuses_pre_volta_limits():
    class OldGpus:
        def gpus(self):
            return [Gpu(0, "GPU-0000", "Tesla P100-PCIE-16GB", 16280, compute_mode="DEFAULT",
                        compute_capability="6.0")]

    params = {"pipe_directory": "/nonexistent/gpuprov-test/pipe", "log_directory": "/nonexistent/gpuprov-test/log",
              "active_thread_percentage": 50}
    manager = MpsDaemonManager(params, OldGpus(), SubprocessRunner(), binary="/bin/false")
    with pytest.raises(MpsError, match=r"GPU 0 \(GPU-0000\), a Tesla P100-PCIE-16GB of compute capability 6.0, predates Volta"):
        manager.run()


# ------------------------------------------------------------------- directories


def test_world_writable_pipe_directory_is_fixed_with_a_warning(mps_node):
    node = mps_node()
    os.makedirs(node.pipe)
    os.chmod(node.pipe, 0o777)
    result = converge(node)
    assert mode_of(node.pipe) == 0o755
    assert any("was world-writable (mode 0777); set to 0755" in w for w in result["warnings"])
    assert result["directories"]["pipe_directory"]["before"]["mode"] == "0777"


@pytest.mark.parametrize("mode", ["0777", "1777", "0757"])
def test_world_writable_mode_is_refused(mps_node, mode):
    node = mps_node()
    with pytest.raises(MpsError, match="world-writable"):
        converge(node, pipe_directory_mode=mode)
    assert not os.path.exists(node.pipe)


def test_group_mode_and_owner_are_applied(mps_node):
    node = mps_node()
    result = converge(node, pipe_directory_mode="0770", pipe_directory_owner="0", pipe_directory_group="0")
    assert mode_of(node.pipe) == 0o770
    assert result["directories"]["pipe_directory"]["after"] == {"exists": True, "mode": "0770", "uid": 0, "gid": 0}
    assert converge(node, pipe_directory_mode="0770", pipe_directory_owner="0", pipe_directory_group="0")["changed"] is False


def test_symlinked_pipe_directory_is_refused(mps_node, tmp_path):
    node = mps_node()
    target = tmp_path / "elsewhere"
    target.mkdir()
    os.makedirs(os.path.dirname(node.pipe))
    os.symlink(str(target), node.pipe)
    with pytest.raises(MpsError, match="is a symbolic link"):
        converge(node)


@pytest.mark.parametrize("path, message", [
    ("/tmp", "shared system directory"),
    ("relative/pipe", "absolute"),
    ("/srv/mps/../pipe", "normalized"),
    ("/" + "p" * 120, "too long"),
])
def test_bad_pipe_directories_are_refused(mps_node, path, message):
    node = mps_node()
    with pytest.raises(MpsError, match=message):
        converge(node, pipe_directory=path)


def test_unknown_owner_is_refused(mps_node):
    node = mps_node()
    with pytest.raises(MpsError, match="pipe_directory_owner: no user 'no-such-user-gpuprov'"):
        converge(node, pipe_directory_owner="no-such-user-gpuprov")


# ---------------------------------------------------------------------- check mode


def test_check_mode_changes_nothing(mps_node):
    node = mps_node()
    result = converge(node, check_mode=True, replicas=4)

    assert result["changed"] is True
    assert result["daemon"]["running"] is True and result["daemon"]["started"] is True
    assert result["limits"]["after"]["active_thread_percentage"] == 25.0
    assert [g["compute_mode_after"] for g in result["gpus"]] == ["EXCLUSIVE_PROCESS"] * 2
    assert not os.path.exists(node.pipe) and not os.path.exists(node.log)
    assert node.daemon() is None
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]
    assert node.commands() == []


def test_check_mode_on_running_daemon_sends_no_changes(mps_node):
    node = mps_node()
    converge(node, active_thread_percentage=50)
    node.kill_daemon()
    node.start_by_hand(node.uuids())  # a fresh daemon: our limits are gone
    node.clear_calls()

    result = converge(node, check_mode=True, active_thread_percentage=50)
    assert result["changed"] is True
    assert not [c for c in node.commands() if c.startswith("set_") or c in ("-d", "quit")]
    assert node.daemon()["default_active_thread_percentage"] == 100.0

    stop = converge(node, check_mode=True, state="stopped")
    assert stop["changed"] is True and stop["daemon"]["stopped"] is True
    assert node.daemon()["alive"] is True
    assert node.compute_modes() == ["EXCLUSIVE_PROCESS", "EXCLUSIVE_PROCESS"]


# ----------------------------------------------------------------- service, rollback


def test_service_mode_never_starts_the_daemon(mps_node):
    node = mps_node()
    with pytest.raises(MpsError, match="does not answer: service gpuprov-mps.service should run it"):
        converge(node, service="gpuprov-mps.service", active_thread_percentage=50)
    assert node.commands() == []  # no pipe directory yet: nothing to ask
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]

    node.start_by_hand(node.uuids())
    result = converge(node, service="gpuprov-mps.service", active_thread_percentage=50)
    assert result["changed"] is True and result["daemon"]["started"] is False
    assert node.commands().count("-d") == 1  # only the one started by hand
    assert node.daemon()["default_active_thread_percentage"] == 50.0
    assert node.compute_modes() == ["EXCLUSIVE_PROCESS", "EXCLUSIVE_PROCESS"]

    with pytest.raises(MpsError, match="still answers although service gpuprov-mps.service should have stopped it"):
        converge(node, service="gpuprov-mps.service", state="stopped")
    # in check mode the service has not been stopped yet either: predicted, not refused
    checked = converge(node, check_mode=True, service="gpuprov-mps.service", state="stopped")
    assert checked["changed"] is True
    assert any("service gpuprov-mps.service is expected to stop it" in w for w in checked["warnings"])
    assert node.daemon()["alive"] is True and "quit" not in node.commands()
    node.client("quit")
    assert converge(node, service="gpuprov-mps.service", state="stopped")["changed"] is True
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]


def test_failed_start_puts_compute_mode_back(mps_node):
    node = mps_node()
    with pytest.raises(MpsError) as err:
        converge(node, binary="/bin/false")
    assert "could not start the MPS control daemon on %s" % node.pipe in str(err.value)
    assert "were undone" in str(err.value)
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]


def test_memory_limit_above_the_gpu_is_refused_before_any_change(mps_node):
    node = mps_node(gpus=[("H100-80GB", 1)])
    with pytest.raises(MpsError, match="90000 MiB is more than the 81559 MiB of GPU 0"):
        converge(node, pinned_memory_limit=90000)
    assert node.daemon() is None and node.compute_modes() == ["DEFAULT"]
    assert node.commands() == []


def refusing_control(node, tmp_path, refused):
    """A control binary that answers commands starting with ``refused`` with an error, as a
    daemon that rejects a value does (status 0, message on stdout), and passes the rest on."""
    path = tmp_path / "refusing-mps-control"
    path.write_text(
        "#!%s\n"
        "import os, sys\n"
        "data = '' if sys.argv[1:] else sys.stdin.read()\n"
        "if data.startswith(%r):\n"
        "    print('Invalid value')\n"
        "    sys.exit(0)\n"
        "import subprocess\n"
        "sys.exit(subprocess.run([%r] + sys.argv[1:], input=data, text=True).returncode)\n"
        % (sys.executable, refused, node.binary))
    path.chmod(0o755)
    return str(path)


def test_refused_limit_on_a_new_daemon_undoes_the_start_and_compute_mode(mps_node, tmp_path):
    node = mps_node()
    binary = refusing_control(node, tmp_path, "set_default_active_thread_percentage")

    with pytest.raises(MpsError) as err:
        converge(node, binary=binary, active_thread_percentage=50)

    assert "kept active thread percentage 100.0" in str(err.value)
    assert "were undone" in str(err.value)
    assert node.commands()[0] == "-d" and node.commands()[-1] == "quit"
    assert node.daemon() is None
    assert node.compute_modes() == ["DEFAULT", "DEFAULT"]


def test_refused_limit_on_a_running_daemon_puts_the_earlier_limit_back(mps_node, tmp_path):
    node = mps_node()
    converge(node, active_thread_percentage=50)
    binary = refusing_control(node, tmp_path, "set_default_device_pinned_mem_limit")

    with pytest.raises(MpsError, match="kept pinned memory limit None MiB on device 0"):
        converge(node, binary=binary, active_thread_percentage=25, pinned_memory_limit=1024)

    assert "set_default_active_thread_percentage 25" in node.commands()
    daemon = node.daemon()
    assert daemon["alive"] is True  # it was running before: it stays
    assert daemon["default_active_thread_percentage"] == 50.0
    assert daemon["default_pinned_mem_limits"] == {}


def test_gpu_set_change_needs_allow_restart(mps_node):
    node = mps_node()
    converge(node, gpus=["0"])
    with pytest.raises(MpsError, match="changing them needs a daemon restart"):
        converge(node, gpus=["0", "1"])
    assert node.daemon()["visible_devices"] == node.uuids()[0]

    result = converge(node, gpus=["0", node.uuids()[1]], allow_restart=True)
    assert result["daemon"]["restarted"] is True
    assert node.daemon()["visible_devices"] == ",".join(node.uuids())
    assert converge(node, gpus=["all"])["changed"] is False


@pytest.mark.parametrize("gpus, message", [
    (["7"], "no GPU 7 on this host"),
    (["GPU-00000000-0000-0000-0000-000000000000"], "no GPU GPU-00000000"),
    (["first"], "neither a GPU index nor a GPU UUID"),
    (["all", "0"], "'all' cannot be combined"),
])
def test_bad_gpu_selection(mps_node, gpus, message):
    node = mps_node()
    with pytest.raises(MpsError, match=message):
        converge(node, gpus=gpus)


def test_pinned_limit_for_unselected_gpu_is_refused(mps_node):
    node = mps_node()
    with pytest.raises(MpsError, match="pinned_memory_limit: 1 is not one of the selected GPUs"):
        converge(node, gpus=["0"], pinned_memory_limit={"1": 1024})
