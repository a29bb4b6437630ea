# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import (
    Instance, LayoutError, ProfileSpec, place, plan_transition, validate_instances)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog


def profiles(model):
    return catalog.get(model).solver_profiles()


def no_overlap(instances):
    used = set()
    for inst in instances:
        slices = set(range(inst.start, inst.start + inst.size))
        assert not used & slices, instances
        used |= slices


@pytest.mark.parametrize("model", ["A100-SXM4-40GB", "A100-80GB", "H100-80GB", "H100-NVL", "H200-141GB", "B200"])
@pytest.mark.parametrize("kinds,valid", [
    (["4g", "4g"], False),
    (["4g", "2g", "1g"], True),
    (["3g", "2g", "1g", "1g"], True),
    (["1g"] * 7, True),
    (["1g2m"] * 4, True),
    (["3g", "3g"], True),
    (["4g", "3g"], True),
    (["3g", "3g", "1g"], False),
    (["4g", "3g", "1g"], False),
    (["2g", "1g", "1g", "1g", "1g", "1g"], True),
    (["2g", "2g", "2g", "1g"], True),
    (["2g", "2g", "2g", "2g"], False),
    (["1g"] * 8, False),
    (["7g"], True),
    (["7g", "1g"], False),
    (["1g+me", "1g+me"], False),
    (["1g2m", "1g2m", "1g2m", "1g2m", "1g"], False),
    (["3g", "1g2m", "1g2m"], True),
])
def test_seven_slice_layouts(model, kinds, valid):
    spec = catalog.get(model)
    names = {}
    for p in spec.mig.profiles.values():
        kind = "%dg" % p.compute_slices
        if p.media_extensions:
            kind += "+me"
        elif p.compute_slices == 1 and p.memory_slices == 2:
            kind = "1g2m"
        names[kind] = p.name
    counts = {}
    for kind in kinds:
        counts[names[kind]] = counts.get(names[kind], 0) + 1
    if valid:
        instances = place(counts, spec.solver_profiles(), 7)
        assert sorted(i.profile for i in instances) == sorted(names[k] for k in kinds)
        no_overlap(instances)
        for inst in instances:
            assert (inst.start, inst.size) in spec.mig.profiles[inst.profile].placements
    else:
        with pytest.raises(LayoutError):
            place(counts, spec.solver_profiles(), 7)


def test_a30_layouts():
    p = profiles("A30")
    assert len(place({"1g.6gb": 4}, p, 4)) == 4
    assert len(place({"2g.12gb": 1, "1g.6gb": 2}, p, 4)) == 3
    with pytest.raises(LayoutError):
        place({"2g.12gb": 2, "1g.6gb": 1}, p, 4)
    with pytest.raises(LayoutError):
        place({"4g.24gb": 1, "1g.6gb": 1}, p, 4)


def test_reference_examples_have_the_documented_placements():
    p = profiles("A100-80GB")
    got = place({"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}, p, 7)
    assert [(i.profile, i.start, i.size) for i in got] == [("4g.40gb", 0, 4), ("2g.20gb", 4, 2), ("1g.10gb", 6, 1)]


def test_place_is_deterministic_and_respects_occupied_slices():
    p = profiles("H100-80GB")
    first = place({"1g.10gb": 3}, p, 7)
    assert first == place({"1g.10gb": 3}, p, 7)
    around = place({"1g.10gb": 3}, p, 7, occupied=0b00001111)
    assert [i.start for i in around] == [4, 5, 6]


def test_compute_slice_limit_is_enforced_independently_of_memory():
    fake = {"a": ProfileSpec("a", [(s, 1) for s in range(8)], 8, 1)}
    assert len(place({"a": 7}, fake, 7)) == 7
    with pytest.raises(LayoutError, match="compute slices"):
        place({"a": 8}, fake, 7)


def test_unknown_profile_and_bad_count_are_errors():
    p = profiles("A100-80GB")
    with pytest.raises(LayoutError, match="unknown MIG profile"):
        place({"1g.5gb": 1}, p, 7)
    with pytest.raises(LayoutError, match="non-negative integer"):
        place({"1g.10gb": -1}, p, 7)


def test_validate_instances_checks_starts_and_overlap():
    p = profiles("A100-80GB")
    assert validate_instances([("3g.40gb", 4), ("4g.40gb", 0)], p, 7)[0] == Instance("4g.40gb", 0, 4)
    with pytest.raises(LayoutError, match="cannot start"):
        validate_instances([("3g.40gb", 2)], p, 7)
    with pytest.raises(LayoutError, match="overlaps"):
        validate_instances([("3g.40gb", 4), ("2g.20gb", 4)], p, 7)


def test_transition_keeps_matching_instances():
    p = profiles("A100-80GB")
    current = place({"4g.40gb": 1, "3g.40gb": 1}, p, 7)
    t = plan_transition(current, {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}, p, 7)
    assert t.keep == [Instance("4g.40gb", 0, 4)]
    assert t.destroy == [Instance("3g.40gb", 4, 4)]
    assert sorted(t.create) == sorted([Instance("2g.20gb", 4, 2), Instance("1g.10gb", 6, 1)])


def test_transition_unchanged_layout_is_a_no_op():
    p = profiles("H100-80GB")
    current = place({"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, p, 7)
    t = plan_transition(current, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, p, 7)
    assert not t.changed and len(t.keep) == 4


def test_transition_keeps_as_many_small_instances_as_fit():
    p = profiles("A100-80GB")
    current = place({"1g.10gb": 7}, p, 7)
    t = plan_transition(current, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, p, 7)
    assert len(t.keep) == 2 and len(t.destroy) == 5 and len(t.create) == 2
    no_overlap(t.keep + t.create)


def test_transition_never_destroys_busy_instance_without_force():
    p = profiles("A100-80GB")
    current = [Instance("3g.40gb", 4, 4), Instance("3g.40gb", 0, 4)]
    busy = [Instance("3g.40gb", 4, 4)]
    # 4g must sit at slice 0, so only the instance at 0 goes; the busy one at 4 stays.
    t = plan_transition(current, {"4g.40gb": 1, "3g.40gb": 1}, p, 7, busy=busy)
    assert Instance("3g.40gb", 4, 4) in t.keep
    with pytest.raises(LayoutError, match="running processes"):
        plan_transition(current, {"7g.80gb": 1}, p, 7, busy=busy)
    forced = plan_transition(current, {"7g.80gb": 1}, p, 7, busy=busy, force=True)
    assert len(forced.destroy) == 2


def test_transition_prefers_keeping_busy_instances():
    p = profiles("A100-80GB")
    current = [Instance("1g.10gb", s, 1) for s in range(7)]
    busy = [Instance("1g.10gb", 6, 1)]
    t = plan_transition(current, {"1g.10gb": 1, "3g.40gb": 1, "2g.20gb": 1}, p, 7, busy=busy)
    assert t.keep == [Instance("1g.10gb", 6, 1)]


def test_explicit_transition_is_exact():
    p = profiles("A100-80GB")
    current = [Instance("3g.40gb", 0, 4)]
    t = plan_transition(current, [("3g.40gb", 4)], p, 7)
    assert t.destroy == [Instance("3g.40gb", 0, 4)] and t.create == [Instance("3g.40gb", 4, 4)]
