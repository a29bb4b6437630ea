# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.modules import mig_layout


def _mig_node(fake_node, gpus=(("H100-80GB", 1),), layouts=None):
    """A node whose MIG GPUs have MIG enabled; ``layouts`` = {index: [(profile, start)]}."""
    state = fake_node.setup(list(gpus))
    for gpu in state["gpus"]:
        if gpu["mig_current"] is not None:
            fake_node.pynvml.set_mig_mode(state, gpu["index"], True)
    for index, instances in (layouts or {}).items():
        fake_node.pynvml.create_instances(state, index, instances)
    fake_node.save(state)
    return state


def _gi_ids(fake_node, index):
    return dict(((gi["placement"]["start"], gi["profile_id"]), gi["id"])
                for gi in fake_node.load()["gpus"][index]["gpu_instances"])


def _rows(result_rows):
    return [(r["profile"], r["placement"]["start"]) for r in result_rows]


def test_counts_layout_is_created_then_idempotent(fake_node, run_module):
    _mig_node(fake_node)
    layout = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    first = run_module(mig_layout.main, {"layout": layout})
    assert not first.failed and first["changed"] is True
    gpu = first["gpus"][0]
    assert gpu["destroyed"] == [] and gpu["kept"] == []
    created = _rows(gpu["created"])
    assert sorted(p for p, _start in created) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert fake_node.layout(0) == created == _rows(gpu["after"])
    # Every new GPU instance has one compute instance spanning it.
    for gi in fake_node.load()["gpus"][0]["gpu_instances"]:
        assert len(gi["compute_instances"]) == 1

    second = run_module(mig_layout.main, {"layout": layout})
    assert second["changed"] is False
    assert _rows(second["gpus"][0]["kept"]) == _rows(gpu["after"])
    assert second["gpus"][0]["created"] == [] and second["gpus"][0]["destroyed"] == []


def test_check_mode_changes_nothing_and_returns_the_plan(fake_node, run_module):
    _mig_node(fake_node, layouts={0: [("4g.40gb", 0), ("3g.40gb", 4)]})
    before = fake_node.raw()
    result = run_module(mig_layout.main, {"layout": {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}},
                        check_mode=True, diff=True)
    assert result["changed"] is True
    gpu = result["gpus"][0]
    assert _rows(gpu["kept"]) == [("4g.40gb", 0)]
    assert _rows(gpu["destroyed"]) == [("3g.40gb", 4)]
    assert _rows(gpu["created"]) == [("2g.20gb", 4), ("1g.10gb", 6)]
    assert fake_node.raw() == before
    assert result["diff"]["before"] == "GPU 0 (NVIDIA H100 80GB HBM3): 4g.40gb@0 3g.40gb@4\n"
    assert result["diff"]["after"] == "GPU 0 (NVIDIA H100 80GB HBM3): 4g.40gb@0 2g.20gb@4 1g.10gb@6\n"


