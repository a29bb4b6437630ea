"""gpuprov pool: free capacity per node and resource, and --fits."""
import json

import pytest


def node(name, allocatable, labels, capacity=None, unschedulable=False):
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": unschedulable} if unschedulable else {},
            "status": {"allocatable": allocatable, "capacity": capacity or allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name, node_name, requests, phase="Running"):
    return {"metadata": {"name": name, "namespace": "ml"},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"limits": requests}}]},
            "status": {"phase": phase}}


@pytest.fixture
def snapshot(tmp_path):
    nodes = [
        # A100-40GB, MIG mixed strategy: GFD labels the 1g.5gb memory, the catalog knows 3g.20gb.
        node("a100-mig", {"nvidia.com/mig-3g.20gb": "2", "nvidia.com/mig-1g.5gb": "4", "cpu": "32"},
             {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/mig-1g.5gb.memory": "4864",
              "nvidia.com/gpu.count": "1"}),
        # T4 time-sliced 4 ways: 15 GiB shared by 4 slots.
        node("t4-ts", {"nvidia.com/gpu": "4"},
             {"nvidia.com/gpu.product": "Tesla-T4-SHARED", "nvidia.com/gpu.memory": "15360",
              "nvidia.com/gpu.count": "1", "nvidia.com/gpu.sharing-strategy": "time-slicing"}),
        # H100 exclusive, cordoned.
        node("h100-off", {"nvidia.com/gpu": "2"},
             {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2"}, unschedulable=True),
        node("cpu-only", {"cpu": "8"}, {}),
    ]
    pods = [
        pod("train-0", "a100-mig", {"nvidia.com/mig-3g.20gb": 1}),
        *[pod("small-%d" % i, "a100-mig", {"nvidia.com/mig-1g.5gb": 1}) for i in range(4)],
        pod("done-0", "a100-mig", {"nvidia.com/mig-3g.20gb": 1}, phase="Succeeded"),
        pod("web-0", "t4-ts", {"nvidia.com/gpu": 1}),
    ]
    (tmp_path / "nodes.json").write_text(json.dumps({"kind": "NodeList", "items": nodes}))
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "PodList", "items": pods}))
    return str(tmp_path)


def rows(stdout):
    return {(r["node"], r["resource"]): r for r in json.loads(stdout)["nodes"]}


def test_pool_lists_allocatable_allocated_free_and_memory_per_slot(gpuprov, snapshot):
    code, out, _ = gpuprov("pool", "--snapshot", snapshot, "-o", "json")
    assert code == 0
    table = rows(out)
    assert sorted(table) == [("a100-mig", "nvidia.com/mig-1g.5gb"), ("a100-mig", "nvidia.com/mig-3g.20gb"),
                             ("h100-off", "nvidia.com/gpu"), ("t4-ts", "nvidia.com/gpu")]
    mig3 = table[("a100-mig", "nvidia.com/mig-3g.20gb")]
    # The Succeeded pod no longer holds its instance.
    assert (mig3["allocatable"], mig3["allocated"], mig3["free"]) == (2, 1, 1)
    assert mig3["slot_gib"] == 19.5 and mig3["memory_from"].startswith("catalog")   # 3g.20gb = 19.5 GiB on A100-40GB
    assert mig3["isolation"] == "hard" and mig3["sharing"] == "mig"
    mig1 = table[("a100-mig", "nvidia.com/mig-1g.5gb")]
    assert (mig1["free"], mig1["slot_gib"], mig1["memory_from"]) == (0, 4.75, "GFD label")
    t4 = table[("t4-ts", "nvidia.com/gpu")]
    assert (t4["free"], t4["slot_gib"], t4["free_gib"], t4["isolation"]) == (3, 3.75, 11.25, "soft")
    h100 = table[("h100-off", "nvidia.com/gpu")]
    assert h100["blocked"] == "cordoned" and h100["sharing"] == "exclusive" and h100["slot_gib"] == 79.65   # catalog: 81559 MiB


def test_fits_lists_only_places_with_room_now(gpuprov, snapshot):
    code, out, _ = gpuprov("pool", "--snapshot", snapshot, "--fits", "10GiB", "-o", "json")
    assert code == 0
    assert sorted(rows(out)) == [("a100-mig", "nvidia.com/mig-3g.20gb")]   # cordoned H100 left out
    code, out, _ = gpuprov("pool", "--snapshot", snapshot, "--fits", "3", "-o", "json")
    assert sorted(rows(out)) == [("a100-mig", "nvidia.com/mig-3g.20gb"), ("t4-ts", "nvidia.com/gpu")]
    code, out, _ = gpuprov("pool", "--snapshot", snapshot, "--fits", "3GiB", "--isolation", "hard", "-o", "json")
    assert sorted(rows(out)) == [("a100-mig", "nvidia.com/mig-3g.20gb")]


def test_fits_nothing_exits_1_with_the_table(gpuprov, snapshot):
    code, out, _ = gpuprov("pool", "--snapshot", snapshot, "--fits", "40GiB")
    assert code == 1
    assert "0 place(s) where 40 GiB (isolation any) fits now" in out


def test_table_output(gpuprov, snapshot):
    code, out, _ = gpuprov("pool", "--snapshot", snapshot)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NODE", "RESOURCE", "ALLOCATABLE", "ALLOCATED", "FREE", "GiB/SLOT", "FREE", "GiB",
                                "SHARING", "BLOCKED"]
    assert lines[4].split() == ["t4-ts", "nvidia.com/gpu", "4", "1", "3", "3.75", "11.25", "time-slicing", "-"]


@pytest.mark.parametrize("args,message", [
    (["--fits", "lots"], "--fits: must be a size"),
    (["--isolation", "hard"], "--isolation: only means something with --fits"),
])
def test_bad_input_exits_2(gpuprov, snapshot, args, message):
    code, _, err = gpuprov("pool", "--snapshot", snapshot, *args)
    assert code == 2 and message in err


def test_bad_snapshot_names_the_file(gpuprov, tmp_path):
    (tmp_path / "nodes.json").write_text("{}")
    code, _, err = gpuprov("pool", "--snapshot", str(tmp_path))
    assert code == 2
    assert "nodes.json: kind:" in err and "pods.json: missing" in err
