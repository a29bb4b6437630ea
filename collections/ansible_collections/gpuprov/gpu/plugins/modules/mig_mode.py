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
  - On Ampere GPUs (A100, A30) the driver resets an idle GPU itself; while something holds it
    (nvidia-persistenced does, on most nodes) the change stays pending until the GPU is reset.
    With O(reset=true) the module resets every GPU of the node whose change is pending, in one
    C(nvidia-smi -r -i <bus id>,<bus id>...) call as mig-parted does, and reads the modes again.
    Hopper and later GPUs apply the change at once.
  - A change already pending is asked for again on every run, which retries its activation
    and tells a VM (NVML_ERROR_RESET_REQUIRED) from a node where a reset helps.
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
      - Reset, in one C(nvidia-smi -r) call, every GPU of the node whose MIG mode change is
        pending (the selected ones and any an earlier run left pending), then read the modes
        again.
      - On an Ampere NVSwitch system (HGX/DGX A100) without nvidia-fabricmanager running, the
        NVLink peers of those GPUs join the same call, as nvidia-smi(1) requires; they lose
        their MIG instances too. With Fabric Manager, and on Hopper and later, each GPU is
        reset alone.
      - A reset fails while CUDA processes, DCGM, nvsm or the device plugin hold a GPU;
        nvidia-persistenced and Fabric Manager may keep running.
      - A GPU that cannot be reset from this OS (activation status
        C(NVML_ERROR_RESET_REQUIRED) or C(NVML_ERROR_NOT_SUPPORTED), or a PCI device without a
        C(reset) file under O(sysfs_root)) is not reset; the VM or node must be rebooted.
    type: bool
    default: false
  sysfs_root:
    description:
      - Where sysfs is mounted. Before a reset the module checks that each GPU's PCI device
        C(<sysfs_root>/bus/pci/devices/<address>) has its C(reset) file, as mig-parted does;
        a device sysfs does not list is not judged.
    type: path
    default: /sys
