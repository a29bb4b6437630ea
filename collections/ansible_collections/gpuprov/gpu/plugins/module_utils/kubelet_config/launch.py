# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""How the kubelet is started: its systemd unit, the unit's drop-ins and environment files,
and the flags they give it.

Flags beat the config file and its drop-ins (kubernetes.io "Set Kubelet Parameters Via A
Configuration File": "command line flags which target the same value as a config file will
override that value"), so a flag such as ``--cpu-manager-policy`` in kubeadm's
``kubeadm-flags.env``, in ``/etc/default/kubelet`` or in Kubespray's ``kubelet.env`` silently
undoes a managed key. Each flag is reported with the layer (file) that supplied it.

Unit parsing follows systemd.unit(5) and systemd.service(5): the unit file from the first
directory that has it, drop-ins ``<unit>.d/*.conf`` from every directory sorted by file name
(a name in an earlier directory hides the same name in a later one), an empty ``ExecStart=``
clears the list, ``EnvironmentFile=-`` may be missing, later assignments win, and in
``ExecStart=`` ``$VAR`` splits the value into words while ``${VAR}`` keeps it one word.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shlex

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.errors import KubeletConfigError
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import DEFAULT_CONFIG_PATH

# systemd's system unit search path, most specific first (systemd.unit(5)).
UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
             "/usr/lib/systemd/system", "/lib/systemd/system")

# Kubelet flags that set a KubeletConfiguration field gpuprov manages or reads.
FLAG_KEYS = {
    "--cpu-manager-policy": "cpuManagerPolicy",
    "--cpu-manager-policy-options": "cpuManagerPolicyOptions",
    "--cpu-manager-reconcile-period": "cpuManagerReconcilePeriod",
    "--topology-manager-policy": "topologyManagerPolicy",
    "--topology-manager-scope": "topologyManagerScope",
    "--topology-manager-policy-options": "topologyManagerPolicyOptions",
    "--reserved-cpus": "reservedSystemCPUs",
    "--kube-reserved": "kubeReserved",
    "--system-reserved": "systemReserved",
    "--memory-manager-policy": "memoryManagerPolicy",
    "--reserved-memory": "reservedMemory",
    "--eviction-hard": "evictionHard",
    "--feature-gates": "featureGates",
}
# Kubelet flags that take a value as the next word (boolean flags never do).
VALUE_FLAGS = set(FLAG_KEYS) | {"--config", "--config-dir", "--kubeconfig",
                                "--bootstrap-kubeconfig", "--root-dir", "--hostname-override",
                                "--container-runtime-endpoint", "--node-ip", "--v",
                                "--pod-infra-container-image", "--node-labels",
                                "--cert-dir", "--cloud-provider", "--register-with-taints"}

KUBESPRAY_ENV = "/etc/kubernetes/kubelet.env"

# KubeletConfiguration key -> the Kubespray variable that sets it, read from Kubespray's
# roles/kubernetes/node/templates/kubelet-config.v1beta1.yaml.j2. Keys without a variable of
# their own go through kubelet_node_config_extra_args (a map merged into the file).
KUBESPRAY_VARIABLES = {
    "cpuManagerPolicy": "kubelet_cpu_manager_policy",
    "topologyManagerPolicy": "kubelet_topology_manager_policy",
    "topologyManagerScope": "kubelet_topology_manager_scope",
    "kubeReserved.cpu": "kube_cpu_reserved (with kube_reserved: true)",
    "systemReserved.cpu": "system_cpu_reserved (with system_reserved: true)",
}
KUBESPRAY_EXTRA_ARGS = "kubelet_node_config_extra_args"


def kubespray_advice(managed):
    """The Kubespray variables that keep ``managed`` (dotted key -> value) across a run."""
    lines = []
    extra = {}
    for key in sorted(managed):
        value = managed[key]
        if key in KUBESPRAY_VARIABLES:
            lines.append("%s: %s" % (KUBESPRAY_VARIABLES[key], _yaml_scalar(value)))
        elif "." not in key and value is not None:
            extra[key] = value
    if extra:
        lines.append("%s: %s" % (KUBESPRAY_EXTRA_ARGS, _flow(extra)))
    return lines


def _yaml_scalar(value):
    if value is None:
        return "null"
    return '"%s"' % value if isinstance(value, str) else str(value)


def _flow(value):
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (k, _flow(v)) for k, v in sorted(value.items()))
    if isinstance(value, list):
        return "[%s]" % ", ".join(_flow(v) for v in value)
    return _yaml_scalar(value)


class UnitLayer(object):
    """One file that shapes the kubelet's command line."""

    def __init__(self, path, kind):
        self.path = path
        self.kind = kind  # "unit", "drop-in" or "environment file"


def _rooted(root, path):
    return os.path.join(root, path.lstrip("/")) if root not in (None, "", "/") else path


def _read(path):
    with open(path) as handle:
        return handle.read()


def _service_lines(text):
    """(key, value) of the [Service] section, continuation lines joined."""
    section = None
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]" and "=" in line:
            key, value = line.split("=", 1)
            yield key.strip(), value.strip()


def parse_environment_file(text):
    """KEY=VALUE lines as systemd reads an EnvironmentFile (quotes removed, # comments)."""
    result = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        result[key.strip()] = value
    return result


def unit_layers(unit, root="/", unit_dirs=UNIT_DIRS):
    """The unit file and its drop-ins, in the order systemd applies them."""
    layers = []
    for directory in unit_dirs:
        path = _rooted(root, os.path.join(directory, unit))
        if os.path.isfile(path):
            layers.append(UnitLayer(path, "unit"))
            break
    drop_ins = {}
    for directory in unit_dirs:
        path = _rooted(root, os.path.join(directory, unit + ".d"))
        if not os.path.isdir(path):
            continue
        for name in os.listdir(path):
            if name.endswith(".conf") and name not in drop_ins:
                drop_ins[name] = os.path.join(path, name)
    layers.extend(UnitLayer(drop_ins[name], "drop-in") for name in sorted(drop_ins))
    return layers


def _expand(argv_text, env):
    """Split ExecStart= into words with $VAR / ${VAR} expanded, each word tagged with the
    variable it came from (None for literal words)."""
    words = []
    for word in shlex.split(argv_text):
        whole = re.match(r"\$(\w+)\Z", word, re.ASCII)
        if whole:
            value, origin = env.get(whole.group(1), ("", None))
            words.extend((part, origin) for part in value.split())
            continue
        origins = []

        def replace(match):
            name = match.group(1) or match.group(2)
            value, origin = env.get(name, ("", None))
            origins.append(origin)
            return value
        expanded = re.sub(r"\$\{(\w+)\}|\$(\w+)", replace, word)
        words.append((expanded, next((o for o in origins if o), None)))
    return [(word, origin) for word, origin in words if word != ""]


def read_launch(unit="kubelet.service", root="/", unit_dirs=UNIT_DIRS):
    """What the kubelet unit runs.

    :returns: dict with ``found`` (a unit file exists), ``binary``, ``argv``, ``flags`` (list
        of ``{flag, value, layer}``), ``config``, ``config_dir``, ``manager`` (``kubeadm``,
        ``kubespray`` or ``unknown``) and ``layers`` (the files read, in order).
    """
    layers = unit_layers(unit, root, unit_dirs)
    result = dict(found=bool(layers) and layers[0].kind == "unit", binary=None, argv=[],
                  flags=[], config=None, config_dir=None, manager="unknown",
                  layers=[layer.path for layer in layers])
    env = {}
    exec_start = None
    exec_layer = None
    for layer in layers:
        for key, value in _service_lines(_read(layer.path)):
            if key == "Environment":
                for item in shlex.split(value):
                    name, _sep, val = item.partition("=")
                    env[name] = (val, layer.path)
            elif key == "EnvironmentFile":
                path = _rooted(root, value.lstrip("-"))
                if os.path.isfile(path):
                    result["layers"].append(path)
                    for name, val in parse_environment_file(_read(path)).items():
                        env[name] = (val, path)
            elif key == "ExecStart":
                # An empty ExecStart= clears the list; the last one left is the command.
                exec_start = value.lstrip("-@:+!") or None
                exec_layer = layer.path
    if exec_start is None:
        return result
    words = _expand(exec_start, env)
    result["binary"] = words[0][0] if words else None
    result["argv"] = [word for word, _origin in words]
    index = 1
    while index < len(words):
        word, origin = words[index]
        layer = origin or exec_layer
        if word.startswith("--"):
            flag, sep, value = word.partition("=")
            if not sep and flag in VALUE_FLAGS and index + 1 < len(words):
                value = words[index + 1][0]
                index += 1
            result["flags"].append(dict(flag=flag, value=value, layer=layer))
        index += 1
    for entry in result["flags"]:
        if entry["flag"] == "--config":
            result["config"] = _rooted(root, entry["value"])
        elif entry["flag"] == "--config-dir":
            result["config_dir"] = _rooted(root, entry["value"])
    joined = " ".join(result["layers"])
    if "kubeadm" in joined:
        result["manager"] = "kubeadm"
    elif KUBESPRAY_ENV in joined or _rooted(root, KUBESPRAY_ENV) in joined:
        result["manager"] = "kubespray"
    return result


# Flags whose value is a map: the first one on the command line replaces the whole map of the
# config file, not only the keys it names (component-base cli/flag MapStringString.Set clears
# the map; the kubelet re-parses its flags over the loaded config, kubeletConfigFlagPrecedence
# in cmd/kubelet/app/server.go). featureGates are the exception: the kubelet merges the config
# file's gates back in.
MAP_FLAGS = ("--kube-reserved", "--system-reserved", "--eviction-hard",
             "--cpu-manager-policy-options", "--topology-manager-policy-options")
# What the reservedMemory sum must equal comes from these maps (kubeReserved.memory +
# systemReserved.memory + evictionHard memory.available, hugepages alike).
RESERVED_MEMORY_SOURCES = ("kubeReserved", "systemReserved", "evictionHard")


def flag_conflicts(launch, managed_keys):
    """One ``LAYER: --flag overrides KEY`` line per flag that changes a managed key.

    :arg managed_keys: dotted keys such as ``cpuManagerPolicy`` or ``kubeReserved.cpu``.
    """
    conflicts = []
    for entry in launch["flags"]:
        key = FLAG_KEYS.get(entry["flag"])
        if key is None or key == "featureGates":
            continue
        shown = "%s=%s" % (entry["flag"], entry["value"])
        for managed in managed_keys:
            top, _sep, member = managed.partition(".")
            if top == key and member and entry["flag"] in MAP_FLAGS:
                names = [item.split("=", 1)[0].strip() for item in entry["value"].split(",")]
                if member in names:
                    reason = "overrides %s" % managed
                else:
                    reason = ("replaces the whole %s map, so the kubelet runs without the %s "
                              "gpuprov writes" % (top, managed))
            elif top == key:
                reason = "overrides %s" % managed
            elif managed == "reservedMemory" and key in RESERVED_MEMORY_SOURCES:
                reason = ("replaces %s, which the reservedMemory gpuprov writes must sum up to"
                          % key)
            else:
                continue
            conflicts.append("%s: %s %s, which gpuprov manages in the kubelet config (flags "
                             "win over the config file); remove the flag there"
                             % (entry["layer"], shown, reason))
    return conflicts


# The kubelet key each setting writes (KubeletSettings field -> dotted KubeletConfiguration key),
# for flag_conflicts: a flag that sets one of them overrides the config file.
MANAGED_KEYS = {
    "cpu_manager_policy": "cpuManagerPolicy", "cpu_manager_policy_options": "cpuManagerPolicyOptions",
    "cpu_manager_reconcile_period": "cpuManagerReconcilePeriod", "topology_manager_policy": "topologyManagerPolicy",
    "topology_manager_scope": "topologyManagerScope", "topology_manager_policy_options": "topologyManagerPolicyOptions",
    "reserved_system_cpus": "reservedSystemCPUs", "kube_reserved_cpu": "kubeReserved.cpu",
    "system_reserved_cpu": "systemReserved.cpu", "memory_manager_policy": "memoryManagerPolicy",
    "reserved_memory": "reservedMemory",
}


def launch_answer(launch, version):
    """What kubelet_launch returns (and kubelet_config as ``launch``) of a read_launch result."""
    answer = dict((key, launch[key]) for key in ("found", "config", "config_dir", "manager", "flags", "layers"))
    answer["kubelet_version"] = version
    return answer


def refuse_conflicts(launch, managed_keys):
    """Raise KubeletConfigError, one ``errors`` line per flag, when a flag overrides a managed key.

    :arg managed_keys: dotted keys such as ``cpuManagerPolicy`` or ``kubeReserved.cpu``.
    """
    conflicts = flag_conflicts(launch, managed_keys)
    if conflicts:
        raise KubeletConfigError("another layer overrides keys gpuprov manages: %s" % "; ".join(conflicts),
                                 errors=conflicts)


def kubelet_version(binary, root, run_command):
    """The version ``binary --version`` prints ("v1.31.2"), or None when it cannot be run.

    :arg run_command: ``argv -> (rc, stdout, stderr)``, as AnsibleModule.run_command.
    """
    if not binary:
        return None
    path = binary if root in ("/", "") else os.path.join(root, binary.lstrip("/"))
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None
    rc, out, _err = run_command([path, "--version"])
    if rc != 0 or not out.strip():
        return None
    return out.strip().split()[-1]


def config_target(launch, fields, path=None, config_dir=None):
    """(config file, drop-in directory) the kubelet started as ``launch`` reads for these settings.

    ``path`` and ``config_dir`` given by the user win where the unit names none; a ``path``
    that differs from the unit's ``--config`` is refused, since editing it would change
    nothing. Raises KubeletConfigError when a flag overrides a key of ``fields`` (the
    KubeletSettings fields that are set), naming the file that sets it.
    """
    refuse_conflicts(launch, [MANAGED_KEYS[field] for field in fields if field in MANAGED_KEYS])
    if path is None:
        path = launch["config"] or DEFAULT_CONFIG_PATH
    elif launch["found"] and launch["config"] and launch["config"] != path:
        raise KubeletConfigError("the kubelet runs with --config=%s (%s), not %s; editing that file would change "
                                 "nothing" % (launch["config"], ", ".join(launch["layers"]), path))
    return path, config_dir or launch["config_dir"]
