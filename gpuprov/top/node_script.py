"""The sampling program `gpuprov top` runs on each node, and how its output becomes samples.

The program is this fixed text, sent as `PYTHON -c SCRIPT INTERVAL` (argv quoted with
shlex.join; INTERVAL is a number checked by the CLI): it reads NVML through pynvml, as the
collection's gpu_facts module does, and prints one JSON line per interval until the channel
closes. Nothing from the inventory or the command line goes into the script.

NVML facts it relies on (nvml.h, NVIDIA/go-nvml): nvmlDeviceGetUtilizationRates is
NOT_SUPPORTED on a MIG-enabled GPU; a MIG device handle (nvmlDeviceGetMigDeviceHandleByIndex)
answers nvmlDeviceGetMemoryInfo and nvmlDeviceGetComputeRunningProcesses for its own
instance, and nvmlDeviceGetGpuInstanceId names the instance.
"""
import json
import time

from gpuprov.diagnose.snapshot import UtilizationSample

SCRIPT = r'''
import json, sys, time
import pynvml
interval = float(sys.argv[1])
MIB = 1024 * 1024

def name_of(pid):
    try:
        with open("/proc/%d/comm" % pid) as handle:
            return handle.read().strip()
    except OSError:
        return ""

def procs(handle):
    try:
        found = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except pynvml.NVMLError:
        return []
    return [[p.pid, name_of(p.pid), (p.usedGpuMemory or 0) // MIB] for p in found]

def text(value):
    return value.decode() if isinstance(value, bytes) else value

pynvml.nvmlInit()
while True:
    gpus = []
    for index in range(pynvml.nvmlDeviceGetCount()):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        try:
            util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
        except pynvml.NVMLError:
            util = None
        try:
            mig = pynvml.nvmlDeviceGetMigMode(handle)[0] == 1
        except pynvml.NVMLError:
            mig = False
        gpu = {"index": index, "name": text(pynvml.nvmlDeviceGetName(handle)),
               "uuid": text(pynvml.nvmlDeviceGetUUID(handle)), "util": util,
               "used": memory.used // MIB, "total": memory.total // MIB, "mig": mig,
               "procs": [] if mig else procs(handle), "instances": []}
        if mig:
            for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
                try:
                    device = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                except pynvml.NVMLError:
                    continue
                info = pynvml.nvmlDeviceGetMemoryInfo(device)
                gpu["instances"].append({"gi": pynvml.nvmlDeviceGetGpuInstanceId(device),
                                         "used": info.used // MIB, "total": info.total // MIB,
                                         "procs": procs(device)})
        gpus.append(gpu)
    sys.stdout.write(json.dumps({"time": time.time(), "gpus": gpus}) + "\n")
    sys.stdout.flush()
    time.sleep(interval)
'''


class BadLine(ValueError):
    """A line the sampling program would not print."""


def parse_line(line):
    """[UtilizationSample] from one line of the program: one per GPU, one per MIG instance."""
    try:
        doc = json.loads(line)
        stamp = float(doc["time"])
        gpus = doc["gpus"]
        if not isinstance(gpus, list):
            raise TypeError("gpus")
    except (ValueError, KeyError, TypeError) as error:
        raise BadLine("not a sample line (%s): %r" % (error, line[:80])) from None
    timestamp = time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(stamp)) + ".%03d" % int((stamp % 1) * 1000)
    samples = []
    for gpu in gpus:
        try:
            samples.append(UtilizationSample(
                timestamp=timestamp, index=int(gpu["index"]), name=str(gpu["name"]),
                memory_used_mib=float(gpu["used"]), memory_total_mib=float(gpu["total"]),
                utilization_gpu=None if gpu["util"] is None else float(gpu["util"]), uuid=str(gpu["uuid"]),
                processes=tuple(tuple(p) for p in gpu["procs"])))
            for instance in gpu["instances"]:
                samples.append(UtilizationSample(
                    timestamp=timestamp, index=int(gpu["index"]), name=str(gpu["name"]),
                    memory_used_mib=float(instance["used"]), memory_total_mib=float(instance["total"]),
                    utilization_gpu=None, gpu_instance_id=str(instance["gi"]), uuid=str(gpu["uuid"]),
                    processes=tuple(tuple(p) for p in instance["procs"])))
        except (KeyError, TypeError, ValueError) as error:
            raise BadLine("GPU entry without %s: %r" % (error, gpu)) from None
    return samples
