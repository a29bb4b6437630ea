"""`gpuprov fit`: proven optima on hand-checked cases, the explanations, the inventory it
writes (planned by `gpuprov plan`), the heuristic at scale, and every bad-input case.

A100-SXM4-40GB facts used in the hand checks (catalog, from `nvidia-smi mig -lgip`): 8
memory and 7 compute slices; profiles (GiB, memory slices, compute slices, max per GPU):
1g.5gb 4.75/1/1/7, 1g.10gb 9.62/2/1/4, 2g.10gb 9.62/2/2/3, 3g.20gb 19.5/4/3/2,
4g.20gb 19.5/4/4/1, 7g.40gb 39.25/8/7/1; the GPU has 40 GiB (40960 MiB).
"""
import itertools
import json
import os
import random

import pytest
import yaml

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import (
    LayoutError, place, validate_instances)
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import workload_memory_mib
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog
from gpuprov import fit as fit_mod
from testlib import REPO

EXAMPLE = os.path.join(REPO, "examples", "fit", "workloads.yaml")
A100_40 = "A100-SXM4-40GB"


def write(tmp_path, data, name="workloads.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False) if name.endswith(".yaml") else json.dumps(data))
    return str(path)


def fit_json(gpuprov, path, *extra):
    code, out, err = gpuprov("fit", path, "-o", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def layouts(data):
    """Per GPU: sorted (profile, start, workload) for MIG, or (sharing, sorted workloads)."""
    result = []
    for gpu in data["gpus"]:
        if gpu["sharing"] == "mig":
            result.append(sorted((i["profile"], i["placement"]["start"], i["workload"])
                                 for i in gpu["mig"]["instances"]))
        else:
            result.append((gpu["sharing"], sorted(w["name"] for w in gpu["workloads"])))
    return result


def assert_valid(data, workloads_by_name):
    """Check a fit result independently of the packer: every copy placed once, every GPU valid."""
    seen = []
    for gpu in data["gpus"]:
        model = catalog.get(gpu["model"])
        names = [w["name"] for w in gpu["workloads"]]
        seen.extend(names)
        if gpu["sharing"] == "mig":
            instances = [(i["profile"], i["placement"]["start"]) for i in gpu["mig"]["instances"]]
            validate_instances(instances, model.solver_profiles(), model.mig.compute_slices)  # raises if invalid
            assert sorted(i["workload"] for i in gpu["mig"]["instances"]) == sorted(names)
            for inst in gpu["mig"]["instances"]:
                workload = workloads_by_name[inst["workload"].split("#")[0]]
                profile = model.mig.profiles[inst["profile"]]
                assert profile.memory_gib * 1024 >= workload_memory_mib(workload["memory"]) - 1e-6
        else:
            assert len(names) == 1 or gpu["sharing"] in ("time-slicing", "mps")
            memory = [workload_memory_mib(workloads_by_name[n.split("#")[0]]["memory"]) for n in names]
            assert all(workloads_by_name[n.split("#")[0]].get("isolation", "soft") == "soft" for n in names)
            assert sum(memory) <= model.memory_mib + 1e-6
            if gpu["sharing"] == "mps":
                assert max(memory) <= model.memory_mib // len(names)
    expected = []
    for name, workload in workloads_by_name.items():
        replicas = workload.get("replicas", 1)
        expected.extend([name] if replicas == 1 else ["%s#%d" % (name, k + 1) for k in range(replicas)])
    assert sorted(seen) == sorted(expected)
    assert data["gpus_used"] >= data["lower_bound"]


# -- the five-model example -------------------------------------------------------------------

def test_five_model_example_fits_two_a100_40gb(gpuprov):
    # Chat 10, Embedding 8, Rerank 12, ASR 10, TTS 6 GiB, all hard, on A100-SXM4-40GB.
    # Smallest profile per workload (memory in GiB as nvidia-smi reports it):
    #   Chat 10 > 9.62 (1g.10gb/2g.10gb)        -> 3g.20gb: 4 memory slices, 3 compute
    #   Embedding 8 > 4.75 (1g.5gb)             -> 1g.10gb: 2 memory slices, 1 compute
    #   Rerank 12 > 9.62                        -> 3g.20gb: 4, 3
    #   ASR 10 > 9.62                           -> 3g.20gb: 4, 3
    #   TTS 6 > 4.75                            -> 1g.10gb: 2, 1
    # Memory: 46 GiB > 40 GiB, so at least 2 GPUs; slices: 16 = 2 x 8, compute 11 <= 14.
    # Three 4-slice instances, at most two per GPU (3g at 0 and 4): one GPU takes two of them
    # (8 slices, full), the other the third (3g at 0 or 4) plus 1g.10gb x2 in the other half
    # (4+2+2 = 8 slices, 3+1+1 = 5 compute). 2 GPUs, as the published example claims.
    data = fit_json(gpuprov, EXAMPLE)
    assert data["gpus_used"] == 2 and data["lower_bound"] == 2
    assert data["optimal"] is True and data["method"] == "exact"
    assert data["explanation"] == [
        "lower bound 2 GPUs from memory (46 GiB / 40 GiB); reached",
        "lower bound 2 GPUs from MIG profile granularity (16 memory slices / 8 per GPU: each workload rounded up "
        "to its smallest MIG profile); reached",
        "lower bound 2 GPUs from compute slices (11 compute slices / 7 per GPU: each workload rounded up to its "
        "smallest MIG profile); reached",
        "lower bound 2 GPUs from per-GPU instance limits (3 hard workloads need 4+ of 8 memory slices, 3g.20gb or "
        "larger; at most 2 per GPU); reached",
        "lower bound 2 GPUs from per-GPU instance limits (3 hard workloads need 3+ of 7 compute slices; at most 2 "
        "per GPU); reached",
        "2 GPUs is optimal: it meets the lower bound",
    ]
    assert "Rerank: 12 GiB hard -> 3g.20gb (19.5 GiB); 1g.10gb/2g.10gb have 9.62 GiB" in data["profile_choices"]
    assert "TTS: 6 GiB hard -> 1g.10gb (9.62 GiB); 1g.5gb has 4.75 GiB" in data["profile_choices"]
    by_layout = sorted(sorted(p for p, _, _ in gpu) for gpu in layouts(data))
    assert by_layout == [["1g.10gb", "1g.10gb", "3g.20gb"], ["3g.20gb", "3g.20gb"]]
    placed = dict((w, p) for gpu in layouts(data) for p, _, w in gpu)
    assert placed == {"Chat": "3g.20gb", "Rerank": "3g.20gb", "ASR": "3g.20gb",
                      "Embedding": "1g.10gb", "TTS": "1g.10gb"}
    for gpu in data["gpus"]:
        assert gpu["mig"]["idle_memory_slices"] == 0
        assert all(w["resource"] == "nvidia.com/mig-" + w["profile"] for w in gpu["workloads"])
    with open(EXAMPLE) as handle:
        source = yaml.safe_load(handle)
    assert_valid(data, dict((w["name"], w) for w in source["workloads"]))
    assert data["idle_gib"] == 80 - 46


def test_five_model_example_table(gpuprov):
    code, out, _ = gpuprov("fit", EXAMPLE)
    assert code == 0
    assert "lower bound 2 GPUs from memory (46 GiB / 40 GiB); reached" in out
    assert "GPUs used: 2 (2 A100-SXM4-40GB) on 1 node(s); idle memory 34 GiB; optimal (exhaustive search)" in out
    assert "Rerank -> 3g.20gb@" in out and "fit-a100-sxm4-40gb-01" in out


def test_five_model_example_on_one_gpu_is_refused_with_the_bound(gpuprov, tmp_path):
    with open(EXAMPLE) as handle:
        source = yaml.safe_load(handle)
    source["pool"] = {"model": A100_40, "count": 1}
    code, _, err = gpuprov("fit", write(tmp_path, source))
    assert code == 2
    assert ("pool: the workloads need at least 2 GPUs (lower bound from memory: 46 GiB / 40 GiB) but the pool "
            "has 1") in err
    assert "Traceback" not in err


# -- hand-checked optima ----------------------------------------------------------------------

def test_gb_and_gib_are_different_units(gpuprov, tmp_path):
    # "10GB" = 10^10 bytes = 9.31 GiB <= 9.62 GiB: four of them fill one GPU as 4x 1g.10gb
    # (8 memory slices, 4 compute slices).
    data = fit_json(gpuprov, write(tmp_path, {"workloads": [{"name": "S", "memory": "10GB", "isolation": "hard",
                                                              "replicas": 4}], "pool": {"model": A100_40}}))
    assert data["gpus_used"] == 1
    assert layouts(data) == [[("1g.10gb", 0, "S#1"), ("1g.10gb", 2, "S#2"), ("1g.10gb", 4, "S#3"),
                              ("1g.10gb", 6, "S#4")]]
    # 10 (GiB) > 9.62: each needs a 3g.20gb, two per GPU, so 2 GPUs although 40 GiB <= 40 GiB.
    data = fit_json(gpuprov, write(tmp_path, {"workloads": [{"name": "S", "memory": 10, "isolation": "hard",
                                                              "replicas": 4}], "pool": {"model": A100_40}}))
    assert data["gpus_used"] == 2
    assert "lower bound 1 GPU from memory (40 GiB / 40 GiB)" in data["explanation"]
    assert data["explanation"][0].startswith("lower bound 2 GPUs from MIG profile granularity (16 memory slices")


@pytest.mark.parametrize("text,mib", [
    (10, 10240.0), (9.5, 9728.0), ("10GiB", 10240.0), ("10Gi", 10240.0), ("10 GB", 1e10 / 2 ** 20),
    ("10G", 1e10 / 2 ** 20), ("512Mi", 512.0), ("512MiB", 512.0), ("1.5TiB", 1.5 * 2 ** 20), ("12", 12288.0),
])
def test_memory_units(text, mib):
    assert workload_memory_mib(text) == pytest.approx(mib)


@pytest.mark.parametrize("value", [True, "lots", "50 percent"])
def test_compute_that_is_neither_a_fraction_nor_slices_says_what_is_expected(value):
    with pytest.raises(ValueError) as error:
        fit_mod.parse_compute(value)
    assert str(error.value) == ("must be a fraction of a GPU (0.5, \"50%%\") or compute slices (\"3g\"), got %r"
                                % (value,))


def test_granularity_binds_where_memory_does_not(gpuprov, tmp_path):
    # Three hard 10 GiB workloads: 30 GiB fits one 40 GiB GPU by memory, but each needs a
    # 3g.20gb (4 slices): 12 slices > 8, and at most two 4-slice instances per GPU -> 2 GPUs.
    data = fit_json(gpuprov, write(tmp_path, {"workloads": [{"name": n, "memory": 10, "isolation": "hard"}
                                                            for n in ("A", "B", "C")], "pool": {"model": A100_40}}))
    assert data["gpus_used"] == 2 and data["optimal"] is True
    assert data["explanation"][0] == ("lower bound 2 GPUs from MIG profile granularity (12 memory slices / 8 per "
                                      "GPU: each workload rounded up to its smallest MIG profile); reached")
    assert "lower bound 1 GPU from memory (30 GiB / 40 GiB)" in data["explanation"]
    assert sorted(len(gpu) for gpu in layouts(data)) == [1, 2]


def test_seven_one_slice_instances_per_gpu(gpuprov, tmp_path):
    # 4 GiB <= 4.75 GiB: 1g.5gb, 1 memory + 1 compute slice. Seven fill the 7 compute slices
    # (memory slice 7 stays idle: no 1g.5gb starts there); the eighth needs a second GPU
    # although 8 x 1 memory slice = 8 would fit by memory.
    def run(replicas):
        return fit_json(gpuprov, write(tmp_path, {"workloads": [{"name": "W", "memory": 4, "isolation": "hard",
                                                                  "replicas": replicas}], "pool": {"model": A100_40}}))
    seven = run(7)
    assert seven["gpus_used"] == 1
    assert [start for _, start, _ in layouts(seven)[0]] == [0, 1, 2, 3, 4, 5, 6]
    assert seven["gpus"][0]["mig"]["idle_memory_slices"] == 1
    eight = run(8)
    assert eight["gpus_used"] == 2
    assert ("lower bound 2 GPUs from compute slices (8 compute slices / 7 per GPU: each workload rounded up to its "
            "smallest MIG profile); reached") in eight["explanation"]
    assert ("lower bound 1 GPU from MIG profile granularity (8 memory slices / 8 per GPU: each workload rounded up "
            "to its smallest MIG profile)") in eight["explanation"]


def test_exhaustive_search_beats_the_bounds(gpuprov, tmp_path):
    # L4: 23034 MiB = 22.49 GiB, no MIG. A and B (12 GiB each) cannot share (24 > 22.49);
    # C (compute 0.8) cannot join either (0.3 + 0.8 > 1). So 3 GPUs, while memory (27 GiB),
    # compute (1.4) and the per-GPU limits only prove 2.
    data = fit_json(gpuprov, write(tmp_path, {"workloads": [
        {"name": "A", "memory": 12, "compute": 0.3}, {"name": "B", "memory": 12, "compute": 0.3},
        {"name": "C", "memory": 3, "compute": 0.8}], "pool": {"model": "L4"}}))
    assert data["gpus_used"] == 3 and data["lower_bound"] == 2 and data["optimal"] is True
    assert data["explanation"][-1] == ("3 GPUs is optimal: exhaustive search found no packing into 2 GPUs; the "
                                       "bounds above count totals and sizes, not which workloads fit together on "
                                       "one GPU")
    assert [g["sharing"] for g in data["gpus"]] == ["whole", "whole", "whole"]


def test_time_slicing_and_mps_differ(gpuprov, tmp_path):
    # L40S: 46068 MiB. Three 12 GiB copies and a 2 GiB one: 38 GiB, so one time-sliced GPU.
    # MPS splits a GPU into N equal shares: with 4 clients each gets 46068 // 4 = 11517 MiB
    # < 12 GiB, with 3 clients 15356 MiB >= 12 GiB, so at most 3 per GPU -> 2 GPUs.
    path = write(tmp_path, {"workloads": [{"name": "M", "memory": 12, "replicas": 3}, {"name": "S", "memory": 2}],
                            "pool": {"model": "L40S"}})
    ts = fit_json(gpuprov, path)
    assert ts["gpus_used"] == 1 and ts["gpus"][0]["sharing"] == "time-slicing"
    assert ts["inventory"]["all"]["children"]["gpuprov_fit"]["hosts"]["fit-l40s-01"]["gpuprov_sharing"] == {
        "strategy": "time-slicing", "replicas": 4}
    mps = fit_json(gpuprov, path, "--soft-sharing", "mps")
    assert mps["gpus_used"] == 2 and mps["optimal"] is True
    assert sorted(g["sharing"] for g in mps["gpus"]) == ["mps", "whole"]
    hosts = mps["inventory"]["all"]["children"]["gpuprov_fit"]["hosts"]
    assert {"strategy": "mps", "replicas": 3} in [h["gpuprov_sharing"] for h in hosts.values()]


def test_soft_workloads_take_mig_instances_beside_hard_ones(gpuprov, tmp_path):
    # Chat 12 GiB hard -> 3g.20gb (4 slices). Batch 8 GiB soft -> 1g.10gb (2), Tiny 4 GiB soft
    # -> 1g.5gb (1): 7 slices, 5 compute, one GPU. Soft workloads in MIG instances of their own
    # (isolation for free) rather than a second, time-sliced GPU.
    data = fit_json(gpuprov, write(tmp_path, {"workloads": [
        {"name": "Chat", "memory": 12, "isolation": "hard"}, {"name": "Batch", "memory": 8},
        {"name": "Tiny", "memory": 4}], "pool": {"model": A100_40}}))
    assert data["gpus_used"] == 1
    assert sorted(p for p, _, _ in layouts(data)[0]) == ["1g.10gb", "1g.5gb", "3g.20gb"]
    assert dict((w, p) for p, _, w in layouts(data)[0]) == {"Chat": "3g.20gb", "Batch": "1g.10gb", "Tiny": "1g.5gb"}


def test_mixed_pool_puts_soft_work_in_mig_when_that_saves_a_gpu(gpuprov, tmp_path):
    # Chat 12 GiB hard must go to the A100 (T4 has no MIG): 3g.20gb at 0 or 4. Batch 10 GiB
    # soft fits a T4 (15 GiB) whole, but also the A100's other 3g.20gb half: 1 GPU, not 2.
    data = fit_json(gpuprov, write(tmp_path, {"workloads": [
        {"name": "Chat", "memory": 12, "isolation": "hard"}, {"name": "Batch", "memory": 10}],
        "pool": [{"model": "T4"}, {"model": A100_40, "count": 1}]}))
    assert data["gpus_used"] == 1
    assert layouts(data) == [[("3g.20gb", 0, "Chat"), ("3g.20gb", 4, "Batch")]]


def test_pool_counts_are_respected(gpuprov, tmp_path):
    # Soft 30, 30, 14, 14, 14 GiB. A100-80GB holds 80 GiB, T4 15 GiB (the 30s fit only the A100).
    # With A100s unlimited: 30+30+14 and 14+14 -> 2 GPUs. With one A100: it takes 30+30+14
    # (74; a fourth 14 would make 88), the two other 14s need a T4 each -> 3 GPUs.
    workloads = [{"name": "L1", "memory": 30}, {"name": "L2", "memory": 30},
                 {"name": "S", "memory": 14, "replicas": 3}]
    free = fit_json(gpuprov, write(tmp_path, {"workloads": workloads,
                                              "pool": [{"model": "A100-80GB"}, {"model": "T4"}]}))
    assert free["gpus_used"] == 2 and [g["model"] for g in free["gpus"]] == ["A100-80GB", "A100-80GB"]
    one = fit_json(gpuprov, write(tmp_path, {"workloads": workloads,
                                             "pool": [{"model": "A100-80GB", "count": 1}, {"model": "T4"}]}))
    assert one["gpus_used"] == 3 and one["optimal"] is True
    assert sorted(g["model"] for g in one["gpus"]) == ["A100-80GB", "T4", "T4"]
    assert_valid(one, dict((w["name"], w) for w in workloads))


def test_hard_workloads_beyond_the_mig_gpus_are_refused(gpuprov, tmp_path):
    # Two 3g.20gb (12 GiB) and a 1g.5gb (4 GiB): 9 memory slices > 8, and only one A100.
    code, _, err = gpuprov("fit", write(tmp_path, {"workloads": [
        {"name": "A", "memory": 12, "isolation": "hard"}, {"name": "B", "memory": 12, "isolation": "hard"},
        {"name": "C", "memory": 4, "isolation": "hard"}], "pool": [{"model": A100_40, "count": 1}, {"model": "L4"}]}))
    assert code == 2
    assert ("pool: the 3 workloads that fit none of L4 need at least 2 GPUs of A100-SXM4-40GB (lower bound from MIG "
            "profile granularity: 9 memory slices / 8 per GPU") in err


# -- exact search against brute force ---------------------------------------------------------

def _brute_force(workloads, model):
    """Fewest GPUs by trying every set partition and every profile choice, with place() only."""
    items = []
    for w in workloads:
        items.extend([w] * w.get("replicas", 1))
    profiles = [p for p in model.mig.profiles.values() if not p.name.endswith("+me")] if model.mig else []
    memo = {}

    def need_slices(w):
        compute = fit_mod.parse_compute(w.get("compute"))
        if compute is None:
            return 1
        if compute[0] == "slices":
            return compute[1]
        return max(1, -(-int(round(compute[1] * 1000)) * model.mig.compute_slices // 1000))

    def shared_fraction(w):
        compute = fit_mod.parse_compute(w.get("compute"))
        if compute is None:
            return 0.0
        total = model.mig.compute_slices if model.mig else 7
        return compute[1] if compute[0] == "fraction" else compute[1] / float(total)

    def ok(block):
        if block in memo:
            return memo[block]
        ws = [items[k] for k in block]
        mem = [workload_memory_mib(w["memory"]) for w in ws]
        result = False
        if all(w.get("isolation", "soft") == "soft" for w in ws) and sum(mem) <= model.memory_mib + 1e-6 and (
                len(ws) == 1 or sum(shared_fraction(w) for w in ws) <= 1 + 1e-9):
            result = True
        elif profiles:
            choices = [[p.name for p in profiles
                        if p.memory_gib * 1024 >= m - 1e-6 and p.compute_slices >= need_slices(w)]
                       for w, m in zip(ws, mem)]
            tried = set()
            for combo in itertools.product(*choices):
                counts = tuple(sorted((n, combo.count(n)) for n in set(combo)))
                if counts in tried:
                    continue
                tried.add(counts)
                try:
                    place(dict(counts), model.solver_profiles(), model.mig.compute_slices)
                except LayoutError:
                    continue
                result = True
                break
        memo[block] = result
        return result

    best = [len(items) + 1]

    def partitions(rest, blocks):
        if len(blocks) >= best[0]:
            return
        if not rest:
            best[0] = len(blocks)
            return
        first, others = rest[0], rest[1:]
        for size in range(len(others) + 1):
            for mates in itertools.combinations(others, size):
                block = (first,) + mates
                if ok(block):
                    remaining = tuple(k for k in others if k not in mates)
                    partitions(remaining, blocks + [block])

    partitions(tuple(range(len(items))), [])
    return best[0]


def _random_workloads(rng, model, count):
    biggest_mig = max(p.memory_gib for p in model.mig.profiles.values()) if model.mig else 0
    workloads = []
    for k in range(count):
        hard = bool(model.mig) and rng.random() < 0.5
        limit = biggest_mig if hard else model.memory_mib / 1024.0
        memory = rng.choice([m for m in (2, 4, 5, 6, 8, 9.5, 10, 12, 16, 20, 24, 30, 40, 60) if m < limit])
        workload = {"name": "w%d" % k, "memory": memory, "isolation": "hard" if hard else "soft"}
        roll = rng.random()
        if roll < 0.2:
            workload["compute"] = rng.choice([0.25, 0.5])
        elif roll < 0.35:
            workload["compute"] = rng.choice(["2g", "3g"])
        workloads.append(workload)
    return workloads


@pytest.mark.parametrize("model_name", [A100_40, "A30", "H100-80GB", "L4"])
def test_exact_search_matches_brute_force(model_name):
    model = catalog.get(model_name)
    rng = random.Random("fit-%s" % model_name)
    for _ in range(12):
        workloads = _random_workloads(rng, model, rng.randint(1, 6))
        parsed, pool = fit_mod.parse_input({"workloads": workloads, "pool": {"model": model_name}})
        exact = fit_mod.fit(parsed, pool, method="exact")
        heuristic = fit_mod.fit(parsed, pool, method="heuristic")
        expected = _brute_force(workloads, model)
        assert len(exact.gpus) == expected, workloads
        assert len(heuristic.gpus) >= expected
        by_name = dict((w["name"], w) for w in workloads)
        assert_valid(fit_mod.as_dict(exact), by_name)
        assert_valid(fit_mod.as_dict(heuristic), by_name)


def test_valid_layouts_follow_the_mig_combination_rules():
    geo = fit_mod.geometry(catalog.get(A100_40))
    valid = set(tuple(sorted((geo.names[i], n) for i, n in enumerate(layout) if n)) for layout in geo.layouts)
    assert (("3g.20gb", 2),) in valid
    assert (("3g.20gb", 1), ("4g.20gb", 1)) in valid
    assert (("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)) in valid
    assert (("1g.5gb", 7),) in valid
    assert (("4g.20gb", 2),) not in valid            # max one 4g
    assert (("1g.5gb", 1), ("3g.20gb", 2)) not in valid  # nothing fits beside 3g + 3g
    assert (("1g.10gb", 1), ("1g.5gb", 6)) in valid    # 1g.10gb at 6 covers slice 7
    assert all(geo.slices_of(layout) <= 8 and geo.compute_of(layout) <= 7 for layout in geo.layouts)


# -- the inventory plans cleanly --------------------------------------------------------------

def _plan_inventory(gpuprov, tmp_path, workloads_path, *extra):
    inventory = str(tmp_path / "fit-inventory.yml")
    code, out, err = gpuprov("fit", workloads_path, "-o", "inventory", "-w", inventory, *extra)
    assert code == 0, err
    assert out == "" and "wrote %s" % inventory in err
    code, out, err = gpuprov("plan", "-i", inventory, "-o", "json")
    assert code == 0, err
    return json.loads(out), fit_json(gpuprov, workloads_path, *extra)


def test_inventory_of_the_example_plans_cleanly(gpuprov, tmp_path):
    plan, data = _plan_inventory(gpuprov, tmp_path, EXAMPLE)
    nodes = plan["nodes"]
    assert list(nodes) == ["fit-a100-sxm4-40gb-01"]
    node = nodes["fit-a100-sxm4-40gb-01"]
    assert node["strategy"] == "mig" and node["gpu_count"] == 2
    # The planner places the same instances the fit reported, at the same slices.
    for gpu in data["gpus"]:
        planned = node["gpus"][gpu["index"]]["mig"]["instances"]
        assert sorted((i["profile"], i["placement"]["start"]) for i in planned) == sorted(
            (i["profile"], i["placement"]["start"]) for i in gpu["mig"]["instances"])
    assert node["resources"] == {"nvidia.com/mig-1g.10gb": 2, "nvidia.com/mig-3g.20gb": 3}
    requested = {}
    for gpu in data["gpus"]:
        for w in gpu["workloads"]:
            requested[w["resource"]] = requested.get(w["resource"], 0) + 1
    assert requested == node["resources"]


def test_inventory_with_several_strategies_and_models_plans_cleanly(gpuprov, tmp_path):
    # One A100-40GB, T4s (15 GiB, no MIG). Chat 18 GiB hard x2 -> 3g.20gb x2 fill the A100.
    # The soft rest, 9 x 3 + 14 = 41 GiB, needs 3 T4s (41 > 2 x 15): 5 x 3, 4 x 3, and 14
    # alone. 4 GPUs on two hosts: MIG on the A100, time-slicing (5 replicas) on the T4s.
    workloads = [{"name": "Chat", "memory": 18, "isolation": "hard", "replicas": 2},
                 {"name": "Notebook", "memory": 3, "replicas": 9}, {"name": "Render", "memory": 14}]
    path = write(tmp_path, {"workloads": workloads,
                            "pool": [{"model": A100_40, "count": 1}, {"model": "T4", "count": 8}]})
    plan, data = _plan_inventory(gpuprov, tmp_path, path)
    assert_valid(data, dict((w["name"], w) for w in workloads))
    assert data["gpus_used"] == 4 and data["optimal"] is True
    assert dict((host, node["strategy"]) for host, node in plan["nodes"].items()) == {
        "fit-a100-sxm4-40gb-01": "mig", "fit-t4-01": "time-slicing"}
    assert plan["nodes"]["fit-t4-01"]["resources"] == {"nvidia.com/gpu": 15}
    assert sorted(g["sharing"] for g in data["gpus"]) == ["mig", "time-slicing", "time-slicing", "whole"]
    assert plan["summary"]["physical_gpus"] == 4


def test_physical_nodes_time_slice_whole_gpus_beside_mig(gpuprov, tmp_path):
    # One node of 4 A100-40GB. H+H share a GPU as 3g.20gb x2 and Big (20 GiB) + Mid (15 GiB)
    # are time-sliced on a second GPU: two sharing methods on one node. The device plugin
    # time-slices only the MIG-disabled GPU (time_slicing_replicas: {gpu: 2}), so the MIG
    # instances stay unshared and 2 GPUs suffice; GPUs 2-3 stay idle.
    workloads = [{"name": "H", "memory": 12, "isolation": "hard", "replicas": 2},
                 {"name": "Big", "memory": 20}, {"name": "Mid", "memory": 15}]
    path = write(tmp_path, {"workloads": workloads, "pool": {"model": A100_40, "count": 4, "gpus_per_node": 4}})
    plan, data = _plan_inventory(gpuprov, tmp_path, path)
    assert data["gpus_used"] == 2 and data["nodes_used"] == 1 and data["optimal"] is True
    node = plan["nodes"]["fit-a100-sxm4-40gb-01"]
    assert node["gpu_count"] == 4 and node["strategy"] == "mig"
    assert node["mig"]["time_slicing_replicas"] == {"gpu": 2}
    # The plugin time-slices every MIG-disabled GPU (one resource name), the idle ones too: 3 x 2.
    assert node["resources"] == {"nvidia.com/gpu": 6, "nvidia.com/mig-3g.20gb": 2}
    assert [bool(g["mig"]["enabled"]) for g in node["gpus"]].count(False) == 3
    config = node["device_plugin"]["config"]["sharing"]["timeSlicing"]["resources"]
    assert config == [{"name": "nvidia.com/gpu", "replicas": 2}]
    assert sorted(g["sharing"] for g in data["gpus"]) == ["mig", "time-slicing"]
    assert_valid(data, dict((w["name"], w) for w in workloads))


def test_physical_nodes_keep_one_method_per_node_with_mps(gpuprov, tmp_path):
    # MPS cannot join a MIG node: the same pool packs without sharing on the MIG model.
    workloads = [{"name": "H", "memory": 12, "isolation": "hard", "replicas": 2},
                 {"name": "Big", "memory": 20}, {"name": "Mid", "memory": 15}]
    path = write(tmp_path, {"workloads": workloads, "pool": {"model": A100_40, "count": 4, "gpus_per_node": 4}})
    code, out, err = gpuprov("fit", path, "-o", "json", "--soft-sharing", "mps")
    assert code == 0, err
    data = json.loads(out)
    assert data["gpus_used"] == 3 and data["nodes_used"] == 1 and data["optimal"] is False
    assert any("every node runs one sharing method" in line for line in data["explanation"])


# -- scale ------------------------------------------------------------------------------------

def test_heuristic_at_scale_is_valid_and_close_to_the_bound():
    model = catalog.get("A100-80GB")
    rng = random.Random(20260)
    workloads = _random_workloads(rng, model, 300)
    parsed, pool = fit_mod.parse_input({"workloads": workloads, "pool": {"model": "A100-80GB"}})
    result = fit_mod.fit(parsed, pool)
    assert result.method == "heuristic"
    data = fit_mod.as_dict(result)
    assert_valid(data, dict((w["name"], w) for w in workloads))
    assert data["lower_bound"] <= data["gpus_used"] <= 1.1 * data["lower_bound"]


def test_compute_bound_hard_work_and_memory_bound_soft_work_add_up():
    # H100-80GB (81559 MiB = 79.65 GiB). 70 hard 4.5 GiB copies -> 1g.10gb each, 1 compute slice:
    # at most 7 per GPU -> 10 MIG GPUs, full on compute, so no soft copy can join them.
    # 130 soft 3 GiB copies: 26 per shared GPU (78 GiB; 27 would be 81) -> 5 GPUs. 15 in all.
    # Memory slices alone prove 70/8 + 390/79.65 = 13.65 -> 14; compute slices of the MIG
    # work plus memory of the shared work prove 70/7 + 390/79.65 = 14.9 -> 15: reached.
    parsed, pool = fit_mod.parse_input({"workloads": [
        {"name": "Iso", "memory": 4.5, "isolation": "hard", "replicas": 70},
        {"name": "Svc", "memory": 3, "replicas": 130}], "pool": {"model": "H100-80GB"}})
    result = fit_mod.fit(parsed, pool)
    assert len(result.gpus) == 15 and result.optimal and result.method == "heuristic"
    assert fit_mod.explanation(result)[0] == (
        "lower bound 15 GPUs from MIG compute slices and shared memory (70 compute slices (7 per GPU) for MIG "
        "workloads + 390 GiB (79.65 per GPU) shared: 14.90 GPUs); reached")
    assert ("lower bound 14 GPUs from MIG profile granularity (70 memory slices (8 per GPU) for MIG workloads + "
            "390 GiB (79.65 per GPU) shared: 13.65 GPUs)") in fit_mod.explanation(result)


def test_auto_switches_to_the_heuristic_above_the_exact_limit():
    rows = [{"name": "w", "memory": 3, "replicas": fit_mod.EXACT_LIMIT}]
    parsed, pool = fit_mod.parse_input({"workloads": rows, "pool": {"model": "T4"}})
    assert fit_mod.fit(parsed, pool).method == "exact"
    rows[0]["replicas"] += 1
    parsed, pool = fit_mod.parse_input({"workloads": rows, "pool": {"model": "T4"}})
    result = fit_mod.fit(parsed, pool)
    # 13 x 3 GiB on 15 GiB T4s: 5 per GPU by memory -> 3 GPUs, the bound, so proven anyway.
    assert result.method == "heuristic" and len(result.gpus) == 3 and result.optimal


# -- bad input --------------------------------------------------------------------------------

def test_bad_workloads_are_all_listed(gpuprov, tmp_path):
    path = write(tmp_path, {"workloads": [
        {"name": "Chat", "memory": 0, "isolation": "hard"},
        {"name": "Embed", "memory": "8 GB", "isolation": "strict"},
        {"memory": 4},
        {"name": "Big", "memory": 50, "isolation": "hard"},
        {"name": "Huge", "memory": 200},
        {"name": "Slim", "compute": 1},
        {"name": "Wide", "memory": 4, "compute": "9g", "replicas": 0},
        {"name": "Chat", "memory": "lots"},
    ], "pool": {"model": A100_40}})
    code, out, err = gpuprov("fit", path)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "gpuprov fit: 11 problem(s) in %s; nothing was fitted:" % path,
        "workload Chat: memory: must be > 0, got 0",
        "workload Embed: isolation: must be hard (own MIG instance) or soft (may share a GPU), got 'strict'",
        "workloads[2]: name: required",
        "workload Slim: memory: required (GiB, or a size such as \"10GiB\" or \"10GB\")",
        "workload Slim: compute: 1 is ambiguous: write 1.0 for a whole GPU or \"1g\" for one MIG compute slice",
        "workload Wide: compute: compute slices must be from 1 to 7 (\"1g\"..\"7g\"), got '9g'",
        "workload Wide: replicas: must be a positive integer, got 0",
        "workload Chat: name: used twice (workloads[0] and [7]); names must be unique",
        "workload Chat: memory: must be a size such as 10 (GiB), \"10GiB\" or \"10GB\", got 'lots'",
        "workload Big: memory: 50 GiB (isolation: hard) is more than the largest MIG instance in the pool holds "
        "(7g.40gb, 39.25 GiB on A100-SXM4-40GB); use a bigger GPU model or isolation: soft",
        "workload Huge: memory: 200 GiB is more than any GPU in the pool has (largest: A100-SXM4-40GB with 40 GiB)",
    ]


def test_bad_pool_is_listed_with_suggestions(gpuprov, tmp_path):
    path = write(tmp_path, {"workloads": [{"name": "Chat", "memory": 10, "isolation": "hard"}],
                            "pool": [{"model": "A100-40", "count": 2}, {"count": 1}, {"model": "T4", "count": "many"},
                                     {"model": "H100", "count": 6, "gpus_per_node": 4}]})
    code, _, err = gpuprov("fit", path)
    assert code == 2
    lines = err.splitlines()[1:]
    assert lines[0].startswith("pool[0]: model: unknown GPU model 'A100-40' (did you mean A100-SXM4-40GB")
    assert lines[1:] == ["pool[1]: model: required (see `gpuprov catalog`)",
                         "pool[2]: count: must be a positive integer or `unlimited`, got 'many'",
                         "pool[3]: count: 6 GPUs do not make whole nodes of 4 (gpus_per_node)"]


def test_hard_workloads_need_a_mig_model(gpuprov, tmp_path):
    code, _, err = gpuprov("fit", write(tmp_path, {"workloads": [{"name": "Chat", "memory": 10, "isolation": "hard"}],
                                                   "pool": {"model": "T4", "count": 2}}))
    assert code == 2
    assert err.splitlines()[1] == ("workload Chat: isolation: hard needs a MIG instance, but no GPU model in the "
                                   "pool has MIG (T4); add a MIG-capable model (see `gpuprov catalog`) or use "
                                   "isolation: soft")


@pytest.mark.parametrize("content,name,message", [
    ("workloads: [\n", "w.yaml", "not valid YAML"),
    ('{"workloads": [', "w.json", "not valid JSON"),
    ("- just a list\n", "w.yaml", "expected a mapping with `workloads:` and `pool:`"),
    ("workloads: []\npool: {model: T4}\n", "w.yaml", "workloads: must be a non-empty list"),
    ("workloads: [{name: a, memory: 1}]\n", "w.yaml", "pool: required"),
    ("workloads: [{name: a, memory: 1}]\npool: {model: T4}\nextra: 1\n", "w.yaml", "unknown key(s) extra"),
])
def test_unreadable_files(gpuprov, tmp_path, content, name, message):
    path = tmp_path / name
    path.write_text(content)
    code, _, err = gpuprov("fit", str(path))
    assert code == 2 and message in err and "Traceback" not in err


def test_missing_file(gpuprov, tmp_path):
    code, _, err = gpuprov("fit", str(tmp_path / "nope.yaml"))
    assert code == 2 and "nope.yaml: no such file" in err
