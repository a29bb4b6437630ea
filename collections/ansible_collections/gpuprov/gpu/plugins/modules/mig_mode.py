#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mig_mode
short_description: Enable or disable MIG mode on NVIDIA GPUs
version_added: "0.1.0"
description:
  - Sets MIG mode on the selected GPUs through NVML and reports, per GPU, the mode before and
    after, whether the change is still pending, and whether a GPU reset is needed.
  - On Ampere GPUs (A100, A30) a mode change stays pending until the GPU is reset; with
    O(reset=true) the module resets each such GPU with C(nvidia-smi -r -i <bus id>) and reads
    the mode again. Hopper and later GPUs apply the change at once.
  - Refuses to change a GPU that has compute processes (their PIDs are listed) unless
    O(ignore_processes=true).
  - Disabling MIG first destroys the GPU's MIG instances (compute instances before GPU
    instances), as the driver refuses to leave MIG mode while they exist.
  - All selected GPUs are checked before any is changed. If a later GPU then fails, the
    result still lists what was done on the earlier ones.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - gpuprov.gpu.attributes
  - ansible.builtin.action_common_attributes
  - gpuprov.gpu.attributes
  - gpuprov.gpu.nvml
  - gpuprov.gpu.gpus
requirements:
  - root privileges on the node
attributes:
  check_mode:
    support: full
    details: Predicts the outcome; on Ampere (compute capability 8.x) it predicts a pending change.
  diff_mode:
    support: full
options:
  state:
    description: The MIG mode wanted.
    type: str
    choices: [enabled, disabled]
    required: true
  ignore_processes:
    description:
      - Change the mode even though compute processes run on the GPU. The driver keeps the
        change pending while they run, and a reset fails until they stop.
    type: bool
    default: false
  reset:
    description:
      - Reset each GPU whose change is pending with C(nvidia-smi -r -i <bus id>), then read
        the mode again. A reset fails while any process (including nvidia-persistenced, DCGM
        or the device plugin) holds the GPU.
    type: bool
    default: false
notes:
  - GPU/compute instances never survive a reset or reboot; Hopper and later GPUs also lose
    MIG mode on reboot or driver reload, Ampere keeps it.
  - In a VM with GPU passthrough the guest cannot reset the GPU; RV(gpus[].activation_status)
    reads C(NVML_ERROR_RESET_REQUIRED) or C(NVML_ERROR_NOT_SUPPORTED), no reset is tried, and the
    VM must be rebooted.
  - The module shuts its NVML session down before it runs C(nvidia-smi -r), because the driver
    refuses a reset while any NVML client, the caller included, has the GPU open.
seealso:
  - module: gpuprov.gpu.gpu_facts
  - module: gpuprov.gpu.mig_layout
"""

EXAMPLES = r"""
- name: Enable MIG on every MIG-capable GPU and reset the ones that need it
  gpuprov.gpu.mig_mode:
    state: enabled
    reset: true

- name: Disable MIG on GPUs 2 and 3
  gpuprov.gpu.mig_mode:
    state: disabled
    gpus: [2, 3]
"""

RETURN = r"""
gpus:
  description: One entry per selected MIG-capable GPU.
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
    before:
      description: C(current) and C(pending) MIG mode before the task.
      type: dict
      sample: {current: false, pending: false}
    after:
      description: C(current) and C(pending) MIG mode after the task (predicted in check mode).
      type: dict
      sample: {current: false, pending: true}
    changed:
      description: Whether this GPU was changed.
      type: bool
    pending:
      description: Whether the mode in effect still differs from the one wanted.
      type: bool
    reset_required:
      description: Whether a GPU reset (or, in a VM, a reboot) is still needed.
      type: bool
    reset_done:
      description: Whether this task reset the GPU.
      type: bool
    activation_status:
      description: NVML's activation status name (C(NVML_SUCCESS), C(NVML_ERROR_IN_USE), ...); null when the mode was not set.
      type: str
    destroyed_instances:
      description: MIG instances destroyed to leave MIG mode.
      type: list
      elements: dict
    processes:
      description: Compute processes found on the GPU.
      type: list
      elements: dict
skipped_gpus:
  description: GPUs left alone under O(gpus=all) because they do not support MIG.
  returned: always
  type: list
  elements: dict
  sample: [{index: 2, name: Tesla T4, reason: no MIG support}]
