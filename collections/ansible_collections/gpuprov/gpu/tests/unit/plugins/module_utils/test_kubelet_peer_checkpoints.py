# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""gpuprov's checkpoint-reset table against the kubelet's own checkpoint code (tests/peers
kubelet-checkpoint: the Topology, CPU and Memory Managers of k8s.io/kubernetes v1.37.2 started
on the state files).

Each row is a change gpuprov plans. The old state is what the kubelet left under the old
config: idle (no pod holds CPUs, as after a drain) and, under the static CPU policy, busy (a
Guaranteed pod's container holds CPUs exclusively, as a DaemonSet pod a drain leaves running
does: the CPUs the new reservation takes, if any). Where gpuprov resets a checkpoint, the
kubelet refuses the old state in one of them and accepts the start after the reset; where
gpuprov does not, the kubelet accepts both.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import KubeletSettings, plan_change
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.grammar import kubelet_cpuset
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.kubelet_peerlib import KubeletFiles
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import run_peer

pytestmark = pytest.mark.peers

STATIC = dict(cpu_manager_policy="static", reserved_system_cpus="0,8")
NONE_CPU = dict(cpu_manager_policy="none", reserved_system_cpus="")
MEMORY = dict(memory_manager_policy="Static",
              reserved_memory=[{"numa_node": 0, "limits": {"memory": "434Mi"}},
                               {"numa_node": 1, "limits": {"memory": "434Mi"}}])


def options(**values):
    return {"cpu_manager_policy_options": dict((k.replace("_", "-"), v) for k, v in values.items())}


# name, settings before, settings after (applied over the before), cpu reset, memory reset
ROWS = [
    ("cpu policy none to static", {}, STATIC, True, False),
    ("cpu policy static to none", STATIC, NONE_CPU, True, False),
    ("reservedSystemCPUs grows", STATIC, dict(reserved_system_cpus="0-1,8-9"), True, False),
    ("reservedSystemCPUs moves", STATIC, dict(reserved_system_cpus="1,9"), True, False),
    ("reservedSystemCPUs shrinks", dict(STATIC, reserved_system_cpus="0-1,8-9"),
     dict(reserved_system_cpus="0,8"), False, False),
    ("reservedSystemCPUs shrinks, strict", dict(STATIC, reserved_system_cpus="0-1,8-9",
                                                **options(strict_cpu_reservation=True)),
     dict(reserved_system_cpus="0,8"), True, False),
    ("reservedSystemCPUs respelled", STATIC, dict(reserved_system_cpus="8,0"), False, False),
    ("kubeReserved.cpu count grows", dict(cpu_manager_policy="static", kube_reserved_cpu="1"),
     dict(kube_reserved_cpu="2"), True, False),
    ("systemReserved.cpu count grows", dict(cpu_manager_policy="static", system_reserved_cpu="1"),
     dict(system_reserved_cpu="1500m"), True, False),
    ("kubeReserved.cpu count shrinks", dict(cpu_manager_policy="static", kube_reserved_cpu="2"),
     dict(kube_reserved_cpu="1"), True, False),
    ("kubeReserved.cpu, same count", dict(cpu_manager_policy="static", kube_reserved_cpu="500m"),
     dict(kube_reserved_cpu="800m"), False, False),
    ("kubeReserved.cpu under reservedSystemCPUs", dict(STATIC, kube_reserved_cpu="1"),
     dict(kube_reserved_cpu="2"), False, False),
    ("reservedSystemCPUs replaces kubeReserved.cpu", dict(cpu_manager_policy="static", kube_reserved_cpu="1"),
     dict(reserved_system_cpus="0,8"), True, False),
    ("strict-cpu-reservation on", STATIC, options(strict_cpu_reservation=True), True, False),
    ("strict-cpu-reservation off", dict(STATIC, **options(strict_cpu_reservation=True)),
     dict(cpu_manager_policy_options={}), True, False),
    ("full-pcpus-only on", STATIC, options(full_pcpus_only=True), False, False),
    ("cpu reconcile period", STATIC, dict(cpu_manager_reconcile_period="1m"), False, False),
    ("topology policy and scope", STATIC, dict(topology_manager_policy="single-numa-node",
                                               topology_manager_scope="pod"), False, False),
    ("reservedSystemCPUs under the none policy", dict(reserved_system_cpus="0"),
     dict(reserved_system_cpus="0-1"), False, False),
    ("memory policy None to Static", {}, MEMORY, False, True),
    ("memory policy Static to None", MEMORY, dict(memory_manager_policy="None", reserved_memory=[]),
     False, True),
    ("reservedMemory moves between NUMA nodes", MEMORY,
     dict(reserved_memory=[{"numa_node": 0, "limits": {"memory": "868Mi"}}]), False, True),
    ("reservedMemory, other amounts per node", MEMORY,
     dict(reserved_memory=[{"numa_node": 0, "limits": {"memory": "400Mi"}},
                           {"numa_node": 1, "limits": {"memory": "468Mi"}}]), False, True),
    ("reservedMemory respelled", MEMORY,
     dict(reserved_memory=[{"numa_node": 0, "limits": {"memory": "444416Ki"}},
                           {"numa_node": 1, "limits": {"memory": "434Mi"}}]), False, False),
    ("reservedMemory under the None policy",
     dict(reserved_memory=[{"numa_node": 0, "limits": {"memory": "1Gi"}}]),
     dict(reserved_memory=[{"numa_node": 1, "limits": {"memory": "2Gi"}}]), False, False),
]

