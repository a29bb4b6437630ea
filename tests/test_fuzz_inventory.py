"""Fuzz: hundreds of mutated inventories; `gpuprov plan` answers each with a plan (exit 0) or
`HOST: FIELD: reason` lines (exit 2): never a traceback, never a hang, never a command run.

The mutations are seeded, so a failure names a case that can be replayed: pass its seed to
`mutated_inventory`. A watchdog turns a case that does not return into a failure (it is not
a timing assertion: any working case returns in a fraction of the watchdog's time).
"""
import copy
import os
import random
import signal

import pytest
import yaml

CASES = 300
WATCHDOG_S = 20

BASE_HOSTS = {
    "gpu-a100-01": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 8, "gpuprov_sharing": {
        "strategy": "mig", "mig": {"config": "all-balanced", "strategy": "mixed"}}},
    "gpu-a100-02": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2, "gpuprov_sharing": {
        "strategy": "mig", "time_slicing_replicas": 2, "mig": {"devices": [
            {"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            {"devices": [1], "mig-enabled": False}]}}},
    "gpu-t4-01": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 4,
                  "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4},
                  "gpuprov_kubelet": {"cpu_manager_policy": "static", "reserved_system_cpus": "0-1",
                                      "topology_manager_policy": "single-numa-node"}},
    "gpu-l40s-01": {"gpuprov_gpus": [{"model": "L40S", "count": 2}], "gpuprov_node_name": "l40s-1.example.com",
                    "gpuprov_sharing": {"strategy": "mps", "replicas": 4,
                                        "mps": {"provider": "host", "active_thread_percentage": 25,
                                                "pinned_memory_limit": "10G"}}},
    "cp-01": {"ansible_host": "10.0.0.1"},
}

MARKER = "FUZZ-MARKER"


def hostile_values(marker_path):
    deep = []
    for _ in range(40):
        deep = [deep]
    return [
        None, True, False, 0, -1, 1.5, 10 ** 18, -(10 ** 18), float("inf"), float("nan"), "", " ", "x" * 5000,
        "{{ lookup('pipe', 'touch %s') }}" % marker_path, "{{ query('lines', 'touch %s') }}" % marker_path,
        "{{ undefined_variable }}", "{{ 1 / 0 }}", "{{ ''.__class__.__mro__ }}",
        [], {}, [[[]]], deep, {"a": {"b": {"c": None}}}, "\x1b[2J\nFAKE", "0-999999999",
        "A100-80GB", "T4", "mig", "exclusive", "time-slicing", "mps", "all-balanced", "1g.10gb", 7, 8, 2, 128,
        "10G", "99999999999G", "auto", "static", "Bad_Name", "../../etc/passwd", "\u2028", "nvidia.com/gpu",
        ["all"], [0, 1, 2, 3], [10 ** 12], {"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 1}},
    ]


def _paths(value, prefix=()):
    """Every (path to a container, key) in a nested structure."""
    if isinstance(value, dict):
        for key in list(value):
            yield prefix, key
            yield from _paths(value[key], prefix + (key,))
    elif isinstance(value, list):
        for index in range(len(value)):
            yield prefix, index
            yield from _paths(value[index], prefix + (index,))


def _get(value, path):
    for key in path:
        value = value[key]
    return value


def mutated_inventory(seed, marker_path):
    """(text of an inventory YAML file) for ``seed``: 1-4 mutations of BASE_HOSTS."""
    rng = random.Random(seed)
    hosts = copy.deepcopy(BASE_HOSTS)
    values = hostile_values(marker_path)
    plausible = values[values.index("A100-80GB"):]
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        spots = list(_paths(hosts))
        parent_path, key = rng.choice(spots)
        parent = _get(hosts, parent_path)
        if kind < 0.55:
            parent[key] = copy.deepcopy(rng.choice(plausible if rng.random() < 0.4 else values))
        elif kind < 0.65 and isinstance(parent, dict) and parent_path:
            del parent[key]
        elif kind < 0.75 and isinstance(parent, dict):
            typo = str(key)[:-1] + rng.choice("aeiouxz_") if str(key) else "gpuprov_"
            parent[typo] = parent.pop(key)
        elif kind < 0.85 and isinstance(parent, dict):
            parent[rng.choice(["gpuprov_sharng", "gpuprov_extra", "unknown", 7, "gpuprov_node_name",
                               "ansible_host", "inventory_dir"])] = copy.deepcopy(rng.choice(values))
        else:
            hosts[rng.choice(["new-host", "gpu-a100-01", "x\x1b[31m", "n" * 300, "[1:3]", "h:2222"])] = \
                copy.deepcopy(rng.choice(list(BASE_HOSTS.values())))
    text = yaml.safe_dump({"all": {"hosts": hosts}}, allow_unicode=False, width=200)
    if rng.random() < 0.15:
        # Damage the text itself: truncate it or flip bytes, as a partly written file would be.
        cut = rng.randrange(len(text))
        text = text[:cut] if rng.random() < 0.5 else text[:cut] + rng.choice(["\t", ":", "{", "&a *a", "!!python/object:os.system"]) + text[cut:]
    return text


class Hang(Exception):
    pass


def _watchdog(signum, frame):
    raise Hang("no answer within %d s" % WATCHDOG_S)


@pytest.mark.parametrize("block", range(6))
def test_mutated_inventories_never_traceback_hang_or_run(gpuprov, tmp_path, block):
    marker = tmp_path / MARKER
    per_block = CASES // 6
    previous = signal.signal(signal.SIGALRM, _watchdog)
    try:
        for seed in range(block * per_block, (block + 1) * per_block):
            path = tmp_path / ("case-%d.yml" % seed)
            path.write_text(mutated_inventory(seed, str(marker)))
            signal.alarm(WATCHDOG_S)
            try:
                code, out, err = gpuprov("plan", "-i", str(path), "-o", "json")
            finally:
                signal.alarm(0)
            assert code in (0, 2), "seed %d: exit %d\n%s" % (seed, code, err[-2000:])
            assert "Traceback" not in err, "seed %d:\n%s" % (seed, err[-2000:])
            assert not marker.exists(), "seed %d ran a command" % seed
            if code == 2:
                assert err.strip(), "seed %d: exit 2 without a message" % seed
                assert "\x1b" not in err and "\x1b" not in out, "seed %d: an escape sequence reached the output" % seed
            os.unlink(str(path))
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_the_unmutated_inventory_plans(gpuprov, tmp_path):
    """The fuzz starts from an inventory that plans, so exit 2 answers come from the mutations."""
    path = tmp_path / "base.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": BASE_HOSTS}}))
    code, out, err = gpuprov("plan", "-i", str(path), "-o", "json")
    assert code == 0, err
    assert sorted(yaml.safe_load(out)["nodes"]) == ["gpu-a100-01", "gpu-a100-02", "gpu-l40s-01", "gpu-t4-01"]


def test_some_mutations_still_plan(gpuprov, tmp_path):
    """The mutations are not all fatal: some mutated inventories still plan (exit 0)."""
    codes = []
    for seed in range(40):
        path = tmp_path / "case.yml"
        path.write_text(mutated_inventory(seed, str(tmp_path / MARKER)))
        codes.append(gpuprov("plan", "-i", str(path))[0])
    assert 0 in codes and 2 in codes, codes