def test_keeps_what_matches(fake_node, run_module):
    _mig_node(fake_node, layouts={0: [("4g.40gb", 0), ("3g.40gb", 4)]})
    kept_id = _gi_ids(fake_node, 0)[(0, 5)]
    result = run_module(mig_layout.main, {"layout": {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}})
    assert not result.failed and result["changed"] is True
    assert _rows(result["gpus"][0]["destroyed"]) == [("3g.40gb", 4)]
    assert fake_node.layout(0) == [("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]
    # The 4g instance is the very same one (same GPU instance id), not a re-creation.
    assert _gi_ids(fake_node, 0)[(0, 5)] == kept_id


def test_refuses_to_destroy_an_instance_in_use(fake_node, run_module):
    state = _mig_node(fake_node, layouts={0: [("4g.40gb", 0), ("3g.40gb", 4)]})
    gi_3g = _gi_ids(fake_node, 0)[(4, 9)]
    fake_node.pynvml.add_process(state, 0, 5151, 2000, gpu_instance_id=gi_3g)
    with fake_node.edit() as live:
        live["gpus"][0]["processes"] = state["gpus"][0]["processes"]
    before = fake_node.raw()
    result = run_module(mig_layout.main, {"layout": {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}})
    assert result.failed
    assert "GPU 0 (NVIDIA H100 80GB HBM3, 00000000:07:00.0)" in result["msg"]
    assert "would destroy 3g.40gb at slice 4, which has running processes; stop them or set force" in result["msg"]
    assert fake_node.raw() == before


def test_layout_that_keeps_the_busy_instance_is_allowed(fake_node, run_module):
    state = _mig_node(fake_node, layouts={0: [("4g.40gb", 0), ("3g.40gb", 4)]})
    gi_4g = _gi_ids(fake_node, 0)[(0, 5)]
    fake_node.pynvml.add_process(state, 0, 5151, 2000, gpu_instance_id=gi_4g)
    fake_node.save(state)
    result = run_module(mig_layout.main, {"layout": {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}})
    assert not result.failed
    assert fake_node.layout(0) == [("4g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]


def test_force_skips_the_check_when_processes_cannot_be_placed(fake_node, run_module):
    state = _mig_node(fake_node, layouts={0: [("3g.40gb", 0), ("3g.40gb", 4)]})
    # A process NVML did not attribute to an instance: every instance counts as busy.
    state["gpus"][0]["processes"] = [{"pid": 61, "used_memory_mib": 10}]
    fake_node.save(state)
    layout = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
    refused = run_module(mig_layout.main, {"layout": layout})
    assert refused.failed and "running processes" in refused["msg"]
    forced = run_module(mig_layout.main, {"layout": layout, "force": True})
    assert not forced.failed and forced["changed"] is True
    assert len(forced["gpus"][0]["kept"]) == 1 and forced["gpus"][0]["kept"][0]["profile"] == "3g.40gb"


def test_force_cannot_destroy_what_the_driver_holds_and_rolls_back(fake_node, run_module):
    state = _mig_node(fake_node, layouts={0: [("4g.40gb", 0), ("3g.40gb", 4)]})
    fake_node.pynvml.add_process(state, 0, 5151, 2000, gpu_instance_id=_gi_ids(fake_node, 0)[(4, 9)])
    fake_node.save(state)
    result = run_module(mig_layout.main, {"layout": {"7g.80gb": 1}, "force": True})
    assert result.failed
    # The 4g went first, then NVML refused the busy 3g: the 4g is put back where it was.
    assert "destroying 3g.40gb at slice 4 failed" in result["msg"]
    assert "In use by another client" in result["msg"]
    assert "Rolled back: the GPU holds its previous layout again (4g.40gb@0 3g.40gb@4)" in result["msg"]
    assert result["failed_gpu"]["rolled_back"] is True
    assert fake_node.layout(0) == [("4g.40gb", 0), ("3g.40gb", 4)]


def test_rollback_after_a_failed_create(fake_node, run_module):
    state = _mig_node(fake_node, layouts={0: [("4g.40gb", 0), ("3g.40gb", 4)]})
    state["gpus"][0]["fail_create_after"] = 1  # the 2g is created, the 1g fails
    fake_node.save(state)
    result = run_module(mig_layout.main, {"layout": {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}})
    assert result.failed
    assert "creating 1g.10gb at slice 6 failed" in result["msg"]
    assert "Rolled back" in result["msg"]
    failed = result["failed_gpu"]
    assert failed["index"] == 0 and failed["rolled_back"] is True
    assert _rows(failed["destroyed_then_restored"]) == [("3g.40gb", 4)]
    assert _rows(failed["created_then_removed"]) == [("2g.20gb", 4)]
    # Back to the old layout, at the same placements, each with its compute instance.
    assert fake_node.layout(0) == [("4g.40gb", 0), ("3g.40gb", 4)]
    assert all(len(gi["compute_instances"]) == 1 for gi in fake_node.load()["gpus"][0]["gpu_instances"])


def test_failed_rollback_says_what_is_left(fake_node, run_module):
    state = _mig_node(fake_node, layouts={0: [("4g.40gb", 0), ("3g.40gb", 4)]})
    state["gpus"][0]["fail_create_after"] = 1
    state["gpus"][0]["fail_create_count"] = 2  # the 1g fails, then re-creating the 3g fails too
    fake_node.save(state)
    result = run_module(mig_layout.main, {"layout": {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}})
    assert result.failed
    assert "Rolling back also failed: could not re-create 3g.40gb at slice 4" in result["msg"]
    assert "The GPU now holds: 4g.40gb@0;" in result["msg"]
    assert result["failed_gpu"]["rolled_back"] is False
    assert result["failed_gpu"]["layout_now"] == "4g.40gb@0"
    assert fake_node.layout(0) == [("4g.40gb", 0)]


def test_per_gpu_devices_with_explicit_placements(fake_node, run_module):
    _mig_node(fake_node, gpus=[("H100-80GB", 2), ("T4", 1)], layouts={1: [("1g.10gb", 0), ("1g.10gb", 6)]})
    devices = [
        {"index": 0, "instances": [{"profile": "3g.40gb", "placement": {"start": 4, "size": 4}},
                                   {"profile": "2g.20gb", "placement": {"start": 0, "size": 2}}]},
        {"index": 1, "mig_devices": {"1g.10gb": 3}},
    ]
    result = run_module(mig_layout.main, {"devices": devices})
    assert not result.failed
    assert fake_node.layout(0) == [("2g.20gb", 0), ("3g.40gb", 4)]
    gpu1 = result["gpus"][1]
    assert _rows(gpu1["kept"]) == [("1g.10gb", 0), ("1g.10gb", 6)] and len(gpu1["created"]) == 1
    again = run_module(mig_layout.main, {"devices": devices})
    assert again["changed"] is False


def test_explicit_instances_move_an_instance_to_its_planned_slice(fake_node, run_module):
    _mig_node(fake_node, layouts={0: [("3g.40gb", 0)]})
    result = run_module(mig_layout.main, {"instances": [{"profile": "3g.40gb", "placement": {"start": 4}}]})
    assert _rows(result["gpus"][0]["destroyed"]) == [("3g.40gb", 0)]
    assert fake_node.layout(0) == [("3g.40gb", 4)]


def test_wrong_placement_size_is_refused(fake_node, run_module):
    _mig_node(fake_node)
    result = run_module(mig_layout.main, {"instances": [{"profile": "3g.40gb", "placement": {"start": 4, "size": 2}}]})
    assert result.failed and "3g.40gb at slice 4 covers 4 memory slices, not 2" in result["msg"]


def test_invalid_layout_names_the_gpu(fake_node, run_module):
    _mig_node(fake_node)
    result = run_module(mig_layout.main, {"layout": {"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}})
    assert result.failed
    assert result["msg"].startswith("GPU 0 (NVIDIA H100 80GB HBM3, 00000000:07:00.0): ")
    assert "8 compute slices but the GPU has 7" in result["msg"]
    unknown = run_module(mig_layout.main, {"layout": {"1g.5gb": 1}})
    assert "has no MIG profile 1g.5gb; its profiles: 1g.10gb" in unknown["msg"]


def test_mig_disabled_or_pending_fails_naming_the_gpu(fake_node, run_module):
    state = fake_node.setup([("A100-80GB", 2)])
    state["gpus"][1]["mig_pending"] = True
    fake_node.save(state)
    disabled = run_module(mig_layout.main, {"gpus": [0], "layout": {"7g.80gb": 1}})
    assert disabled.failed
    assert "GPU 0 (NVIDIA A100-SXM4-80GB, 00000000:07:00.0): MIG mode is disabled; " \
           "enable it with gpuprov.gpu.mig_mode first" in disabled["msg"]
    pending = run_module(mig_layout.main, {"gpus": [1], "layout": {"7g.80gb": 1}})
    assert "enabling MIG is pending a GPU reset" in pending["msg"] and "nvidia-smi -r -i 00000000:17:00.0" in pending["msg"]


def test_gpu_without_mig(fake_node, run_module):
    _mig_node(fake_node, gpus=[("H100-80GB", 1), ("T4", 1)])
    named = run_module(mig_layout.main, {"devices": [{"index": 1, "mig_devices": {"1g.10gb": 1}}]})
    assert named.failed and "GPU 1 (Tesla T4, 00000000:17:00.0) does not support MIG" in named["msg"]
    everything = run_module(mig_layout.main, {"layout": {"7g.80gb": 1}})
    assert not everything.failed
    assert everything["skipped_gpus"] == [{"index": 1, "name": "Tesla T4", "reason": "no MIG support"}]
    assert fake_node.layout(0) == [("7g.80gb", 0)]


def test_lost_gpu_gives_a_clear_error(fake_node, run_module):
    state = _mig_node(fake_node, layouts={0: [("7g.80gb", 0)]})
    state["gpus"][0]["lost"] = True
    fake_node.save(state)
    result = run_module(mig_layout.main, {"devices": [{"index": 0, "mig_devices": {"1g.10gb": 7}}]})
    assert result.failed
    assert "GPU 0" in result["msg"] and "GPU is lost" in result["msg"]
    assert "fallen off the bus" in result["msg"]


def test_kept_instance_without_compute_instance_gets_one(fake_node, run_module):
    state = _mig_node(fake_node, layouts={0: [("7g.80gb", 0)]})
    state["gpus"][0]["gpu_instances"][0]["compute_instances"] = []
    fake_node.save(state)
    result = run_module(mig_layout.main, {"layout": {"7g.80gb": 1}})
    assert result["changed"] is True
    assert _rows(result["gpus"][0]["compute_instances_created"]) == [("7g.80gb", 0)]
    assert len(fake_node.load()["gpus"][0]["gpu_instances"][0]["compute_instances"]) == 1
    assert run_module(mig_layout.main, {"layout": {"7g.80gb": 1}})["changed"] is False


def test_devices_and_gpus_are_mutually_exclusive(fake_node, run_module):
    _mig_node(fake_node)
    result = run_module(mig_layout.main, {"gpus": ["0"], "devices": [{"index": 0, "mig_devices": {}}]})
    assert result.failed and "mutually exclusive" in result["msg"]


def test_failure_on_a_later_gpu_reports_the_earlier_ones(fake_node, run_module):
    state = _mig_node(fake_node, gpus=[("H100-80GB", 2)], layouts={0: [("7g.80gb", 0)], 1: [("7g.80gb", 0)]})
    state["gpus"][1]["fail_create_after"] = 0
    fake_node.save(state)
    result = run_module(mig_layout.main, {"layout": {"3g.40gb": 2}})
    assert result.failed and result["changed"] is True
    assert result["msg"].startswith("GPU 1 (NVIDIA H100 80GB HBM3, 00000000:17:00.0): creating 3g.40gb at slice 0 failed")
    assert "Rolled back: the GPU holds its previous layout again (7g.80gb@0)." in result["msg"]
    assert result["msg"].endswith("Already changed by this task, and left in their new layout: "
                                  "GPU 0 (NVIDIA H100 80GB HBM3): 3g.40gb@0 3g.40gb@4.")
    assert fake_node.layout(0) == [("3g.40gb", 0), ("3g.40gb", 4)]
    assert fake_node.layout(1) == [("7g.80gb", 0)]


def test_instances_of_other_profiles_are_seen_and_named(fake_node, run_module):
    # Another tool made a "-me" 1g (NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME) with a process on it:
    # gpuprov must not take its slice for free, and must name it.
    pynvml = fake_node.pynvml
    state = fake_node.setup([("H100-80GB", 1)])
    pynvml.add_profile(state, "H100-80GB", pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, 21, "1g.10gb-me",
                       1, 9984, [(s, 1) for s in range(7)], instance_count=7)
    pynvml.set_mig_mode(state, 0, True)
    gi_id = pynvml.create_instances(state, 0, [("1g.10gb-me", 0)])[0]
    pynvml.add_process(state, 0, 4242, 10, gpu_instance_id=gi_id)
    fake_node.save(state)
    result = run_module(mig_layout.main, {"layout": {"1g.10gb": 7}})
    assert result.failed
    assert "1g.10gb-me" in result["msg"]
    assert fake_node.load()["gpus"][0]["gpu_instances"][0]["profile_id"] == 21  # left alone


def test_non_root_is_told_to_become_root(fake_node, run_module, monkeypatch):
    # nvml.h: placements and instance creation "Requires privileged user".
    state = fake_node.setup([("H100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.save(state)
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    result = run_module(mig_layout.main, {"layout": {"7g.80gb": 1}})
    assert result.failed and "run as root (become: true)" in result["msg"]
    assert fake_node.load()["gpus"][0]["gpu_instances"] == []