# Resets gpuprov makes that the kubelet did not need in any state tried, and why gpuprov makes
# them anyway. Nothing else may differ.
GPUPROV_RESETS_MORE = {
    "kubeReserved.cpu count shrinks":
        "without reservedSystemCPUs the kubelet takes its reserved CPUs by topology "
        "(takeByTopology); gpuprov does not predict that choice, so it cannot tell a shrink "
        "from a move",
}


def plan(files, settings):
    result = plan_change(files.config, KubeletSettings(**settings), sysfs_root=files.sysfs,
                         config_dir=files.config_dir)
    with open(result.path, "w") as handle:
        handle.write(result.after)
    return result


def start(files, state_dir=None, assign=None):
    args = ["--config", files.config, "--config-dir", files.config_dir, "--machine", files.machine,
            "--state-dir", state_dir or files.state_dir]
    for pod, cpus in (assign or {}).items():
        args += ["--assign", "%s/main=%s" % (pod, cpus)]
    return run_peer("kubelet-checkpoint", *args)


def write_checkpoints(state_dir, started):
    for name, text in started.data["checkpoints"].items():
        with open(os.path.join(state_dir, name), "w") as handle:
            handle.write(text)


def reserved(started):
    return set(kubelet_cpuset(started.data["reservedCPUs"]))


def verdict(result):
    return "accepts" if result.returncode == 0 else "refuses: " + result.error


@pytest.mark.parametrize("name, before, after, cpu_reset, memory_reset", ROWS, ids=[r[0] for r in ROWS])
def test_the_reset_table_and_the_kubelet_agree(tmp_path, name, before, after, cpu_reset,
                                               memory_reset):
    files = KubeletFiles(tmp_path)
    if before:
        plan(files, before)
    old = start(files)
    assert old.returncode == 0, old
    change = plan(files, after)
    assert change.changed or name.endswith("respelled")
    assert (change.cpu_manager_state_reset_required, change.memory_manager_state_reset_required) \
        == (cpu_reset, memory_reset), (change.cpu_manager_state_reset_reasons,
                                       change.memory_manager_state_reset_reasons)

    # The new config on a fresh node: what it reserves, and that it starts at all.
    fresh = str(tmp_path / "fresh")
    os.makedirs(fresh)
    new = start(files, fresh)
    assert new.returncode == 0, new

    states = {"idle": {}}
    if old.data["configz"]["kubeletconfig"]["cpuManagerPolicy"] == "static":
        taken = sorted(reserved(new) - reserved(old)) if cpu_reset else []
        shared = sorted(set(range(16)) - reserved(old))
        states["busy"] = {"pod-1": ",".join(str(c) for c in (taken or shared[:1]))}
    verdicts = {}
    for state, assign in states.items():
        state_dir = str(tmp_path / state)
        os.makedirs(state_dir)
        if assign:
            # The old config's kubelet, then a pod given CPUs by its CPU manager.
            old_files = KubeletFiles(tmp_path / ("old-" + state))
            if before:
                plan(old_files, before)
            held = start(old_files, state_dir, assign)
            assert held.returncode == 0, held
            write_checkpoints(state_dir, held)
        else:
            write_checkpoints(state_dir, old)
        verdicts[state] = verdict(start(files, state_dir))
        # gpuprov's reset: the checkpoints it deletes before the kubelet starts again.
        for file_name, reset in (("cpu_manager_state", cpu_reset), ("memory_manager_state", memory_reset)):
            if reset:
                os.unlink(os.path.join(state_dir, file_name))
        after_reset = start(files, state_dir)
        assert after_reset.returncode == 0, (state, after_reset)
    print("\n%s: gpuprov resets %s; kubelet without the reset: %s" % (
        name, "+".join(n for n, r in (("cpu", cpu_reset), ("memory", memory_reset)) if r) or "nothing",
        json.dumps(verdicts)))
    kubelet_refuses = any(v != "accepts" for v in verdicts.values())
    if name in GPUPROV_RESETS_MORE:
        assert not kubelet_refuses and (cpu_reset or memory_reset), verdicts
    else:
        assert kubelet_refuses is (cpu_reset or memory_reset), verdicts
