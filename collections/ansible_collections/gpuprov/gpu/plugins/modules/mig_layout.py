#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mig_layout
short_description: Set the MIG GPU and compute instances of NVIDIA GPUs with minimal disruption
version_added: "0.1.0"
description:
  - Converges the MIG instances of the selected GPUs to a wanted layout, given as profile
    counts (mig-parted's C(mig-devices) form), as explicit instances with placements, or per
    GPU.
  - Minimal disruption. Instances already present with a wanted profile are kept where
    they are whenever the rest of the layout fits around them. Only the other instances are
    destroyed, and new ones are created at explicit placements, each with one compute
    instance spanning it. Unlike mig-parted, it does not destroy and re-create everything.
  - An instance with running compute processes is never destroyed unless O(force=true).
  - Each GPU changes all or nothing. If a step fails, the instances this run created are
    destroyed, and the ones it destroyed are re-created at the same placements. The task then
    fails, saying what failed and what the GPU holds now. If that restore fails too, the
    message says exactly what is left.
  - Every selected GPU is planned and checked before any is changed.
  - MIG mode must already be enabled on every selected GPU (see M(gpuprov.gpu.mig_mode)).
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - gpuprov.gpu.attributes
  - ansible.builtin.action_common_attributes
  - gpuprov.gpu.attributes
  - gpuprov.gpu.nvml
  - gpuprov.gpu.gpus.layout
requirements:
  - root privileges on the node
attributes:
  check_mode:
    support: full
    details: Returns the per-GPU plan (kept, destroyed, created) without touching the GPUs.
  diff_mode:
    support: full
options:
  layout:
    description:
      - Profile name to count, for example one V(3g.40gb), one V(2g.20gb) and two
        V(1g.10gb) (see the examples). Placements are chosen here, keeping what already
        matches.
      - An empty dict removes every instance.
    type: dict
  instances:
    description:
      - The exact instances wanted on each selected GPU, with placements (memory slices).
    type: list
    elements: dict
    suboptions:
      profile:
        description: GPU-instance profile name, for example V(1g.10gb).
        type: str
        required: true
      placement:
        description: Where the instance sits.
        type: dict
        required: true
        suboptions:
          start:
            description: First memory slice.
            type: int
            required: true
          size:
            description: Memory slices covered; checked against the profile when given.
            type: int
  devices:
    description:
      - Per-GPU layouts. Each item names a GPU by O(devices[].index) and gives either
        O(devices[].instances) (explicit placements, as C(gpuprov plan) prints them) or
        O(devices[].mig_devices) (profile counts).
      - GPUs not listed are left alone.
    type: list
    elements: dict
    suboptions:
      index:
        description: NVML index of the GPU.
        type: int
        required: true
      mig_devices:
        description: Profile name to count for this GPU.
        type: dict
      instances:
        description: Explicit instances for this GPU, as in O(instances).
        type: list
        elements: dict
        suboptions:
          profile:
            description: GPU-instance profile name, for example V(1g.10gb).
            type: str
            required: true
          placement:
            description: Where the instance sits.
            type: dict
            required: true
            suboptions:
              start:
                description: First memory slice.
                type: int
                required: true
              size:
                description: Memory slices covered; checked against the profile when given.
                type: int
  force:
    description:
      - Destroy instances even though compute processes run in them. The driver still refuses
        (NVML In Use) while a process holds an instance, so this only skips the module's own
        check, for example when the process list is stale; the change is then rolled back.
    type: bool
    default: false
notes:
  - Placements are in memory slices (8 on A100/H100/H200/B200, 4 on A30), as in
    C(nvidia-smi mig -lgipp). The profiles, placements and counts come from the GPU's own NVML.
  - GPU/compute instances do not survive a GPU reset or a reboot; run this module again after either.
seealso:
  - module: gpuprov.gpu.mig_mode
  - module: gpuprov.gpu.gpu_facts
"""

EXAMPLES = r"""
- name: Two 1g, one 2g and one 3g instance on every MIG GPU
  gpuprov.gpu.mig_layout:
    layout:
      1g.10gb: 2
      2g.20gb: 1
      3g.40gb: 1

- name: Exact per-GPU layouts, as gpuprov plan prints them
  gpuprov.gpu.mig_layout:
    devices:
      - index: 0
        instances:
          - {profile: 4g.40gb, placement: {start: 0, size: 4}}
          - {profile: 3g.40gb, placement: {start: 4, size: 4}}
      - index: 1
        mig_devices:
          1g.10gb: 7

- name: Show what would change, without changing it
  gpuprov.gpu.mig_layout:
    layout: {4g.40gb: 1, 2g.20gb: 1, 1g.10gb: 1}
  check_mode: true
  diff: true
"""

RETURN = r"""
gpus:
  description: One entry per GPU handled.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: NVML index.
      type: int
    name:
      description: NVML product name.
      type: str
    pci_bus_id:
      description: PCI bus id.
      type: str
    changed:
      description: Whether this GPU changed (or would, in check mode).
      type: bool
    kept:
      description: Instances left in place.
      type: list
      elements: dict
      sample: [{profile: 4g.40gb, placement: {start: 0, size: 4}}]
    destroyed:
      description: Instances destroyed.
      type: list
      elements: dict
    created:
      description: Instances created, at these placements.
      type: list
      elements: dict
    compute_instances_created:
      description: Kept GPU instances that had no compute instance and got a full-size one.
      type: list
      elements: dict
    before:
      description: Instances before the task.
      type: list
      elements: dict
    after:
      description: Instances after the task (as read back from the GPU; planned in check mode).
      type: list
      elements: dict
skipped_gpus:
  description: GPUs left alone under O(gpus=all) because they do not support MIG.
  returned: always
  type: list
  elements: dict
failed_gpu:
  description: On failure, the GPU that failed, what failed, whether the rollback worked and the layout it holds now.
  returned: failure
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_manager import (
    MigError,
    apply_layout,
    describe_gpu,
    describe_instances,
    parse_counts,
    parse_instances,
    plan_layout,
    select_gpus,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import Instance
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml, NvmlError, NvmlUnavailable

_INSTANCE_SPEC = dict(
    profile=dict(type="str", required=True),
    placement=dict(type="dict", required=True, options=dict(
        start=dict(type="int", required=True),
        size=dict(type="int"),
    )),
)


def _rows_text(rows):
    return describe_instances([Instance(r["profile"], r["placement"]["start"], r["placement"]["size"]) for r in rows])


class MigLayoutManager:
    def __init__(self, module):
        self.module = module
        self.results = []
        self.skipped = []

    def targets(self, nvml):
        """[(index, info, mode, desired)] for every GPU this task configures."""
        params = self.module.params
        if params["devices"] is not None:
            targets, seen = [], set()
            count = nvml.device_count()
            for number, entry in enumerate(params["devices"]):
                where = "devices[%d]" % number
                index = entry["index"]
                if index in seen:
                    raise MigError("%s: GPU %d is listed twice" % (where, index))
                seen.add(index)
                if not 0 <= index < count:
                    raise MigError("%s: GPU %d does not exist; this node has %d GPU(s)" % (where, index, count))
                if (entry.get("mig_devices") is None) == (entry.get("instances") is None):
                    raise MigError("%s: give exactly one of mig_devices or instances for GPU %d" % (where, index))
                if entry.get("instances") is not None:
                    desired = parse_instances(entry["instances"], where + ".instances")
                else:
                    desired = parse_counts(entry["mig_devices"], where + ".mig_devices")
                info = nvml.gpu_info(index)
                mode = nvml.mig_mode(index)
                if mode[0] is None:
                    raise MigError("%s: %s does not support MIG" % (where, describe_gpu(info)), gpu=index)
                targets.append((index, info, mode, desired))
            return targets
        if params["instances"] is not None:
            desired = parse_instances(params["instances"], "instances")
        else:
            desired = parse_counts(params["layout"], "layout")
        selected, self.skipped = select_gpus(nvml, params["gpus"])
        return [(index, info, mode, desired) for index, info, mode in selected]

    def run(self):
        with Nvml() as nvml:
            plans = [plan_layout(nvml, index, info, mode, desired, force=self.module.params["force"])
                     for index, info, mode, desired in self.targets(nvml)]
            for plan in plans:
                if self.module.check_mode or not plan.changed:
                    self.results.append(plan.as_dict())
                else:
                    self.results.append(apply_layout(nvml, plan))

    def changed_before_failure(self):
        done = [r for r in self.results if r["changed"]]
        if not done or self.module.check_mode:
            return ""
        return " Already changed by this task, and left in their new layout: %s." % "; ".join(
            "GPU %d (%s): %s" % (r["index"], r["name"], _rows_text(r["after"])) for r in done)

    def diff(self):
        before, after = [], []
        for res in self.results:
            label = "GPU %d (%s)" % (res["index"], res["name"])
            before.append("%s: %s" % (label, _rows_text(res["before"])))
            after.append("%s: %s" % (label, _rows_text(res["after"])))
        return {"before": "\n".join(before) + "\n", "after": "\n".join(after) + "\n"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="str"),
            layout=dict(type="dict"),
            instances=dict(type="list", elements="dict", options=_INSTANCE_SPEC),
            devices=dict(type="list", elements="dict", options=dict(
                index=dict(type="int", required=True),
                mig_devices=dict(type="dict"),
                instances=dict(type="list", elements="dict", options=_INSTANCE_SPEC),
            ), mutually_exclusive=[["mig_devices", "instances"]]),
            force=dict(type="bool", default=False),
        ),
        mutually_exclusive=[["layout", "instances", "devices"], ["devices", "gpus"]],
        required_one_of=[["layout", "instances", "devices"]],
        supports_check_mode=True,
    )
    manager = MigLayoutManager(module)
    try:
        manager.run()
    except NvmlUnavailable as exc:
        module.fail_json(msg="No usable NVML on this node: %s" % exc, error=exc.as_dict())
    except MigError as exc:
        failed = dict(exc.details, index=exc.gpu) if exc.gpu is not None else None
        module.fail_json(msg=str(exc) + manager.changed_before_failure(), gpus=manager.results,
                         skipped_gpus=manager.skipped, failed_gpu=failed,
                         changed=any(r["changed"] for r in manager.results))
    except NvmlError as exc:
        module.fail_json(msg=str(exc) + manager.changed_before_failure(), gpus=manager.results,
                         skipped_gpus=manager.skipped, error=exc.as_dict(),
                         changed=any(r["changed"] for r in manager.results))
    result = dict(changed=any(r["changed"] for r in manager.results), gpus=manager.results,
                  skipped_gpus=manager.skipped)
    if module._diff:
        result["diff"] = manager.diff()
    module.exit_json(**result)


if __name__ == "__main__":
    main()
