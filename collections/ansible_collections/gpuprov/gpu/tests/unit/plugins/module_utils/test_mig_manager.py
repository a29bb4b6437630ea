# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_manager import (
    MigError,
    apply_layout,
    parse_counts,
    parse_instances,
    plan_layout,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml


def _h100_with(fake_node, instances):
    state = fake_node.setup([("H100-80GB", 1)])
    fake_node.pynvml.set_mig_mode(state, 0, True)
    fake_node.pynvml.create_instances(state, 0, instances)
    fake_node.save(state)


def test_gpu_lost_between_plan_and_apply(fake_node):
    _h100_with(fake_node, [("4g.40gb", 0), ("3g.40gb", 4)])
    with Nvml() as nvml:
        info = nvml.gpu_info(0)
        plan = plan_layout(nvml, 0, info, nvml.mig_mode(0), {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1})
        with fake_node.edit() as live:
            live["gpus"][0]["lost"] = True
        with pytest.raises(MigError) as err:
            apply_layout(nvml, plan)
    message = str(err.value)
    assert message.startswith("GPU 0 (NVIDIA H100 80GB HBM3, 00000000:07:00.0): destroying 3g.40gb at slice 4 failed")
    assert "GPU is lost" in message and "fallen off the bus" in message
    # Nothing was destroyed before the loss, so there was nothing to restore.
    assert err.value.details["rolled_back"] is True
    assert err.value.details["layout_now"].startswith("unknown (reading it failed: ")


def test_plan_is_read_only(fake_node):
    _h100_with(fake_node, [("7g.80gb", 0)])
    before = fake_node.raw()
    with Nvml() as nvml:
        plan = plan_layout(nvml, 0, nvml.gpu_info(0), nvml.mig_mode(0), {"1g.10gb": 7})
    assert plan.changed and len(plan.transition.destroy) == 1 and len(plan.transition.create) == 7
    assert fake_node.raw() == before


@pytest.mark.parametrize("counts, message", [
    ({"1g.10gb": -1}, "must be a non-negative integer"),
    ({"1g.10gb": "two"}, "must be a non-negative integer"),
    ({"1g.10gb": True}, "must be a non-negative integer"),
])
def test_bad_counts(counts, message):
    with pytest.raises(MigError) as err:
        parse_counts(counts, "layout")
    assert message in str(err.value) and str(err.value).startswith("layout: the count of 1g.10gb")


def test_counts_accept_numeric_strings_and_drop_zeros():
    assert parse_counts({"1g.10gb": "2", "7g.80gb": 0}, "layout") == {"1g.10gb": 2}


def test_instances_need_a_start():
    with pytest.raises(MigError) as err:
        parse_instances([{"profile": "1g.10gb", "placement": {"size": 1}}], "devices[0].instances")
    assert str(err.value) == "devices[0].instances[0]: 1g.10gb needs placement.start (the memory slice it begins at)"
    assert parse_instances([{"profile": "1g.10gb", "start": 3}], "x") == [("1g.10gb", 3, None)]
