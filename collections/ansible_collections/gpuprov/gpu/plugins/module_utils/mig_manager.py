# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""MIG mode and MIG layout changes on one node, for the mig_mode and mig_layout modules.

Layout changes are minimal and per GPU all-or-nothing:

* instances already present with a wanted profile stay where they are (``plan_transition``);
  only the rest are destroyed, and new ones are created at explicit placements;
* an instance with running processes is never destroyed unless ``force``;
* if a step fails, what this run created is destroyed and what it destroyed is re-created
  at the same placement; the error then says what happened and what the GPU holds now.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import (
    Instance,
    LayoutError,
    plan_transition,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import NvmlError, sysfs_pci_address


class MigError(Exception):
    """A MIG change that cannot or did not happen. ``gpu`` names the GPU (or None)."""

    def __init__(self, message, gpu=None, details=None):
        super(MigError, self).__init__(message)
        self.gpu = gpu
        self.details = details or {}


def describe_gpu(info):
    return "GPU %d (%s, %s)" % (info["index"], info["name"], info["pci_bus_id"])


def describe_instances(instances):
    """"4g.40gb@0 3g.40gb@4" for a list of Instance (or "no instances")."""
    if not instances:
        return "no instances"
    return " ".join("%s@%d" % (i.profile, i.start) for i in sorted(instances, key=lambda i: (i.start, i.profile)))


def select_gpus(nvml, gpus):
    """Resolve the ``gpus`` option: ["all"] or index strings/ints.

    Returns (list of (index, info, (current, pending)), [skipped GPUs with reasons]). GPUs
    without MIG are skipped under "all" (as mig-parted does) and refused when named.
    """
    count = nvml.device_count()
    values = [str(v).strip() for v in (gpus or ["all"])]
    if "all" in values:
        if len(values) != 1:
            raise MigError("gpus: give either 'all' or a list of GPU indices, not both (got %s)" % ", ".join(values))
        wanted, explicit = list(range(count)), False
    else:
        wanted, explicit = [], True
        for value in values:
            if not value.isdigit():
                raise MigError("gpus: %r is not a GPU index or 'all'" % value)
            index = int(value)
            if index >= count:
                raise MigError("gpus: GPU %d does not exist; this node has %d GPU(s) (indices 0-%d)"
                               % (index, count, count - 1) if count else
                               "gpus: GPU %d does not exist; this node has no GPUs" % index)
            if index not in wanted:
                wanted.append(index)
    selected, skipped = [], []
    for index in wanted:
        info = nvml.gpu_info(index)
        mode = nvml.mig_mode(index)
        if mode[0] is None:
            if explicit:
                raise MigError("%s does not support MIG; leave it out of gpus" % describe_gpu(info), gpu=index)
            skipped.append({"index": index, "name": info["name"], "reason": "no MIG support"})
            continue
        selected.append((index, info, mode))
    return selected, skipped


# --- MIG mode ---------------------------------------------------------------------------------

def plan_mode(nvml, index, info, mode, enabled, ignore_processes):
    """What mig_mode must do on one GPU. Raises MigError when it must not act."""
    current, pending = mode
    plan = {"index": index, "name": info["name"], "pci_bus_id": info["pci_bus_id"],
            "before": {"current": current, "pending": pending},
            "set_mode": False, "destroy_instances": [], "processes": []}
    if current == enabled and pending == enabled:
        return plan
    # Set the mode also when the change is already pending: that retries its activation and
    # gives this run its own activation status (nvml.h nvmlDeviceSetMigMode: "The caller of
    # this API is expected to idle the device and retry setting the mode"), so a VM is known
    # as one on every run, not only on the run that first asked.
    plan["set_mode"] = True
    processes = nvml.processes(index)
    plan["processes"] = processes
    if processes and not ignore_processes and current != enabled:
        raise MigError("%s has running processes (PIDs %s); stop them before changing MIG mode, "
                       "or set ignore_processes to try anyway"
                       % (describe_gpu(info), ", ".join(str(p["pid"]) for p in processes)),
                       gpu=index, details={"processes": processes})
    if current and not enabled:
        # MIG cannot be turned off while GPU instances exist; clear them first, like mig-parted.
        profiles = nvml.mig_profiles(index)
        plan["destroy_instances"] = list(nvml.gpu_instances(index, profiles))
    return plan


# Activation statuses of nvmlDeviceSetMigMode that mean "the guest cannot reset this GPU":
# NVML_ERROR_RESET_REQUIRED (16), and NVML_ERROR_NOT_SUPPORTED (3), which the MIG User Guide
# shows in VMs with passthrough ("pending enable state ... Not Supported").
VM_REBOOT_STATUSES = (16, 3)


def needs_vm_reboot(status):
    return status in VM_REBOOT_STATUSES


def predicted_after(plan, enabled, compute_capability):
    """The (current, pending) a GPU should have after ``plan`` runs.

    Every architecture applies the change at once when nothing holds the GPU: Hopper and
    later need no reset, and on Ampere nvmlDeviceSetMigMode resets the GPU itself (MIG User
    Guide: "the driver will attempt to reset the GPU"). With compute processes on it the
    change stays pending (IN_USE). A change already pending stays so: what kept it from
    applying (nvidia-persistenced, which holds the GPU against the driver's own reset, or a VM)
    is taken to hold it still, and only a reset applies it.
    """
    before = plan["before"]
    if not plan["set_mode"]:
        return before["current"], before["pending"]
    if before["pending"] == enabled and before["current"] != enabled:
        return before["current"], before["pending"]
    immediate = not plan["processes"]
    return (enabled if immediate else before["current"]), enabled


def pci_reset_available(sysfs_root, bus_id):
    """Whether the GPU's PCI device can be reset from this OS: False when sysfs lists the device
    without its ``reset`` file, True with it, None when sysfs does not list it (no verdict).

    NVIDIA/mig-parted v0.13.1 deployments/systemd/service.sh checks this before any reset
    (utils.sh assert_gpu_reset_available: every NVIDIA 3D controller under
    /sys/bus/pci/devices must have a ``reset`` file) and reboots instead, "If GPU reset is not
    available (e.g. GPU passthrough virtualization)".
    """
    device = os.path.join(sysfs_root or "/sys", "bus", "pci", "devices", sysfs_pci_address(bus_id))
    if not os.path.isdir(device):
        return None
    return os.path.exists(os.path.join(device, "reset"))


FABRIC_MANAGER_UNIT = "nvidia-fabricmanager.service"

# What to stop when a reset fails, and what not: nvidia-smi -r has nvidia-persistenced let go of
# the GPUs it resets (NVIDIA/NVSentinel#1243; NVIDIA/gpu-operator#118), and on Ampere NVSwitch
# systems Fabric Manager is what lets a GPU be reset alone (nvidia-smi(1), -r). mig-parted
# v0.13.1 deployments/systemd/hooks.sh stops nvsm, dcgm and nvidia-dcgm (and dcgm-exporter,
# kubelet) around a mode change, never those two.
RESET_HOLDERS_HINT = ("stop what holds the GPUs (CUDA processes, DCGM, nvsm, dcgm-exporter, the device plugin; "
                      "the gpuprov.gpu.gpu_mig role does this; nvidia-persistenced and nvidia-fabricmanager may "
                      "keep running)")


def fabric_manager_running(run_command, systemctl):
    """Whether nvidia-fabricmanager.service runs (``systemctl is-active``); False when it cannot
    be told, so that NVLink peers are reset together rather than a reset failing."""
    if not systemctl:
        return False
    rc, _output = run_command([systemctl, "is-active", "--quiet", FABRIC_MANAGER_UNIT])
    return rc == 0


def pending_gpus(nvml):
    """Indices of the node's MIG-capable GPUs whose MIG mode change waits for a reset."""
    pending = []
    for index in range(nvml.device_count()):
        current, wanted = nvml.mig_mode(index)
        if current is not None and current != wanted:
            pending.append(index)
    return pending


def reset_group(nvml, indices, fabric_manager):
    """The GPUs one ``nvidia-smi -r`` must name to reset ``indices``: (sorted indices, {added
    NVLink peer: the GPU it was added for}).

    nvidia-smi(1), -r: "Starting with the NVIDIA Ampere architecture, GPUs with NVLink
    connections can be individually reset. On Ampere NVSwitch systems, Fabric Manager is
    required to facilitate reset. On Hopper and later NVSwitch systems, the dependency on
    Fabric Manager to facilitate reset is removed. If Fabric Manager is not running, or if any
    of the GPUs being reset are based on an architecture preceding the NVIDIA Ampere
    architecture, any GPUs with NVLink connections to a GPU being reset must also be reset in
    the same command." ``fabric_manager`` is called (once, and only for an Ampere GPU on
    NVSwitches) to ask whether Fabric Manager runs.
    """
    group = set(indices)
    added = {}
    todo = sorted(group)
    asked = []
    while todo:
        index = todo.pop(0)
        major = int(str(nvml.gpu_info(index)["compute_capability"]).split(".", maxsplit=1)[0])
        if major >= 9:
            continue
        link = nvml.nvlink(index)
        if not link["peers"]:
            continue
        if major == 8:
            if not link["nvswitch"]:
                continue
            if not asked:
                asked.append(bool(fabric_manager()))
            if asked[0]:
                continue
        for peer in link["peers"]:
            if peer not in group:
                group.add(peer)
                added[peer] = index
                todo.append(peer)
    return sorted(group), added


def apply_mode(nvml, plan, enabled):
    """Carry out ``plan``; returns NVML's activation status (None when nothing was set)."""
    index = plan["index"]
    for gi in plan["destroy_instances"]:
        nvml.destroy_gpu_instance(index, gi.id)
    if not plan["set_mode"]:
        return None
    return nvml.set_mig_mode(index, enabled)


# --- MIG layout -------------------------------------------------------------------------------

def parse_instances(items, where):
    """[{profile, placement: {start, size}}] (or {profile, start}) -> [(profile, start, size|None)]."""
    result = []
    for number, item in enumerate(items or []):
        label = "%s[%d]" % (where, number)
        if not isinstance(item, dict) or not item.get("profile"):
            raise MigError("%s: each instance needs a profile and a placement, e.g. "
                           "{profile: 1g.10gb, placement: {start: 0}}" % label)
        placement = item.get("placement")
        if placement is None and "start" in item:
            placement = {"start": item["start"]}
        if not isinstance(placement, dict) or "start" not in placement:
            raise MigError("%s: %s needs placement.start (the memory slice it begins at)" % (label, item["profile"]))
        try:
            start = int(placement["start"])
            size = None if placement.get("size") is None else int(placement["size"])
        except (TypeError, ValueError):
            raise MigError("%s: placement start and size must be integers, got %r" % (label, placement))
        result.append((str(item["profile"]), start, size))
    return result


def parse_counts(counts, where):
    """{profile: count} with counts as non-negative integers (zero counts dropped)."""
    result = {}
    for name, count in (counts or {}).items():
        if isinstance(count, bool) or not (isinstance(count, int) or str(count).strip().isdigit()) or int(count) < 0:
            raise MigError("%s: the count of %s must be a non-negative integer, got %r" % (where, name, count))
        if int(count):
            result[str(name)] = int(count)
    return result


class GpuLayoutPlan:
    """The change mig_layout will make on one GPU."""

    def __init__(self, index, info, profiles, current, transition, ids, busy, ci_missing):
        self.index = index
        self.info = info
        self.profiles = profiles           # {name: nvml.GpuProfile}
        self.current = current             # [Instance] now
        self.transition = transition       # mig_solver.Transition
        self.ids = ids                     # {Instance: GPU instance id}
        self.busy = busy                   # [Instance] with processes
        self.ci_missing = ci_missing       # kept [Instance] without a compute instance

    @property
    def changed(self):
        return self.transition.changed or bool(self.ci_missing)

    def after(self):
        return sorted(self.transition.keep + self.transition.create, key=lambda i: (i.start, i.profile))

    def as_dict(self):
        data = self.transition.as_dict()
        data.update({
            "index": self.index,
            "name": self.info["name"],
            "pci_bus_id": self.info["pci_bus_id"],
            "changed": self.changed,
            "before": _rows(self.current),
            "after": _rows(self.after()),
            "compute_instances_created": _rows(self.ci_missing),
        })
        return data


def _rows(instances):
    return [{"profile": i.profile, "placement": {"start": i.start, "size": i.size}}
            for i in sorted(instances, key=lambda i: (i.start, i.profile))]


def plan_layout(nvml, index, info, mode, desired, force=False):
    """Plan one GPU's change to ``desired``.

    ``desired``: {profile: count}, or [(profile, start, size|None)] explicit placements.
    Raises MigError (naming the GPU) when MIG is off or pending, or the layout is invalid or
    would destroy a busy instance without ``force``.
    """
    current_mode, pending_mode = mode
    where = describe_gpu(info)
    if not current_mode:
        if pending_mode:
            raise MigError("%s: enabling MIG is pending a GPU reset; run gpuprov.gpu.mig_mode with reset: true "
                           "(or nvidia-smi -r -i %s) first" % (where, info["pci_bus_id"]), gpu=index)
        raise MigError("%s: MIG mode is disabled; enable it with gpuprov.gpu.mig_mode first" % where, gpu=index)
    if not pending_mode:
        raise MigError("%s: disabling MIG is pending a GPU reset, which would remove any layout; "
                       "run gpuprov.gpu.mig_mode with state: enabled first" % where, gpu=index)
    profiles = nvml.mig_profiles(index)
    specs = nvml.solver_profiles(profiles)
    compute_total = nvml.compute_total(profiles)
    gpu_instances = nvml.gpu_instances(index, profiles)
    current = [Instance(g.profile, g.start, g.size) for g in gpu_instances]
    ids = dict((Instance(g.profile, g.start, g.size), g.id) for g in gpu_instances)
    by_id = dict((g.id, Instance(g.profile, g.start, g.size)) for g in gpu_instances)

    processes = nvml.processes(index)
    busy_ids = set(p["gpu_instance_id"] for p in processes)
    if None in busy_ids:
        # A process NVML could not place in an instance: any instance may hold it.
        busy = list(current)
    else:
        busy = [by_id[i] for i in busy_ids if i in by_id]

    if isinstance(desired, dict):
        unknown = sorted(n for n in desired if n not in profiles)
        target = desired
    else:
        unknown = sorted(set(p for p, _s, _z in desired if p not in profiles))
        target = []
        for name, start, size in desired:
            if name in profiles and size is not None:
                valid = dict(profiles[name].placements)
                if start in valid and valid[start] != size:
                    raise MigError("%s: %s at slice %d covers %d memory slices, not %d"
                                   % (where, name, start, valid[start], size), gpu=index)
            target.append((name, start))
    if unknown:
        raise MigError("%s has no MIG profile %s; its profiles: %s"
                       % (where, ", ".join(unknown), ", ".join(sorted(profiles))), gpu=index)
    try:
        transition = plan_transition(current, target, specs, compute_total, busy=busy, force=force)
    except LayoutError as exc:
        raise MigError("%s: %s" % (where, exc), gpu=index,
                       details={"busy": _rows(busy), "processes": processes})
    ci_missing = [Instance(g.profile, g.start, g.size) for g in gpu_instances
                  if not g.compute_instances and Instance(g.profile, g.start, g.size) in set(transition.keep)]
    return GpuLayoutPlan(index, info, profiles, current, transition, ids, busy, ci_missing)


def apply_layout(nvml, plan):
    """Destroy, then create; on any failure undo this run's steps and raise MigError.

    Returns the plan's dict with ``after`` as the GPU reports it once done.
    """
    index = plan.index
    where = describe_gpu(plan.info)
    destroyed, created = [], []   # (Instance, gi id) done so far
    step = None
    try:
        for inst in plan.transition.destroy:
            step = "destroying %s at slice %d" % (inst.profile, inst.start)
            nvml.destroy_gpu_instance(index, plan.ids[inst])
            destroyed.append(inst)
        for inst in plan.transition.create:
            step = "creating %s at slice %d" % (inst.profile, inst.start)
            created.append((inst, nvml.create_gpu_instance(index, plan.profiles[inst.profile], inst.start)))
        for inst in plan.ci_missing:
            step = "creating the compute instance of %s at slice %d" % (inst.profile, inst.start)
            nvml.create_compute_instance(index, plan.ids[inst], plan.profiles[inst.profile])
    except NvmlError as exc:
        problems = _roll_back(nvml, plan, destroyed, created)
        now = _read_layout(nvml, plan)
        if problems:
            message = ("%s: %s failed (%s). Rolling back also failed: %s. The GPU now holds: %s; "
                       "the planned layout was %s. Fix the cause and run the task again, or set the "
                       "layout by hand with nvidia-smi mig."
                       % (where, step, exc, "; ".join(problems), now, describe_instances(plan.after())))
        else:
            message = ("%s: %s failed (%s). Rolled back: the GPU holds its previous layout again (%s)."
                       % (where, step, exc, now))
        raise MigError(message, gpu=index, details={
            "failed_step": step, "error": exc.as_dict(), "rolled_back": not problems,
            "rollback_problems": problems, "layout_now": now,
            "destroyed_then_restored": _rows(destroyed), "created_then_removed": _rows([c[0] for c in created])})
    result = plan.as_dict()
    result["after"] = _rows(_current_instances(nvml, plan))
    return result


def _roll_back(nvml, plan, destroyed, created):
    problems = []
    for inst, gi_id in reversed(created):
        try:
            nvml.destroy_gpu_instance(plan.index, gi_id)
        except NvmlError as exc:
            problems.append("could not remove the new %s at slice %d (%s)" % (inst.profile, inst.start, exc))
    for inst in reversed(destroyed):
        try:
            nvml.create_gpu_instance(plan.index, plan.profiles[inst.profile], inst.start)
        except NvmlError as exc:
            problems.append("could not re-create %s at slice %d (%s)" % (inst.profile, inst.start, exc))
    return problems


def _current_instances(nvml, plan):
    return [Instance(g.profile, g.start, g.size) for g in nvml.gpu_instances(plan.index, plan.profiles)]


def _read_layout(nvml, plan):
    try:
        return describe_instances(_current_instances(nvml, plan))
    except NvmlError as exc:
        return "unknown (reading it failed: %s)" % exc
