# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Restore MIG mode and the exact MIG layout of a node from its state file, at boot.

GPU and compute instances never survive a reboot, and Hopper and later GPUs lose MIG mode
too. The gpuprov.gpu.gpu_mig role writes the node's planned MIG state to a JSON file
(default /etc/gpuprov/mig-state.json) and installs ``gpuprov-mig-restore``, a small program
that calls :func:`main`, run by the ``gpuprov-mig-restore.service`` oneshot unit before
kubelet starts. It uses the same code as the mig_mode and mig_layout modules
(:mod:`mig_manager` over :mod:`nvml`), so a restored GPU is exactly what a converge makes:
same placements, instances that already match are kept, per-GPU rollback on failure.

This file imports nothing from Ansible: the role installs it with nvml.py, mig_manager.py
and mig_solver.py under a private directory, and the program puts that on sys.path.

State file (format 1)::

    {"format": 1, "host": "gpu-h100-01",
     "gpus": [{"index": 0, "pci_bus_id": "00000000:07:00.0",
               "name": "NVIDIA H100 80GB HBM3", "pci_device_id": "0x2330",
               "mig_enabled": true,
               "instances": [{"profile": "3g.40gb", "placement": {"start": 0, "size": 4}}, ...]}]}

A GPU is found by its PCI bus id when the file has one (NVML indices shift when a GPU
drops off the bus), else by index. Exit codes: see EXIT_CODES.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import json
import os
import shutil
import subprocess
import sys

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_manager import (
    RESET_HOLDERS_HINT,
    MigError,
    apply_layout,
    apply_mode,
    describe_gpu,
    describe_instances,
    fabric_manager_running,
    needs_vm_reboot,
    parse_instances,
    pci_reset_available,
    pending_gpus,
    plan_layout,
    plan_mode,
    reset_group,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import Instance
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml, NvmlError, NvmlUnavailable

PROGRAM = "gpuprov-mig-restore"
STATE_FORMAT = 1
DEFAULT_STATE_FILE = "/etc/gpuprov/mig-state.json"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NO_NVML = 3
EXIT_CHANGES_NEEDED = 4
EXIT_WRONG_NODE = 5

EXIT_CODES = (
    (EXIT_OK, "every GPU of the state file has its MIG mode and layout (after this run's changes, if any)"),
    (EXIT_FAILED, "one or more GPUs were not restored (missing, unreadable, reset failed, layout failed); "
                  "the others were, and the log names each failure"),
    (EXIT_USAGE, "bad command line, or the state file is missing, unreadable or invalid; nothing changed"),
    (EXIT_NO_NVML, "NVML is not usable (no driver, driver not loaded, or nvidia-ml-py missing); nothing changed"),
    (EXIT_CHANGES_NEEDED, "--dry-run only: some GPU differs from the state file (nothing was changed)"),
    (EXIT_WRONG_NODE, "the state file was written for other GPUs (model differs); nothing changed"),
)


class StateFileError(Exception):
    """The state file cannot be used. The message names the file and the field."""


class GpuFailure(Exception):
    """One GPU could not be restored; the message names it and says what to do."""


def load_state(path):
    """Read and check a state file. Returns the dict; raises StateFileError."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError) as exc:
        raise StateFileError("cannot read state file %s: %s; run the gpuprov.gpu.gpu_mig role (gpuprov apply) "
                             "to write it" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise StateFileError("state file %s is not valid JSON (%s); run the gpuprov.gpu.gpu_mig role "
                             "(gpuprov apply) to rewrite it" % (path, exc))
    return check_state(data, path)


def check_state(data, path="state file"):
    """Check the structure of a state file's content; raises StateFileError naming the field."""
    if not isinstance(data, dict):
        raise StateFileError("%s: expected a JSON object with format and gpus" % path)
    if data.get("format") != STATE_FORMAT:
        raise StateFileError("%s: format is %r; this program reads format %d (rewrite the file with the "
                             "gpuprov.gpu.gpu_mig role of the same gpuprov version)"
                             % (path, data.get("format"), STATE_FORMAT))
    gpus = data.get("gpus")
    if not isinstance(gpus, list):
        raise StateFileError("%s: gpus must be a list" % path)
    seen = set()
    for number, gpu in enumerate(gpus):
        where = "%s: gpus[%d]" % (path, number)
        if not isinstance(gpu, dict):
            raise StateFileError("%s must be an object" % where)
        index = gpu.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise StateFileError("%s.index must be a GPU index (0, 1, ...), got %r" % (where, index))
        if index in seen:
            raise StateFileError("%s: GPU %d is listed twice" % (where, index))
        seen.add(index)
        if not isinstance(gpu.get("mig_enabled"), bool):
            raise StateFileError("%s.mig_enabled must be true or false" % where)
        for key in ("name", "pci_device_id", "pci_bus_id"):
            if gpu.get(key) is not None and not isinstance(gpu[key], str):
                raise StateFileError("%s.%s must be a string" % (where, key))
        if not gpu.get("name") and not gpu.get("pci_device_id"):
            raise StateFileError("%s needs the GPU's name or pci_device_id, so that the program can refuse "
                                 "another GPU model" % where)
        instances = gpu.get("instances") or []
        if not isinstance(instances, list):
            raise StateFileError("%s.instances must be a list" % where)
        if instances and not gpu["mig_enabled"]:
            raise StateFileError("%s: instances are listed but mig_enabled is false" % where)
        try:
            parse_instances(instances, "%s.instances" % where)
        except MigError as exc:
            raise StateFileError(str(exc))
    return data


def _describe_model(name, device_id):
    if name and device_id:
        return "%s (%s)" % (name, device_id)
    return name or device_id or "an unknown GPU"


def same_model(expected, info):
    """Whether the GPU NVML reports is the model the state file expects (PCI device id first)."""
    want_id = (expected.get("pci_device_id") or "").lower()
    have_id = (info.get("pci_device_id") or "").lower()
    if want_id and have_id:
        return want_id == have_id
    return (expected.get("name") or "") == (info.get("name") or "")


def _run_command(argv):
    """Run argv (no shell); returns (rc, combined output)."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as exc:
        return 127, str(exc)
    out, _unused = proc.communicate()
    return proc.returncode, out.decode("utf-8", "replace").strip()


class Restorer:
    """Brings every GPU of a state file to its MIG mode and layout.

    ``nvml_factory`` opens an NVML session (``Nvml``); ``run_command`` runs an argv list and
    returns (rc, output); ``log``/``error`` print a line to stdout/stderr (the journal).
    """

    def __init__(self, state, nvml_factory=Nvml, reset=True, dry_run=False, run_command=_run_command,
                 log=None, error=None, nvidia_smi=None, sysfs_root="/sys"):
        self.state = state
        self.nvml_factory = nvml_factory
        self.reset = reset
        self.dry_run = dry_run
        self.run_command = run_command
        self.log = log or _print_out
        self.error = error or _print_err
        self.nvidia_smi = nvidia_smi
        self.sysfs_root = sysfs_root
        self.results = []   # one dict per GPU of the state file

    # -- the whole node ------------------------------------------------------------------------
    def run(self):
        """Restore every GPU; returns the exit code."""
        entries = sorted(self.state["gpus"], key=lambda g: g["index"])
        if not entries:
            self.log("%s: the state file lists no GPU; nothing to do" % PROGRAM)
            return EXIT_OK
        group = []
        try:
            with self.nvml_factory() as nvml:
                located, problems = self._locate(nvml, entries)
                wrong = [p for p in problems if p[0] == "wrong-model"]
                if wrong:
                    for _kind, entry, message in wrong:
                        self.error(message)
                    self.error("%s: the state file %s was written for other GPUs than this node has; nothing "
                               "was changed. Run gpuprov apply (the gpuprov.gpu.gpu_mig role) for this node to "
                               "rewrite it." % (PROGRAM, self.state.get("_path", "")))
                    return EXIT_WRONG_NODE
                for _kind, entry, message in problems:
                    self.error(message)
                    self.results.append({"index": entry["index"], "status": "missing", "message": message})
                # Modes first, on every GPU; then one reset for all that wait for it (with the
                # NVLink peers it must take along); layouts last, so that no layout is made on
                # a GPU the reset would wipe.
                for entry, index, info in located:
                    self.results.append(self._restore_gpu(nvml, entry, index, info))
                group = self._plan_reset(nvml, located)
                for result in self.results:
                    if result.get("status") == "ok" and "_resume" in result:
                        self._layout_step(nvml, result)
            # The driver refuses a GPU reset while any NVML client has the GPU open, this
            # program included: reset only once the session above is shut down, then go on
            # with the layouts in a fresh session (a reset can renumber device handles).
            if group:
                self._reset_group(group)
                with self.nvml_factory() as nvml:
                    for result in self.results:
                        if result.get("status") == "reset":
                            self._after_reset(nvml, result)
        except NvmlUnavailable as exc:
            self.error("%s: NVML is not usable, nothing was changed: %s" % (PROGRAM, exc))
            return EXIT_NO_NVML
        except NvmlError as exc:
            self.error("%s: %s" % (PROGRAM, exc))
            self.results.append({"index": exc.gpu, "status": "failed", "message": str(exc)})
        for result in self.results:
            result.pop("_resume", None)
        return self._summary()

    def _plan_reset(self, nvml, located):
        """The GPUs one nvidia-smi -r resets (NVML indices), as (index, bus id) pairs: every GPU
        that waits for a reset, any other the node has pending, and the NVLink peers
        nvidia-smi(1) wants in the same command. GPUs of the state file that join as peers
        get their layout after the reset."""
        waiting = [r for r in self.results if r.get("status") == "reset"]
        if not waiting:
            return []
        pending = sorted(set([r["nvml_index"] for r in waiting] + pending_gpus(nvml)))
        systemctl = shutil.which("systemctl")
        group, added = reset_group(nvml, pending, lambda: fabric_manager_running(self.run_command, systemctl))
        buses = dict((index, nvml.bus_id(index)) for index in group)
        blocked = [index for index in group if pci_reset_available(self.sysfs_root, buses[index]) is False]
        if blocked:
            for result in waiting:
                self._fail(result, result["_resume"][3], GpuFailure(
                    "MIG %s is pending and GPU %s cannot be reset from here (no PCI reset function under %s, as "
                    "in a VM with GPU passthrough); reboot the VM or the node"
                    % (result["_resume"][4], ", ".join(str(i) for i in blocked), self.sysfs_root)))
            return []
        if added:
            self.log("%s: GPU %s join the reset as NVLink peers: nvidia-fabricmanager does not run, and without it "
                     "an Ampere GPU on NVSwitches is reset together with its peers" % (
                         PROGRAM, ", ".join(str(i) for i in sorted(added))))
        for result in self.results:
            if result.get("status") == "ok" and result.get("nvml_index") in group and "_resume" in result:
                result["status"] = "reset"
                result["changed"] = True
        return [(index, buses[index]) for index in group]

    def _reset_group(self, group):
        smi = self.nvidia_smi or shutil.which("nvidia-smi") or "/usr/bin/nvidia-smi"
        bus_ids = ",".join(bus for _index, bus in group)
        rc, output = self.run_command([smi, "-r", "-i", bus_ids])
        if rc == 0:
            return
        for result in self.results:
            if result.get("status") == "reset":
                _entry, _index, info, where, word = result["_resume"]
                self._fail(result, where, GpuFailure(
                    "%s: MIG %s is pending a GPU reset, and the reset (nvidia-smi -r -i %s) failed with rc=%d: %s. "
                    "%s, and run %s again, or reboot"
                    % (where, word or "layout", bus_ids, rc, output or "no output",
                       RESET_HOLDERS_HINT[0].upper() + RESET_HOLDERS_HINT[1:], PROGRAM)))

    def _after_reset(self, nvml, result):
        entry, index, info, where, word = result["_resume"]
        result["status"] = "ok"
        try:
            current, pending = nvml.mig_mode(index)
            if current != entry["mig_enabled"]:
                raise GpuFailure("%s: MIG %s is still pending after the GPU reset (mode now %s, pending %s); "
                                 "reboot the node" % (where, word or ("enabled" if entry["mig_enabled"] else
                                                                      "disabled"), current, pending))
            result["steps"].append("%sd MIG mode (GPU reset)" % word if word else "reset with its NVLink peers")
            if entry["mig_enabled"]:
                self._restore_layout(nvml, entry, index, info, where, result)
        except (GpuFailure, MigError, NvmlError) as exc:
            self._fail(result, where, exc)
            return
        self.log("%s: %s" % (where, "; ".join(result["steps"])))

    def _fail(self, result, where, exc):
        message = str(exc)
        if not message.startswith("GPU "):
            message = "%s: %s" % (where, message)
        self.error(message)
        result.update(status="failed", message=message)

    def _locate(self, nvml, entries):
        """Match state-file GPUs with NVML's: [(entry, index, info)], [(kind, entry, message)]."""
        count = nvml.device_count()
        infos, unreadable = {}, {}
        for index in range(count):
            try:
                infos[index] = nvml.gpu_info(index)
            except NvmlError as exc:
                unreadable[index] = exc
        by_bus = dict((info["pci_bus_id"].lower(), index) for index, info in infos.items())
        located, problems = [], []
        for entry in entries:
            expected = _describe_model(entry.get("name"), entry.get("pci_device_id"))
            bus_id = (entry.get("pci_bus_id") or "").lower()
            index = by_bus.get(bus_id) if bus_id else entry["index"]
            if index is None or index not in infos:
                where = "GPU %d%s" % (entry["index"], " (%s)" % entry["pci_bus_id"] if bus_id else "")
                if index is None and entry["index"] in unreadable:
                    reason = "NVML cannot read GPU %d (%s)" % (entry["index"], unreadable[entry["index"]])
                elif index is not None and index in unreadable:
                    reason = "NVML cannot read it (%s)" % unreadable[index]
                else:
                    reason = "the node has no such GPU now (NVML lists %d GPU(s)%s)" % (
                        count, ": " + ", ".join("%d at %s" % (i, infos[i]["pci_bus_id"]) for i in sorted(infos))
                        if infos else "")
                problems.append(("missing", entry,
                                 "%s: missing: the state file expects %s there, but %s. It was not restored; check "
                                 "the kernel log for Xid errors and `nvidia-smi -L`, then run %s again or reboot"
                                 % (where, expected, reason, PROGRAM)))
                continue
            info = infos[index]
            if not same_model(entry, info):
                problems.append(("wrong-model", entry, "GPU %d: state file expects %s, node has %s" % (
                    entry["index"], expected, _describe_model(info.get("name"), info.get("pci_device_id")))))
                continue
            located.append((entry, index, info))
        return located, problems

    def _summary(self):
        failed = [r for r in self.results if r["status"] in ("failed", "missing")]
        changed = [r for r in self.results if r.get("changed")]
        ok = len(self.results) - len(failed)
        verb = "would change" if self.dry_run else "changed"
        line = "%s: %d GPU(s) as the state file says (%d %s)" % (PROGRAM, ok, len(changed), verb)
        if failed:
            line += ", %d not restored: %s" % (len(failed), ", ".join(
                "GPU %s" % r["index"] for r in sorted(failed, key=lambda r: (r["index"] is None, r["index"]))))
            self.error(line)
            return EXIT_FAILED
        self.log(line)
        if self.dry_run and changed:
            return EXIT_CHANGES_NEEDED
        return EXIT_OK

    # -- one GPU ---------------------------------------------------------------------------------
    def _restore_gpu(self, nvml, entry, index, info):
        where = describe_gpu(info)
        if index != entry["index"]:
            where += " (GPU %d in the state file)" % entry["index"]
        result = {"index": entry["index"], "nvml_index": index, "status": "ok", "changed": False, "steps": [],
                  "_resume": (entry, index, info, where, None)}
        try:
            self._restore_mode(nvml, entry, index, info, where, result)
        except (GpuFailure, MigError, NvmlError) as exc:
            self._fail(result, where, exc)
        return result

    def _layout_step(self, nvml, result):
        """The layout of a GPU whose mode is as the state file says, then its log line."""
        entry, index, info, where, _word = result["_resume"]
        try:
            if entry["mig_enabled"]:
                self._restore_layout(nvml, entry, index, info, where, result)
        except (GpuFailure, MigError, NvmlError) as exc:
            self._fail(result, where, exc)
            return
        if result["steps"]:
            self.log("%s: %s%s" % (where, "would: " if self.dry_run else "", "; ".join(result["steps"])))
        else:
            self.log("%s: already as the state file says (%s)" % (where, self._describe_wanted(entry)))
        return result

    @staticmethod
    def _describe_wanted(entry):
        if not entry["mig_enabled"]:
            return "MIG disabled"
        return "MIG enabled; %s" % describe_instances(_instances(entry))

    def _restore_mode(self, nvml, entry, index, info, where, result):
        """Bring MIG mode to the state file's; returns True when the GPU waits for a reset."""
        want = entry["mig_enabled"]
        mode = nvml.mig_mode(index)
        if mode[0] is None:
            raise GpuFailure("%s does not support MIG, but the state file asks for MIG %s"
                             % (where, "enabled" if want else "disabled"))
        plan = plan_mode(nvml, index, info, mode, want, ignore_processes=False)
        if not plan["set_mode"] and not plan["destroy_instances"] and mode[0] == want:
            return False
        word = "enable" if want else "disable"
        result["changed"] = True
        if self.dry_run:
            result["steps"].append("%s MIG mode" % word)
            return False
        status = apply_mode(nvml, plan, want)
        current, pending = nvml.mig_mode(index)
        if current == want:
            if mode[0] == want:
                result["steps"].append("cancelled a pending MIG %s" % ("disable" if want else "enable"))
            else:
                result["steps"].append("%sd MIG mode" % word)
            return False
        # The change is pending: something held the GPU when the driver tried to reset it. The
        # mode was asked for again above even when it was pending from an earlier run, so the
        # status is this run's own: a VM says so on every boot.
        if needs_vm_reboot(status):
            raise GpuFailure("%s: MIG %s is pending and the GPU cannot be reset from here "
                             "(activation status %d, as in a VM with GPU passthrough); reboot the VM"
                             % (where, word, status))
        if not self.reset:
            raise GpuFailure("%s: MIG %s is pending a GPU reset and --no-reset was given; reset the GPU "
                             "(nvidia-smi -r -i %s) and run %s again, or reboot"
                             % (where, word, info["pci_bus_id"], PROGRAM))
        result["status"] = "reset"
        result["_resume"] = (entry, index, info, where, word)
        return True

    def _restore_layout(self, nvml, entry, index, info, where, result):
        desired = parse_instances(entry.get("instances") or [], "GPU %d instances" % entry["index"])
        mode = nvml.mig_mode(index)
        if self.dry_run and not mode[0]:
            # MIG is off, so nothing can be planned against the GPU: all instances are new.
            if desired:
                result["steps"].append("create %s" % describe_instances(_instances(entry)))
            return
        plan = plan_layout(nvml, index, info, mode, desired, force=False)
        if not plan.changed:
            return
        result["changed"] = True
        transition = plan.transition
        steps = []
        if transition.destroy:
            steps.append("destroy %s" % describe_instances(transition.destroy))
        if transition.create:
            steps.append("create %s" % describe_instances(transition.create))
        if plan.ci_missing:
            steps.append("add compute instances to %s" % describe_instances(plan.ci_missing))
        if transition.keep:
            steps.append("keep %s" % describe_instances(transition.keep))
        if self.dry_run:
            result["steps"].extend(steps)
            return
        done = apply_layout(nvml, plan)
        result["steps"].extend(s.replace("destroy ", "destroyed ", 1).replace("create ", "created ", 1)
                               .replace("add ", "added ", 1).replace("keep ", "kept ", 1) for s in steps)
        after = [Instance(r["profile"], r["placement"]["start"], r["placement"]["size"]) for r in done["after"]]
        wanted = set((p, s) for p, s, _z in desired)
        if set((i.profile, i.start) for i in after) != wanted:
            raise GpuFailure("%s: after the change the GPU holds %s, not the state file's %s; run %s again, or "
                             "converge the node with gpuprov apply"
                             % (where, describe_instances(after), describe_instances(_instances(entry)), PROGRAM))


def _instances(entry):
    return [Instance(i["profile"], i["placement"]["start"], i["placement"].get("size"))
            for i in entry.get("instances") or []]


def _print_out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _print_err(line):
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def build_parser():
    codes = "\n".join("  %d  %s" % (code, text) for code, text in EXIT_CODES)
    parser = argparse.ArgumentParser(
        prog=PROGRAM,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Restore MIG mode and the exact MIG layout (GPU instances at their placements) that the "
                    "gpuprov.gpu.gpu_mig role recorded for this node. Runs at boot from "
                    "gpuprov-mig-restore.service, before kubelet. Running it again changes nothing.",
        epilog="exit status:\n" + codes)
    parser.add_argument("--state-file", default=DEFAULT_STATE_FILE, metavar="PATH",
                        help="the node's MIG state (default: %(default)s)")
    parser.add_argument("--dry-run", action="store_true",
                        help="say what would change, change nothing (exit 4 when something would)")
    parser.add_argument("--no-reset", dest="reset", action="store_false",
                        help="never reset a GPU (nvidia-smi -r) to apply a pending MIG mode change (Ampere); "
                             "report it and fail instead")
    parser.add_argument("--sysfs-root", default="/sys", metavar="PATH",
                        help="where sysfs is mounted: a GPU whose PCI device has no reset file there is not "
                             "reset (default: %(default)s)")
    return parser


def main(argv=None, nvml_factory=Nvml, run_command=_run_command):
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return EXIT_OK if exc.code == 0 else EXIT_USAGE
    path = os.path.abspath(args.state_file)
    try:
        state = load_state(path)
    except StateFileError as exc:
        _print_err("%s: %s" % (PROGRAM, exc))
        return EXIT_USAGE
    state["_path"] = path
    _print_out("%s: %s MIG state of %s from %s"
               % (PROGRAM, "checking" if args.dry_run else "restoring", state.get("host") or "this node", path))
    restorer = Restorer(state, nvml_factory=nvml_factory, reset=args.reset, dry_run=args.dry_run,
                        run_command=run_command, sysfs_root=args.sysfs_root)
    return restorer.run()
