#!/usr/bin/env python3
"""Read-only NVML checks on a machine with a real NVIDIA GPU (never run in CI).

Runs gpuprov's node-side code (module_utils gpu_info / nvml) against the real pynvml and
compares what NVML reports about MIG profiles and placements with the catalog. It never
changes MIG mode, compute mode, instances, or resets anything: only Get* calls.

    PYTHONPATH=collections python3 tests/device/nvml_real.py > out.json
"""
import ctypes
import json
import os
import sys
import traceback

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.gpuprov.gpu.plugins.module_utils import gpu_info, mig_manager  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import (  # noqa: E402
    A30_INSTANCE_COUNTS,
    A30_PCI_DEVICE_ID,
    Nvml,
)


def probe_profiles(nvml, index):
    """Raw GetGpuInstanceProfileInfo / PossiblePlacements for every profile enum."""
    import pynvml

    handle = nvml.handle(index)
    rows = []
    for enum in range(pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
        row = {"enum": enum}
        try:
            info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum)
            row.update(id=info.id, slice_count=info.sliceCount, instance_count=info.instanceCount,
                       memory_mb=info.memorySizeMB, name=getattr(info, "name", b"").decode()
                       if isinstance(getattr(info, "name", b""), bytes) else str(getattr(info, "name", "")))
            try:
                placements = (pynvml.c_nvmlGpuInstancePlacement_t * 16)()
                count = ctypes.c_uint(0)
                pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, info.id, placements, ctypes.byref(count))
                row["placements"] = [[placements[i].start, placements[i].size] for i in range(count.value)]
            except pynvml.NVMLError as exc:
                row["placements_error"] = "%s (%s)" % (exc, type(exc).__name__)
        except pynvml.NVMLError as exc:
            row["error"] = "%s (%s)" % (exc, type(exc).__name__)
        rows.append(row)
    return rows


def compare_with_catalog(name, rows):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog

    try:
        model = catalog.lookup(name)
    except catalog.UnknownModelError as exc:
        return {"catalog": str(exc)}
    result = {"catalog_model": model.key, "mismatches": []}
    if not model.mig_capable:
        return result
    by_enum = dict((p.gi_enum, p) for p in model.mig.profiles.values())
    for row in rows:
        prof = by_enum.get(row["enum"])
        if "error" in row:
            if prof is not None:
                result["mismatches"].append("enum %d: NVML says %s, catalog has %s" % (row["enum"], row["error"], prof.name))
            continue
        if prof is None:
            result["mismatches"].append("enum %d: NVML has profile id %s (%s), catalog has none" % (
                row["enum"], row.get("id"), row.get("name")))
            continue
        if row.get("id") != prof.gi_profile_id:
            result["mismatches"].append("%s: NVML id %s, catalog %d" % (prof.name, row.get("id"), prof.gi_profile_id))
        if row.get("instance_count") != prof.max_count:
            result["mismatches"].append("%s: NVML max %s, catalog %d" % (prof.name, row.get("instance_count"), prof.max_count))
        if "placements" in row and [tuple(p) for p in row["placements"]] != prof.placements:
            result["mismatches"].append("%s: NVML placements %s, catalog %s" % (prof.name, row["placements"], prof.placements))
        result.setdefault("memory_mb", {})[prof.name] = row.get("memory_mb")
    return result


def _error(exc):
    return "%s (%s)" % (exc, type(exc).__name__)


def read_paths(nvml, index):
    """Every NVML read the modules make, through gpuprov's own layer (module_utils/nvml.py),
    each answer or error recorded: compute and persistence mode, MIG mode, processes, the
    MIG device slots (which code an empty slot answers), instance listing, and profiles with
    their placements even while MIG is off."""
    import pynvml

    paths = {}
    for name, call in (("compute_mode", nvml.compute_mode), ("persistence_mode", nvml.persistence_mode),
                       ("mig_mode", nvml.mig_mode), ("processes", nvml.processes)):
        try:
            paths[name] = call(index)
        except Exception as exc:
            paths[name + "_error"] = _error(exc)
    handle = nvml.handle(index)
    slots = []
    try:
        for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
            try:
                pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                slots.append("device")
            except pynvml.NVMLError as exc:
                slots.append(type(exc).__name__)
    except pynvml.NVMLError as exc:
        paths["max_mig_device_count_error"] = _error(exc)
    paths["mig_device_slots"] = slots
    try:
        profiles = nvml.mig_profiles(index)
        paths["mig_profiles"] = dict((p.name, {"id": p.id, "enum": p.enum, "placements": p.placements,
                                               "max_count": p.max_count})
                                     for p in profiles.values())
        paths["gpu_instances"] = [gi._asdict() for gi in nvml.gpu_instances(index, profiles)]
    except Exception as exc:
        paths["mig_profiles_or_instances_error"] = _error(exc)
    # Compute mode where nvml.h says it lives: per MIG device on a MIG-enabled GPU. The parent
    # handle is asked too, raw, to record which code the driver gives there (the fake's
    # NOT_SUPPORTED is UNVERIFIED).
    try:
        paths["mig_compute_modes"] = dict(("%d/%d" % key, mode) for key, mode in nvml.mig_compute_modes(index).items())
    except Exception as exc:
        paths["mig_compute_modes_error"] = _error(exc)
    try:
        paths["compute_mode_parent_raw"] = pynvml.nvmlDeviceGetComputeMode(handle)
    except pynvml.NVMLError as exc:
        paths["compute_mode_parent_raw_error"] = _error(exc)
    # What a reset of this GPU would involve: NVLink peers, the fabric state (Hopper+), whether
    # its PCI device has a reset function (mig-parted's check), and the group one nvidia-smi -r
    # would have to name. Read-only: nothing is reset.
    for name, call in (("nvlink", lambda: nvml.nvlink(index)), ("fabric_state", lambda: nvml.fabric_state(index)),
                       ("pci_reset_available", lambda: mig_manager.pci_reset_available("/sys", nvml.bus_id(index)))):
        try:
            paths[name] = call()
        except Exception as exc:
            paths[name + "_error"] = _error(exc)
    return paths