notes:
  - GPU/compute instances never survive a reset or reboot; Hopper and later GPUs also lose
    MIG mode on reboot or driver reload, Ampere keeps it.
  - In a VM with GPU passthrough the guest cannot reset the GPU; RV(gpus[].activation_status)
    reads C(NVML_ERROR_RESET_REQUIRED) or C(NVML_ERROR_NOT_SUPPORTED) on every run, no reset is
    tried, and the VM must be rebooted.
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
reset:
  description: The GPU reset of this run (in check mode, the one it would make).
  returned: always
  type: dict
  contains:
    gpus:
      description: NVML indices of the GPUs reset together; empty when no reset was needed or allowed.
      type: list
      elements: int
    nvlink_peers_added:
      description: GPUs among RV(reset.gpus) that were not pending but had to join as NVLink peers.
      type: list
      elements: int
    command:
      description: The C(nvidia-smi) arguments; null without a reset.
      type: list
      elements: str
    done:
      description: Whether the reset ran and succeeded.
      type: bool
  sample: {gpus: [0, 1, 2, 3, 4, 5, 6, 7], nvlink_peers_added: [], done: true,
           command: [nvidia-smi, -r, -i, "00000000:07:00.0,00000000:0F:00.0"]}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_manager import (
    RESET_HOLDERS_HINT,
    MigError,
    apply_mode,
    describe_gpu,
    fabric_manager_running,
    needs_vm_reboot,
    pci_reset_available,
    pending_gpus,
    plan_mode,
    predicted_after,
    reset_group,
    select_gpus,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml, NvmlError, NvmlUnavailable, sysfs_pci_address

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
        self.reset = {"gpus": [], "command": None, "nvlink_peers_added": [], "done": False}
        self.cannot_reset = {}  # index: why (a VM, no PCI reset function)

    def run(self):
        infos = {}
        with Nvml() as nvml:
            selected, self.skipped = select_gpus(nvml, self.module.params["gpus"])
            # Check every GPU before touching any.
            plans = [(plan_mode(nvml, index, info, mode, self.enabled, self.module.params["ignore_processes"]), info)
                     for index, info, mode in selected]
            for plan, info in plans:
                infos[info["index"]] = info
                self.results.append(self._converge(nvml, plan, info))
            if self.module.params["reset"]:
                self._plan_reset(nvml, infos)
        if not self.reset["gpus"] or self.module.check_mode:
            return
        # The driver refuses a reset while any NVML client has the GPU open, this process
        # included: the session above is shut down before nvidia-smi -r runs.
        failure = None
        try:
            self._reset(infos)
        except MigError as exc:
            failure = exc
        # A reset can renumber device handles: read the modes in a fresh NVML session.
        with Nvml() as nvml:
            for result in self.results:
                if result["index"] in self.reset["gpus"]:
                    current, pending = nvml.mig_mode(result["index"])
                    result["reset_done"] = failure is None
                    self._finish(result, current, pending)
        if failure is not None:
            raise failure

    def _finish(self, result, current, pending):
        result["after"] = {"current": current, "pending": pending}
        result["pending"] = current != self.enabled
        result["reset_required"] = result["pending"] and pending == self.enabled
        result["changed"] = (result["before"] != result["after"] or bool(result["destroyed_instances"])
                             or result["reset_done"])

    def _converge(self, nvml, plan, info):
        """Set the mode on one GPU; returns its result."""
        index = plan["index"]
        result = {"index": index, "name": plan["name"], "pci_bus_id": plan["pci_bus_id"],
                  "before": plan["before"], "changed": False, "reset_done": False,
                  "activation_status": None, "processes": plan["processes"],
                  "destroyed_instances": [{"profile": gi.profile, "placement": {"start": gi.start, "size": gi.size}}
                                          for gi in plan["destroy_instances"]]}
        if self.module.check_mode:
            current, pending = predicted_after(plan, self.enabled, info["compute_capability"])
        else:
            status = apply_mode(nvml, plan, self.enabled)
            if status is not None:
                result["activation_status"] = _STATUS_NAMES.get(status, "NVML error %d" % status)
                if needs_vm_reboot(status):
                    self.cannot_reset[index] = (
                        "the GPU cannot be reset from here (activation status %s, as in a VM with GPU "
                        "passthrough): reboot the VM" % result["activation_status"])
            current, pending = nvml.mig_mode(index)
        self._finish(result, current, pending)
        return result

    def _plan_reset(self, nvml, infos):
        """Which GPUs one nvidia-smi -r resets: every pending GPU of the node (the selected ones
        and any an earlier call left pending, as mig-parted resets all GPUs in one command),
        plus the NVLink peers nvidia-smi(1) wants in the same command."""
        sysfs_root = self.module.params["sysfs_root"]
        pending = pending_gpus(nvml)
        if self.module.check_mode:
            # Nothing was set: the selected GPUs count as predicted (a GPU with processes would
            # only fail the reset), the others as NVML has them now.
            selected = set(r["index"] for r in self.results)
            pending = sorted([i for i in pending if i not in selected] +
                             [r["index"] for r in self.results if r["reset_required"] and not r["processes"]])
        for index in pending:
            infos.setdefault(index, nvml.gpu_info(index))
            if index not in self.cannot_reset and pci_reset_available(sysfs_root, infos[index]["pci_bus_id"]) is False:
                self.cannot_reset[index] = (
                    "the GPU cannot be reset from here: its PCI device (%s) has no reset function, as in a VM "
                    "with GPU passthrough; reboot the VM (or the node)"
                    % os.path.join(sysfs_root, "bus", "pci", "devices", sysfs_pci_address(infos[index]["pci_bus_id"])))
        wanted = [index for index in pending if index not in self.cannot_reset]
        if not wanted:
            return
        systemctl = self.module.get_bin_path("systemctl")
        group, added = reset_group(nvml, wanted, lambda: fabric_manager_running(self._run, systemctl))
        for index in group:
            infos.setdefault(index, nvml.gpu_info(index))
        blocked = [index for index in group if index in self.cannot_reset or
                   pci_reset_available(sysfs_root, infos[index]["pci_bus_id"]) is False]
        if blocked:
            for index in wanted:
                self.cannot_reset.setdefault(index, "it must be reset together with GPU %s, which cannot be reset "
                                                    "from here; reboot the node" % ", ".join(map(str, blocked)))
            return
        self.reset = {"gpus": group, "nvlink_peers_added": sorted(added), "done": False,
                      "command": ["nvidia-smi", "-r", "-i", ",".join(infos[i]["pci_bus_id"] for i in group)]}
        if self.module.check_mode:
            for result in self.results:
                if result["index"] in group:
                    result["reset_done"] = True
                    self._finish(result, self.enabled, self.enabled)

    def _run(self, argv):
        rc, out, err = self.module.run_command(argv)
        return rc, (out or "") + (err or "")

    def _reset(self, infos):
        smi = self.module.get_bin_path("nvidia-smi", required=True)
        rc, out, err = self.module.run_command([smi] + self.reset["command"][1:])
        if rc != 0:
            selected = [infos[r["index"]] for r in self.results if r["index"] in self.reset["gpus"]]
            where = "; ".join(describe_gpu(info) for info in selected) or "GPUs %s" % ", ".join(
                str(i) for i in self.reset["gpus"])
            peers = ""
            if self.reset["nvlink_peers_added"]:
                peers = (" (GPU %s joined the reset as NVLink peers: nvidia-fabricmanager does not run, so "
                         "they must be reset in the same command)"
                         % ", ".join(str(i) for i in self.reset["nvlink_peers_added"]))
            raise MigError("%s: the GPU reset (%s) failed with rc=%d: %s%s. The MIG mode change is still "
                           "pending; %s, and reset again, or reboot the node"
                           % (where, " ".join(self.reset["command"][1:]), rc, (err or out).strip(), peers,
                              RESET_HOLDERS_HINT), gpu=selected[0]["index"] if selected else None)
        self.reset["done"] = True

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
            sysfs_root=dict(type="path", default="/sys"),
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
        changed=any(r["changed"] for r in manager.results) or manager.reset["done"],
        gpus=manager.results,
        skipped_gpus=manager.skipped,
        reset_required=any(r["reset_required"] for r in manager.results),
        reset=manager.reset,
    )
    if module._diff:
        result["diff"] = manager.diff()
    for res in manager.results:
        if res["reset_required"]:
            why = manager.cannot_reset.get(res["index"])
            module.warn("GPU %d (%s): the MIG mode change is pending until the GPU is reset; %s"
                        % (res["index"], res["name"],
                           why or "set reset: true, or run nvidia-smi -r -i %s" % res["pci_bus_id"]))
    if manager.reset["nvlink_peers_added"]:
        module.warn("GPU %s %s reset with the others as NVLink peers: nvidia-fabricmanager.service does not run, "
                    "and without it an Ampere GPU on NVSwitches can only be reset together with its peers "
                    "(nvidia-smi(1), -r)" % (", ".join(str(i) for i in manager.reset["nvlink_peers_added"]),
                                             "was" if len(manager.reset["nvlink_peers_added"]) == 1 else "were"))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