reset_required:
  description: Whether any selected GPU still needs a reset.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_manager import (
    MigError,
    apply_mode,
    describe_gpu,
    needs_vm_reboot,
    plan_mode,
    predicted_after,
    select_gpus,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml, NvmlError, NvmlUnavailable

_STATUS_NAMES = {0: "NVML_SUCCESS", 3: "NVML_ERROR_NOT_SUPPORTED", 16: "NVML_ERROR_RESET_REQUIRED",
                 19: "NVML_ERROR_IN_USE"}


def _mode_text(current, pending):
    text = "MIG %s" % ("enabled" if current else "disabled")
    if pending != current:
        text += " (%s pending a GPU reset)" % ("enable" if pending else "disable")
    return text


class MigModeManager:
    def __init__(self, module):
        self.module = module
        self.enabled = module.params["state"] == "enabled"
        self.results = []
        self.skipped = []

    def run(self):
        to_reset = []
        with Nvml() as nvml:
            selected, self.skipped = select_gpus(nvml, self.module.params["gpus"])
            # Check every GPU before touching any.
            plans = [(plan_mode(nvml, index, info, mode, self.enabled, self.module.params["ignore_processes"]), info)
                     for index, info, mode in selected]
            for plan, info in plans:
                result, needs_reset = self._converge(nvml, plan, info)
                self.results.append(result)
                if needs_reset:
                    to_reset.append((result, info))
        if not to_reset:
            return
        # The driver refuses a reset while any NVML client has the GPU open, this process
        # included: the session above is shut down before nvidia-smi -r runs.
        failure = None
        for result, info in to_reset:
            try:
                self._reset(info)
            except MigError as exc:
                failure = failure or exc
                continue
            result["reset_done"] = result["changed"] = True
        # A reset can renumber device handles: read the modes in a fresh NVML session.
        with Nvml() as nvml:
            for result, _info in to_reset:
                current, pending = nvml.mig_mode(result["index"])
                self._finish(result, current, pending)
        if failure is not None:
            raise failure

    def _finish(self, result, current, pending):
        result["after"] = {"current": current, "pending": pending}
        result["pending"] = current != self.enabled
        result["reset_required"] = result["pending"] and pending == self.enabled

    def _converge(self, nvml, plan, info):
        """Set the mode on one GPU; returns (result, whether it still needs a reset)."""
        index = plan["index"]
        result = {"index": index, "name": plan["name"], "pci_bus_id": plan["pci_bus_id"],
                  "before": plan["before"], "changed": False, "reset_done": False,
                  "activation_status": None, "processes": plan["processes"],
                  "destroyed_instances": [{"profile": gi.profile, "placement": {"start": gi.start, "size": gi.size}}
                                          for gi in plan["destroy_instances"]]}
        needs_reset = False
        if self.module.check_mode:
            current, pending = predicted_after(plan, self.enabled, info["compute_capability"])
            result["changed"] = plan["set_mode"] or bool(plan["destroy_instances"])
            if current != self.enabled and pending == self.enabled and self.module.params["reset"] \
                    and not plan["processes"]:
                # The reset would apply the pending mode.
                current = self.enabled
                result["reset_done"] = result["changed"] = True
        else:
            status = apply_mode(nvml, plan, self.enabled)
            result["changed"] = status is not None or bool(plan["destroy_instances"])
            if status is not None:
                result["activation_status"] = _STATUS_NAMES.get(status, "NVML error %d" % status)
            current, pending = nvml.mig_mode(index)
            needs_reset = (current != self.enabled and pending == self.enabled and self.module.params["reset"]
                           and not needs_vm_reboot(status))
        self._finish(result, current, pending)
        return result, needs_reset

    def _reset(self, info):
        smi = self.module.get_bin_path("nvidia-smi", required=True)
        rc, out, err = self.module.run_command([smi, "-r", "-i", info["pci_bus_id"]])
        if rc != 0:
            raise MigError("%s: the GPU reset (nvidia-smi -r -i %s) failed with rc=%d: %s. The MIG mode change is "
                           "still pending; stop whatever holds the GPU (CUDA processes, nvidia-persistenced, DCGM, "
                           "the device plugin; the gpuprov.gpu.gpu_mig role does this) and reset again, or reboot "
                           "the node" % (describe_gpu(info), info["pci_bus_id"], rc, (err or out).strip()),
                           gpu=info["index"])

    def diff(self):
        before, after = [], []
        for res in self.results:
            label = "GPU %d (%s)" % (res["index"], res["name"])
            before.append("%s: %s" % (label, _mode_text(res["before"]["current"], res["before"]["pending"])))
            after.append("%s: %s" % (label, _mode_text(res["after"]["current"], res["after"]["pending"])))
        return {"before": "\n".join(before) + "\n", "after": "\n".join(after) + "\n"}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", required=True, choices=["enabled", "disabled"]),
            gpus=dict(type="list", elements="str", default=["all"]),
            ignore_processes=dict(type="bool", default=False),
            reset=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    manager = MigModeManager(module)
    try:
        manager.run()
    except NvmlUnavailable as exc:
        module.fail_json(msg="No usable NVML on this node: %s" % exc, error=exc.as_dict())
    except (MigError, NvmlError) as exc:
        module.fail_json(msg=str(exc), gpus=manager.results, skipped_gpus=manager.skipped,
                         changed=any(r["changed"] for r in manager.results))
    result = dict(
        changed=any(r["changed"] for r in manager.results),
        gpus=manager.results,
        skipped_gpus=manager.skipped,
        reset_required=any(r["reset_required"] for r in manager.results),
    )
    if module._diff:
        result["diff"] = manager.diff()
    for res in manager.results:
        if res["reset_required"]:
            module.warn("GPU %d (%s): the MIG mode change is pending until the GPU is reset%s"
                        % (res["index"], res["name"],
                           "; the GPU cannot be reset from this VM (GPU passthrough): reboot the VM"
                           if res["activation_status"] in ("NVML_ERROR_RESET_REQUIRED", "NVML_ERROR_NOT_SUPPORTED")
                           else " (set reset: true, or run nvidia-smi -r -i %s)" % res["pci_bus_id"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
