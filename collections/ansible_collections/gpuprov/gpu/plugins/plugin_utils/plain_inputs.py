# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Plain role inputs -> node plans, through the same intent parser and planner as the CLI.

A repository that reuses the roles without a gpuprov inventory sets plain variables
(``gpu_mig_devices`` or ``gpu_mig_config`` with the GPU model and count; a list of node
configs for the device plugin). They are turned into the ``gpuprov_*`` host variables the
inventory would hold, parsed and planned exactly as ``gpuprov plan`` does, and every problem
is reported under the name of the variable the caller set, not the inventory field it
stands for.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import live
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner, plan_fleet

# The names the gpu_mig role gives its plain inputs (the action takes others from the caller).
MIG_NAMES = {
    "gpu_model": "gpu_mig_gpu_model",
    "gpu_count": "gpu_mig_gpu_count",
    "devices": "gpu_mig_devices",
    "config": "gpu_mig_config",
    "config_file": "gpu_mig_config_file",
}
NODE_KEYS = ("name", "gpu_model", "gpu_count", "gpus", "sharing", "mig_config_file")
# A node config's keys and the inventory variables they stand for.
_NODE_VARS = (("gpu_model", "gpuprov_gpu_model"), ("gpu_count", "gpuprov_gpu_count"), ("gpus", "gpuprov_gpus"),
              ("sharing", "gpuprov_sharing"), ("mig_config_file", "gpuprov_mig_config_file"))

_PLANNER = Planner()


def rename_field(field, renames):
    """The caller's name for an inventory field: the longest matching prefix is replaced.

    A prefix matches the whole field or a part of it that a ``.``, ``[`` or ``(`` follows, so
    ``gpuprov_sharing.mig.devices[0].mig-devices`` becomes ``gpu_mig_devices[0].mig-devices``.
    Fields inside a mig-parted file (``PATH: mig-configs.NAME[0]...``) are kept: they name
    the file.
    """
    for prefix in sorted(renames, key=len, reverse=True):
        if field == prefix or (field.startswith(prefix) and field[len(prefix)] in ".[("):
            return renames[prefix] + field[len(prefix):]
    return field


def _problem_lines(problems, renames):
    return ["%s: %s" % (rename_field(p.field, renames), p.reason) for p in problems]


def plan_mig(host, gpu_model, gpu_count, devices=None, config=None, config_file=None, names=None):
    """Plan a node's MIG from plain inputs. Returns (plan or None, [problem line]).

    ``devices``: mig-parted entries (``devices``/``mig-enabled``/``mig-devices``);
    ``config``: a built-in config name, or one from the mig-parted file ``config_file``
    (a path the caller has resolved). Exactly one of ``devices`` and ``config``.
    ``names``: the caller's variable names for the keys of MIG_NAMES.
    """
    names = dict(MIG_NAMES, **(names or {}))
    lines = []
    if devices is None and config is None:
        lines.append("%s: set %s (mig-parted entries) or %s (a config name)"
                     % (names["devices"], names["devices"], names["config"]))
    if devices is not None and config is not None:
        lines.append("%s: set either %s or %s, not both" % (names["devices"], names["devices"], names["config"]))
    if config_file is not None and config is None:
        lines.append("%s: only used with %s" % (names["config_file"], names["config"]))
    if gpu_model is None:
        lines.append("%s: required: the GPU model the node must have, as in `gpuprov catalog`" % names["gpu_model"])
    if lines:
        return None, lines
    mig = {"devices": devices} if devices is not None else {"config": config}
    hostvars = {
        "gpuprov_gpu_model": gpu_model,
        "gpuprov_gpu_count": 1 if gpu_count is None else gpu_count,
        "gpuprov_sharing": {"strategy": "mig", "mig": mig},
    }
    if config_file is not None:
        hostvars["gpuprov_mig_config_file"] = config_file
    renames = {
        "gpuprov_gpu_model": names["gpu_model"],
        "gpuprov_gpu_count": names["gpu_count"],
        "gpuprov_sharing.mig.devices": names["devices"],
        "gpuprov_sharing.mig.config": names["config"],
        "gpuprov_mig_config_file": names["config_file"],
        # "MIG asked on a node whose GPUs have no MIG": the model is what is wrong.
        "gpuprov_sharing.strategy": names["gpu_model"],
    }
    intent, problems = parse_intent(host, hostvars)
    if intent is None:
        return None, _problem_lines(problems, renames)
    plan, problems = _PLANNER.plan_node(intent)
    if problems:
        return None, _problem_lines(problems, renames)
    return plan, []


def hardware_problem(plan, facts, names=None):
    """A problem line when the node's GPUs are not the model and count the caller expects."""
    names = dict(MIG_NAMES, **(names or {}))
    mismatch = live.hardware_mismatch(plan, facts, declared_by="%s/%s" % (names["gpu_model"], names["gpu_count"]))
    if mismatch is None:
        return None
    return "%s: %s" % (names["gpu_model"], mismatch)


def plan_nodes(nodes, var_name):
    """Plan a list of node configs (no inventory). Returns ({nodes, device_plugin_configs}, [line]).

    Each item: ``{name, gpu_model, gpu_count}`` or ``{name, gpus: [{model, count}]}``, with
    ``sharing`` in the form of ``gpuprov_sharing`` (default exclusive) and, for a named MIG
    config from a file, ``mig_config_file``. Problems read ``VAR[i].key: reason``.
    """
    if not isinstance(nodes, list) or not nodes:
        return None, ["%s: must be a non-empty list of {name, gpu_model, gpu_count, sharing}" % var_name]
    intents, lines, renames_by_host, seen = [], [], {}, set()
    for i, node in enumerate(nodes):
        field = "%s[%d]" % (var_name, i)
        if not isinstance(node, dict):
            lines.append("%s: must be a mapping {name, gpu_model, gpu_count, sharing}" % field)
            continue
        unknown = sorted(set(node) - set(NODE_KEYS))
        if unknown:
            lines.append("%s: unknown key(s) %s; allowed: %s" % (field, ", ".join(unknown), ", ".join(NODE_KEYS)))
            continue
        name = node.get("name")
        if not isinstance(name, str) or not name:
            lines.append("%s.name: required: the node's name in Kubernetes" % field)
            continue
        if name in seen:
            lines.append("%s.name: node %s is listed twice" % (field, name))
            continue
        seen.add(name)
        hostvars = dict((var, node[key]) for key, var in _NODE_VARS if key in node)
        renames_by_host[name] = dict((var, "%s.%s" % (field, key)) for key, var in _NODE_VARS)
        intent, problems = parse_intent(name, hostvars)
        if intent is None:
            lines.extend(_problem_lines(problems, renames_by_host[name]))
        else:
            intents.append(intent)
    if lines:
        return None, lines
    result, problems = plan_fleet(intents)
    if problems:
        return None, [line for p in problems for line in _problem_lines([p], renames_by_host[p.host])]
    return {"nodes": result["nodes"], "device_plugin_configs": result["device_plugin_configs"]}, []
