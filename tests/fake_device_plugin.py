"""What the NVIDIA device plugin would advertise to the kubelet on a fake GPU node, read the way
the plugin reads it: through NVML (here the fake pynvml of roles/fake_gpu_node, on the node's
state file) and its config file. The node agent (node_agent.py) publishes it as the node's
capacity and allocatable when a device plugin pod starts, so a MIG change really changes what
the Node advertises, once the plugin restarts.

Rules, from NVIDIA/k8s-device-plugin v0.19.3:
- MIG strategy none: one nvidia.com/gpu per GPU, MIG or not. single: one nvidia.com/gpu per
  MIG device (every GPU with MIG). mixed: nvidia.com/mig-<profile> per MIG device, e.g.
  mig-1g.10gb, and nvidia.com/gpu per GPU with MIG off (internal/rm/rm.go, internal/lm
  resource naming: the GPU instance profile's name less its "MIG " prefix).
- sharing.timeSlicing / sharing.mps: each listed resource is advertised replicas times; with
  renameByDefault (or a resource's rename) under a new name, <name>.shared by default
  (api/config/v1/replicas.go).
"""
import contextlib
import importlib.util
import os
import sys

import yaml

FAKE_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "roles", "fake_gpu_node", "files", "python")
GPU = "nvidia.com/gpu"


def _fake_pynvml():
    """The fake pynvml, under its own module name (the real nvidia-ml-py may be installed)."""
    name = "gpuprov_fake_pynvml"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(FAKE_PYTHON, "pynvml.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@contextlib.contextmanager
def _fake_nvml(state_path):
    """The fake pynvml reading STATE_PATH (it reads $GPUPROV_FAKE_NVML_STATE per call)."""
    module = _fake_pynvml()
    saved = os.environ.get(module.STATE_ENV)
    os.environ[module.STATE_ENV] = state_path
    try:
        module.nvmlInit()
        yield module
    finally:
        try:
            module.nvmlShutdown()
        except Exception:  # a shutdown failure changes nothing here
            pass
        if saved is None:
            os.environ.pop(module.STATE_ENV, None)
        else:
            os.environ[module.STATE_ENV] = saved


def nvml_state(state_path):
    """The fake NVML state of a node, to change under its lock (mutate_state)."""
    return _fake_pynvml().mutate_state(state_path)


def write_planned_state(path, node_plan):
    """A fake NVML state at PATH with a node's GPUs as its plan (gpuprov plan -o json) has them,
    MIG layouts already made: a node the node converge left as planned."""
    fake = _fake_pynvml()
    models = []
    for gpu in node_plan["gpus"]:
        if models and models[-1][0] == gpu["model"]:
            models[-1] = (gpu["model"], models[-1][1] + 1)
        else:
            models.append((gpu["model"], 1))
    fake.write_new_state(path, gpus=models)
    with fake.mutate_state(path) as nvml:
        for gpu in node_plan["gpus"]:
            if (gpu.get("mig") or {}).get("enabled"):
                fake.set_mig_mode(nvml, gpu["index"], True)
                fake.create_instances(nvml, gpu["index"], [(i["profile"], i["placement"]["start"])
                                                           for i in gpu["mig"]["instances"]])
    return path


def _text(value):
    return value.decode() if isinstance(value, bytes) else value


def devices(state_path, mig_strategy):
    """[resource name, ...], one entry per device the plugin would list."""
    found = []
    with _fake_nvml(state_path) as nvml:
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            try:
                mig_on = nvml.nvmlDeviceGetMigMode(handle)[0] == nvml.NVML_DEVICE_MIG_ENABLE
            except nvml.NVMLError_NotSupported:
                mig_on = False
            if mig_strategy == "none" or not mig_on:
                found.append(GPU)
                continue
            for slot in range(nvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
                try:
                    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                except nvml.NVMLError_NotFound:
                    continue
                if mig_strategy == "single":
                    found.append(GPU)
                    continue
                instance = nvml.nvmlDeviceGetGpuInstanceById(handle, nvml.nvmlDeviceGetGpuInstanceId(mig))
                info = nvml.nvmlGpuInstanceGetInfo(instance)
                profile = nvml.nvmlDeviceGetGpuInstanceProfileInfoById(handle, info.profileId)
                found.append("nvidia.com/mig-" + _text(profile.name).replace("MIG ", "", 1))
    return found


def advertised(state_path, config_text):
    """{resource: count} the plugin advertises with this config (None: its defaults)."""
    config = yaml.safe_load(config_text) if config_text else {}
    config = config or {}
    mig_strategy = ((config.get("flags") or {}).get("migStrategy")) or "none"
    counts = {}
    for name in devices(state_path, mig_strategy):
        counts[name] = counts.get(name, 0) + 1
    sharing = config.get("sharing") or {}
    for kind in ("timeSlicing", "mps"):
        shared = sharing.get(kind) or {}
        for resource in shared.get("resources") or []:
            name, replicas = resource["name"], int(resource["replicas"])
            if name not in counts:
                continue
            count = counts.pop(name) * replicas
            rename = resource.get("rename") or (name + ".shared" if shared.get("renameByDefault") else name)
            counts[rename] = counts.get(rename, 0) + count
    return counts