def _systemctl(argv):
    import shutil
    import subprocess

    systemctl = shutil.which("systemctl")
    if not systemctl:
        return 127, "systemctl not found"
    proc = subprocess.run([systemctl] + argv, capture_output=True, text=True, timeout=30, check=False)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def reset_paths(nvml):
    """The node-wide reads of a MIG mode change's reset: which GPUs wait for one (pending state),
    whether Fabric Manager runs, and the group one `nvidia-smi -r` would name for each GPU."""
    result = {"fabric_manager_active": _systemctl(["is-active", mig_manager.FABRIC_MANAGER_UNIT]),
              "fabric_manager_running": mig_manager.fabric_manager_running(
                  lambda argv: _systemctl(argv[1:]), "systemctl"),
              "persistenced_active": _systemctl(["is-active", "nvidia-persistenced.service"])}
    try:
        result["pending_gpus"] = mig_manager.pending_gpus(nvml)
    except Exception as exc:
        result["pending_gpus_error"] = _error(exc)
    groups = {}
    for index in range(nvml.device_count()):
        if nvml.mig_mode(index)[0] is None:
            continue
        try:
            group, added = mig_manager.reset_group(nvml, [index], lambda: result["fabric_manager_running"])
            groups[str(index)] = {"group": group, "nvlink_peers_added": sorted(added)}
        except Exception as exc:
            groups[str(index)] = {"error": _error(exc)}
    result["reset_groups"] = groups
    return result


def a30_counts(nvml, index, rows):
    """On an A30: the driver's raw instanceCount per profile next to NVIDIA's published counts
    (mig-parted pkg/mig/discovery hard-codes them over an NVML bug) and what gpuprov uses."""
    pci = nvml.call("reading PCI info", __import__("pynvml").nvmlDeviceGetPciInfo, nvml.handle(index))
    if (pci.pciDeviceId >> 16) & 0xFFFF != A30_PCI_DEVICE_ID:
        return None
    raw = dict((row.get("name", "").replace("MIG ", ""), row.get("instance_count")) for row in rows if "error" not in row)
    try:
        used = dict((name, p.max_count) for name, p in nvml.mig_profiles(index).items())
    except Exception as exc:
        used = {"error": _error(exc)}
    return {"driver_instance_count": raw, "published": A30_INSTANCE_COUNTS, "gpuprov": used}


def privilege_probe():
    """Which privileged reads NVML refuses a non-root caller (nvml.h: placements and instance
    listing "Requires privileged user"): run in a child that drops to nobody, when root."""
    if os.geteuid() != 0:
        return {"euid": os.geteuid(), "note": "not root: the main report already shows the refusals"}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        result = {}
        try:
            os.setgid(65534)
            os.setuid(65534)
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            for name, call in (
                ("mig_mode", lambda: pynvml.nvmlDeviceGetMigMode(handle)),
                ("profile_info", lambda: pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, 0).id),
                ("placements", lambda: _placements_count(pynvml, handle)),
                ("compute_mode", lambda: pynvml.nvmlDeviceGetComputeMode(handle)),
                ("persistence_mode", lambda: pynvml.nvmlDeviceGetPersistenceMode(handle)),
            ):
                try:
                    result[name] = call()
                except Exception as exc:
                    result[name + "_error"] = _error(exc)
            pynvml.nvmlShutdown()
        except Exception as exc:
            result["error"] = _error(exc)
        os.write(write, json.dumps(result, default=str).encode())
        os._exit(0)
    os.close(write)
    data = b""
    while True:
        chunk = os.read(read, 65536)
        if not chunk:
            break
        data += chunk
    os.waitpid(pid, 0)
    return json.loads(data.decode() or "{}")


def _placements_count(pynvml, handle):
    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, 0)
    placements = (pynvml.c_nvmlGpuInstancePlacement_t * 16)()
    count = ctypes.c_uint(0)
    pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, info.id, placements, ctypes.byref(count))
    return count.value


def main():
    report = {}
    try:
        report["gpu_facts"] = gpu_info.gather("/sys")
    except Exception:  # the report must come back whatever broke
        report["gpu_facts_error"] = traceback.format_exc()
    try:
        with Nvml() as nvml:
            report["gpus"] = []
            for index in range(nvml.device_count()):
                info = nvml.gpu_info(index)
                entry = {"index": index, "name": info.get("name"), "mig_mode": nvml.mig_mode(index)}
                entry["profiles_raw"] = probe_profiles(nvml, index)
                entry["catalog_check"] = compare_with_catalog(info.get("name"), entry["profiles_raw"])
                entry["read_paths"] = read_paths(nvml, index)
                entry["a30_counts"] = a30_counts(nvml, index, entry["profiles_raw"])
                try:
                    entry["gpuprov_mig_profiles"] = sorted(nvml.mig_profiles(index))
                except Exception as exc:  # MIG disabled: NVML may refuse profile queries
                    entry["gpuprov_mig_profiles_error"] = str(exc)
                report["gpus"].append(entry)
            report["driver_version"] = nvml.driver_version()
            report["reset_paths"] = reset_paths(nvml)
    except Exception:
        report["nvml_error"] = traceback.format_exc()
    try:
        report["privilege_probe"] = privilege_probe()
    except Exception:
        report["privilege_probe_error"] = traceback.format_exc()
    json.dump(report, sys.stdout, indent=2, default=str)
    print()


if __name__ == "__main__":
    main()
