#!/usr/bin/env python3
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Drive a real MPS control daemon through module_utils/mps/ on a GPU machine.

Never run in CI. On a machine with an NVIDIA GPU and driver:

    python3 tests/device/mps_real.py [--gpu INDEX] [--mps-control PATH] [--keep]

What it does, all with a private pipe and log directory under a new temporary directory
(nothing else on the machine sees this daemon):

1. asks the client with no daemon running (records the real error text, stream and status);
2. starts the daemon with MpsDaemonManager, ``manage_compute_mode=False``;
3. records the daemon's raw replies (defaults, an unset memory limit, a second ``-d``, an
   unknown command) and the files it puts in the pipe directory;
4. sets limits on the running daemon through the manager and reads them back;
5. runs a minimal CUDA client (ctypes: cuInit + cuCtxCreate from libcuda.so.1) so that an
   MPS server appears, reads ``get_server_list`` and the server's own thread limit;
6. changes the default limit while that server runs (expects the "keep their old limits"
   warning), ends the client, stops the daemon with the manager (``quit``);
7. starts a daemon the way the gpu_mps unit does (``-d`` as ExecStart=, then
   gpuprov-mps-start's ``limits`` step as ExecStartPost=, module_utils/mps/unit_start.py) and
   reads the limits back: a fresh daemon has MPS's own defaults until that step sets them;
8. prints one JSON summary on stdout.

It never changes compute mode or MIG mode: compute mode management is off, the GPU backend
refuses any compute mode change, no MIG call is made, and both modes are read before and
after and compared. GPUs with MIG enabled are skipped.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.constants import MPS_CONTROL  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.control import MpsControl  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.daemon_manager import MpsDaemonManager  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.gpus import Gpu, NvmlGpus  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.runners import SubprocessRunner  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps import unit_start  # noqa: E402

# The CUDA client: one context on device 0 (the daemon's first GPU), held until stdin closes.
CUDA_CLIENT = r"""
import ctypes, json, sys
def name(cuda, rc):
    text = ctypes.c_char_p()
    cuda.cuGetErrorName(rc, ctypes.byref(text))
    return (text.value or b"?").decode()
try:
    cuda = ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    print(json.dumps({"ok": False, "step": "load libcuda.so.1", "error": str(exc)})); sys.exit(1)
rc = cuda.cuInit(0)
if rc:
    print(json.dumps({"ok": False, "step": "cuInit", "error": name(cuda, rc)})); sys.exit(1)
dev = ctypes.c_int()
rc = cuda.cuDeviceGet(ctypes.byref(dev), 0)
if rc:
    print(json.dumps({"ok": False, "step": "cuDeviceGet", "error": name(cuda, rc)})); sys.exit(1)
ctx = ctypes.c_void_p()
rc = cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)
if rc:
    print(json.dumps({"ok": False, "step": "cuCtxCreate", "error": name(cuda, rc)})); sys.exit(1)
print(json.dumps({"ok": True})); sys.stdout.flush()
sys.stdin.read()
cuda.cuCtxDestroy_v2(ctx)
"""


class ReadOnlyGpus:
    """GPU backend that reads and refuses to write: compute mode stays as it is."""

    def __init__(self, inner):
        self.inner = inner

    def gpus(self):
        return self.inner.gpus()

    def set_compute_mode(self, gpu, mode):
        raise MpsError("refused: this script never changes compute mode (asked %s on %s)"
                           % (mode, gpu.describe()))


class SmiGpus:
    """Read-only GPU list from nvidia-smi, for machines without nvidia-ml-py."""

    FIELDS = "index,uuid,name,memory.total,mig.mode.current,mig.mode.pending,compute_mode,compute_cap"

    def gpus(self):
        out = subprocess.run(["nvidia-smi", "--query-gpu=" + self.FIELDS, "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, check=True).stdout
        result = []
        for line in out.strip().splitlines():
            index, uuid, name, memory, mig_current, mig_pending, mode, capability = [
                f.strip() for f in line.split(",")]
            result.append(Gpu(int(index), uuid, name, int(float(memory)),
                              mig_current=mig_current == "Enabled", mig_pending=mig_pending == "Enabled",
                              compute_mode=mode.upper().replace(" ", "_"), compute_capability=capability))
        return result


def gpu_backend(stack):
    try:
        from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml
        nvml = Nvml().__enter__()
        stack.append(nvml)
        return "nvml", NvmlGpus(nvml)
    except Exception as exc:  # no nvidia-ml-py here: nvidia-smi reads the same facts
        return "nvidia-smi (%s)" % exc, SmiGpus()


def modes(backend):
    return dict((g.index, {"compute_mode": g.compute_mode, "mig_current": g.mig_current,
                           "mig_pending": g.mig_pending}) for g in backend.gpus())


def brief(result):
    """The parts of a manager result worth printing."""
    return dict((k, result[k]) for k in ("changed", "daemon", "limits", "servers", "warnings"))


def client(control, command):
    rc, out, err = control.client(command)
    return {"command": command, "rc": rc, "stdout": out, "stderr": err}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpu", type=int, help="GPU index (default: the first without MIG)")
    parser.add_argument("--mps-control", default=shutil.which(MPS_CONTROL) or MPS_CONTROL)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args()

    summary = {"ok": False, "steps": {}}
    if not os.path.exists(args.mps_control) and not shutil.which(args.mps_control):
        summary["error"] = "%s not found; install the driver's compute utilities" % args.mps_control
        return summary
    steps = summary["steps"]
    stack = []
    tmp = tempfile.mkdtemp(prefix="gpuprov-mps-")
    pipe, log = os.path.join(tmp, "pipe"), os.path.join(tmp, "log")
    runner = SubprocessRunner(timeout=30)
    control = MpsControl(runner, pipe, log, binary=args.mps_control)
    started = False
    workload = None
    try:
        summary["backend"], inner = gpu_backend(stack)
        backend = ReadOnlyGpus(inner)
        before = modes(backend)
        summary["modes_before"] = before
        candidates = [g for g in backend.gpus() if not (g.mig_current or g.mig_pending)]
        if args.gpu is not None:
            candidates = [g for g in candidates if g.index == args.gpu]
        if not candidates:
            summary["error"] = "no GPU without MIG to use (MIG GPUs are never touched)"
            return summary
        gpu = candidates[0]
        summary["gpu"] = {"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name,
                          "memory_total_mib": gpu.memory_total_mib, "compute_capability": gpu.compute_capability}
        params = {"state": "started", "gpus": [gpu.uuid], "pipe_directory": pipe, "log_directory": log,
                  "pipe_directory_mode": "0700", "log_directory_mode": "0700", "manage_compute_mode": False}

        def converge(**changes):
            run_params = dict(params, **changes)
            return MpsDaemonManager(run_params, backend, runner, binary=args.mps_control).run()

        os.makedirs(pipe, 0o700)
        steps["client_without_daemon"] = client(control, "get_server_list")

        steps["start"] = brief(converge())
        started = True
        steps["pipe_directory_files"] = sorted(os.listdir(pipe))
        steps["raw_replies"] = [client(control, c) for c in (
            "get_server_list", "get_default_active_thread_percentage",
            "get_default_device_pinned_mem_limit 0", "no_such_command")]
        rc, out, err = runner.launch([args.mps_control, "-d"], control.environment)
        steps["second_d"] = {"rc": rc, "output": out + err}

        half = gpu.memory_total_mib // 2 if gpu.memory_total_mib else 1024
        steps["set_limits"] = brief(converge(active_thread_percentage=50, pinned_memory_limit=half))
        steps["raw_after_set"] = [client(control, c) for c in (
            "get_default_active_thread_percentage", "get_default_device_pinned_mem_limit 0",
            "set_default_active_thread_percentage 50")]
        steps["rerun_unchanged"] = {"changed": converge(active_thread_percentage=50,
                                                        pinned_memory_limit=half)["changed"]}

        env = dict(os.environ, **control.environment)
        env.pop("CUDA_VISIBLE_DEVICES", None)  # clients must not set it (MPS docs)
        workload = subprocess.Popen([sys.executable, "-c", CUDA_CLIENT], env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ready = workload.stdout.readline()
        steps["workload"] = json.loads(ready) if ready.strip() else {
            "ok": False, "stderr": workload.stderr.read()[-2000:]}
        servers = control.server_list() or []
        steps["servers_with_client"] = servers
        if servers:
            steps["server_thread_limit"] = client(control, "get_active_thread_percentage %d" % servers[0])
            changed = converge(active_thread_percentage=25, pinned_memory_limit=half)
            steps["limit_change_with_server"] = {"changed": changed["changed"], "warnings": changed["warnings"],
                                                 "servers": changed["servers"]}
        if workload.poll() is None:
            workload.stdin.close()
            workload.wait(timeout=60)
        steps["workload_rc"] = workload.returncode

        steps["stop"] = brief(converge(state="stopped"))
        started = not steps["stop"]["daemon"]["stopped"]
        steps["pipe_directory_after_stop"] = sorted(os.listdir(pipe))

        # The gpu_mps unit's start: ExecStart= -d, then ExecStartPost= gpuprov-mps-start limits.
        rc, out, err = runner.launch([args.mps_control, "-d"], dict(control.environment, CUDA_VISIBLE_DEVICES=gpu.uuid))
        started = rc == 0
        fresh = [client(control, c) for c in ("get_default_active_thread_percentage",
                                              "get_default_device_pinned_mem_limit 0")]
        settings = {"service": "gpuprov-mps-device-check.service", "gpus": [gpu.uuid], "pipe_directory": pipe,
                    "log_directory": log, "pipe_directory_mode": "0700", "log_directory_mode": "0700",
                    "manage_compute_mode": False, "active_thread_percentage": 50.0,
                    "pinned_memory_limit": half, "replicas": None, "control_binary": args.mps_control}
        steps["unit_start"] = {"launch_rc": rc, "fresh_defaults": fresh,
                               "limits_step": unit_start.set_limits(settings),
                               "read_back": [client(control, c) for c in ("get_default_active_thread_percentage",
                                                                          "get_default_device_pinned_mem_limit 0")]}
        control.quit()
        started = False
        after = modes(backend)
        summary["modes_after"] = after
        summary["modes_unchanged"] = json.dumps(before, sort_keys=True) == json.dumps(after, sort_keys=True)
        summary["ok"] = bool(summary["modes_unchanged"] and steps["start"]["daemon"]["running"]
                             and not steps["rerun_unchanged"]["changed"] and steps["stop"]["daemon"]["stopped"])
    except (MpsError, OSError, subprocess.SubprocessError, ValueError) as exc:
        summary["error"] = "%s: %s" % (type(exc).__name__, exc)
    finally:
        if workload is not None and workload.poll() is None:
            workload.kill()
        if started and control.server_list() is not None:
            steps["cleanup_quit"] = client(control, "quit")
            time.sleep(1)
        for nvml in stack:
            nvml.__exit__(None, None, None)
        if args.keep:
            summary["kept"] = tmp
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return summary


if __name__ == "__main__":
    result = main()
    print(json.dumps(result, indent=2, sort_keys=True, default=str))
    sys.exit(0 if result.get("ok") else 1)
