# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Planner: NodeIntent -> NodePlan, the one source of every node's desired state.

`gpuprov plan` prints these plans and the collection's action plugin hands the same plans
to the roles, so what is shown and what runs cannot drift apart. Plans are plain data
(dicts, lists, str, int) ready for JSON and for Ansible variables.

A fleet has few distinct intents (a group of 200 identical nodes is one), so plans are
computed once per distinct intent and shared.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import (
    LayoutError, describe_counts, idle_slices, place)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog, device_plugin, sharing
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import Problem

PLAN_FORMAT_VERSION = 1
GPU_RESOURCE = device_plugin.GPU_RESOURCE


class Planner:
    """Plans nodes, caching by intent so identical nodes cost one planning step."""

    def __init__(self):
        self._node_cache = {}
        self._layout_cache = {}

    def plan_node(self, intent):
        """Return (plan dict, [Problem]). The plan is None when there are problems."""
        key = intent.key()
        cached = self._node_cache.get(key)
        if cached is None:
            cached = self._plan(intent)
            self._node_cache[key] = cached
        body, problems = cached
        if problems:
            # Problems were found for the first host with this intent: re-label them.
            return None, [Problem(intent.host, p.field, p.reason) for p in problems]
        plan = dict(body)
        plan["host"] = intent.host
        plan["node_name"] = intent.node_name
        return plan, []

    # -- one intent ---------------------------------------------------------------------------
    def _plan(self, intent):
        problems = []
        gpus = [self._plan_gpu(intent, i, model, problems) for i, model in enumerate(intent.models)]
        if problems:
            return None, problems

        mig_gpus = [g for g in gpus if g["mig"] and g["mig"]["enabled"]]
        if intent.strategy == "mig" and intent.mig_strategy == "single":
            profiles = set(inst["profile"] for g in mig_gpus for inst in g["mig"]["instances"])
            if len(profiles) > 1:
                problems.append(Problem(intent.host, "gpuprov_sharing.mig.strategy",
                                        "single strategy needs one MIG profile on every GPU, the layout has %s; "
                                        "use strategy mixed" % ", ".join(sorted(profiles))))
            if len(mig_gpus) != len(gpus):
                problems.append(Problem(intent.host, "gpuprov_sharing.mig.strategy",
                                        "single strategy needs MIG enabled on every GPU of the node; "
                                        "GPU(s) %s are not MIG-enabled: use strategy mixed"
                                        % ", ".join(str(g["index"]) for g in gpus if g not in mig_gpus)))
            if problems:
                return None, problems

        # The sharing provider (NVIDIA device plugin or HAMi) owns the advertised resources,
        # the memory per shared slot, the node labels and its cluster-side config.
        provider = sharing.provider_for(intent.strategy)
        parts, provider_problems = provider.plan(intent, gpus)
        if provider_problems:
            return None, [Problem(intent.host, field, reason) for field, reason in provider_problems]

        plan = {
            "format": PLAN_FORMAT_VERSION,
            "strategy": intent.strategy,
            "sharing_provider": provider.name,
            "gpu_count": len(gpus),
            "gpus": gpus,
            "resources": parts["resources"],
            "slots": parts["slots"],
            # None on a node whose provider keeps the NVIDIA device plugin off (HAMi).
            "device_plugin": parts["device_plugin"],
            "labels": parts["labels"],
            "mig": self._mig_summary(intent),
            "mps": self._mps(intent),
            "kubelet": dict(intent.kubelet),
        }
        for key, value in parts.items():
            plan.setdefault(key, value)  # provider sections, e.g. hami
        plan["actions"] = self._actions(intent, plan)
        plan["warnings"] = self._warnings(intent, plan) + provider.warnings(intent, plan)
        return plan, []

    def _plan_gpu(self, intent, index, model, problems):
        gpu = {"index": index, "model": model.key, "memory_mib": model.memory_mib, "mig": None}
        if not model.mig_capable:
            return gpu
        request = intent.mig_requests[index] if intent.mig_requests is not None else None
        if request is None or not request.enabled:
            gpu["mig"] = {"enabled": False, "instances": [], "managed": request is not None or intent.strategy != "mig"}
            return gpu
        missing = sorted(p for p in request.counts if p not in model.mig.profiles)
        if missing:
            problems.append(Problem(intent.host, request.field,
                                    "GPU %d (%s) has no MIG profile %s; its profiles: %s"
                                    % (index, model.key, ", ".join(missing), ", ".join(model.mig.profiles))))
            return gpu
        layout_key = (model.key, tuple(sorted(request.counts.items())))
        if layout_key not in self._layout_cache:
            try:
                instances = place(request.counts, model.solver_profiles(), model.mig.compute_slices)
                self._layout_cache[layout_key] = ([
                    {"profile": i.profile, "placement": {"start": i.start, "size": i.size}} for i in instances],
                    idle_slices(instances, model.mig.memory_slices, model.solver_profiles()))
            except LayoutError as exc:
                self._layout_cache[layout_key] = exc
        cached = self._layout_cache[layout_key]
        if isinstance(cached, LayoutError):
            problems.append(Problem(intent.host, request.field, "GPU %d (%s): %s is not a valid layout: %s"
                                    % (index, model.key, describe_counts(request.counts), cached)))
            return gpu
        instances, (idle_memory, used_compute) = cached
        gpu["mig"] = {
            "enabled": True,
            "managed": True,
            "instances": instances,
            "idle_memory_slices": idle_memory,
            "idle_compute_slices": model.mig.compute_slices - used_compute,
        }
        return gpu

    @staticmethod
    def _mig_summary(intent):
        if intent.strategy != "mig":
            return None
        return {"strategy": intent.mig_strategy, "source": intent.mig_source,
                "time_slicing_replicas": intent.time_slicing_replicas}

    @staticmethod
    def _mps(intent):
        if intent.strategy != "mps":
            return None
        mps = intent.mps or {"provider": "device-plugin"}
        replicas = intent.replicas
        pct = mps.get("active_thread_percentage") or max(1, 100 // replicas)
        devices = []
        for index, model in enumerate(intent.models):
            limit = mps.get("pinned_memory_limit_mib") or model.memory_mib // replicas
            devices.append({"index": index, "pinned_memory_limit_mib": limit})
        return {"provider": mps["provider"], "replicas": replicas, "active_thread_percentage": pct,
                "devices": devices}

    @staticmethod
    def _actions(intent, plan):
        """Steps a converge may take, in order. Each runs only `when` the live state differs."""
        steps = []
        gpus = plan["gpus"]
        mig_managed = [g for g in gpus if g["mig"] is not None and g["mig"].get("managed", True)]
        enabled = [g["index"] for g in mig_managed if g["mig"]["enabled"]]
        disabled = [g["index"] for g in mig_managed if not g["mig"]["enabled"]]
        ampere = [g["index"] for g in mig_managed if g["model"] in _AMPERE_MIG]
        if enabled:
            steps.append({"action": "mig-mode", "gpus": enabled, "to": "enabled", "disruptive": True,
                          "when": "MIG is disabled on the GPU now"})
        if disabled:
            steps.append({"action": "mig-mode", "gpus": disabled, "to": "disabled", "disruptive": True,
                          "when": "MIG is enabled on the GPU now"})
        if ampere:
            steps.append({"action": "gpu-reset", "gpus": ampere, "disruptive": True,
                          "when": "a MIG mode change is pending (Ampere applies it only after a GPU reset)"})
        if enabled:
            steps.append({"action": "mig-layout", "gpus": enabled, "disruptive": True,
                          "when": "live GPU instances differ; instances already at their planned placement are kept"})
        if plan["mps"] and plan["mps"]["provider"] == "host":
            steps.append({"action": "mps-daemon", "gpus": [g["index"] for g in gpus], "disruptive": True,
                          "when": "the MPS daemon is not running, or compute mode is not EXCLUSIVE_PROCESS"})
        kubelet = plan["kubelet"]
        if kubelet:
            if "cpu_manager_policy" in kubelet or "memory_manager_policy" in kubelet:
                steps.append({"action": "kubelet-state-reset", "disruptive": True,
                              "when": "the live CPU or memory manager policy differs (drain, stop kubelet, "
                                      "remove cpu_manager_state/memory_manager_state, start)"})
            steps.append({"action": "kubelet-config", "disruptive": False,
                          "when": "managed kubelet keys differ; kubelet restarts only then"})
        steps.append({"action": "label-node", "disruptive": False,
                      "labels": dict(plan["labels"]), "when": "the node's labels differ"})
        if any(s["disruptive"] for s in steps):
            steps.insert(0, {"action": "drain", "disruptive": True,
                             "when": "any disruptive step below must run; a node already converged is not drained"})
            steps.append({"action": "uncordon", "disruptive": False, "when": "the node was drained"})
        for number, step in enumerate(steps, 1):
            step["step"] = number
        return steps

    @staticmethod
    def _warnings(intent, plan):
        warnings = []
        per_gpu = {}  # message -> GPU indices, so 8 identical GPUs give one line
        for gpu in plan["gpus"]:
            mig = gpu["mig"]
            if not mig or not mig["enabled"]:
                continue
            if not mig["instances"]:
                per_gpu.setdefault("MIG enabled with no instances; advertises nothing", []).append(gpu["index"])
                continue
            if mig["idle_memory_slices"]:
                per_gpu.setdefault("%s layout leaves %d memory slice(s) idle"
                                   % (gpu["model"], mig["idle_memory_slices"]), []).append(gpu["index"])
            if mig["idle_compute_slices"]:
                per_gpu.setdefault("%s layout leaves %d compute slice(s) idle"
                                   % (gpu["model"], mig["idle_compute_slices"]), []).append(gpu["index"])
        for message, indices in per_gpu.items():
            warnings.append("GPU %s: %s" % (index_ranges(indices), message))
        unmanaged = [g["index"] for g in plan["gpus"] if g["mig"] is not None and not g["mig"].get("managed", True)]
        if unmanaged:
            warnings.append("GPU %s: no entry of the MIG config selects it; planned with MIG disabled"
                            % index_ranges(unmanaged))
        if intent.strategy == "time-slicing" or (intent.strategy == "mig" and intent.time_slicing_replicas):
            warnings.append("time-slicing gives no memory or fault isolation between pods sharing a GPU")
        if intent.strategy == "mps" and plan["mps"]["provider"] == "device-plugin":
            warnings.append("the device plugin's MPS support is marked experimental by NVIDIA; "
                            "it needs the mps-control-daemon and GFD (Helm chart) on the node")
        if intent.strategy == "mps" and plan["mps"]["provider"] == "host":
            warnings.append("host MPS: pods the device plugin schedules get whole GPUs in EXCLUSIVE_PROCESS mode "
                            "and must use the daemon's pipe directory")
        if any(g["model"] in _AMPERE_MIG for g in plan["gpus"] if g["mig"] and g["mig"]["enabled"]):
            warnings.append("Ampere GPUs apply a MIG mode change only after a GPU reset; clients such as "
                            "DCGM, nvsm or CUDA processes block it (nvidia-persistenced does not)")
        kubelet = plan["kubelet"]
        if kubelet.get("cpu_manager_policy") == "static" and kubelet.get("topology_manager_policy") in (None, "none"):
            warnings.append("static CPU manager without a topology manager policy does not align CPUs with GPUs; "
                            "consider topology_manager_policy: single-numa-node")
        return warnings


# Models whose MIG mode change waits for a GPU reset.
_AMPERE_MIG = frozenset(m.key for m in catalog.all_models() if m.mig_capable and m.reset_required_for_mig_mode)


def index_ranges(indices):
    """[0, 1, 2, 5] -> '0-2,5'."""
    parts, run = [], []
    for i in sorted(indices):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            parts.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
        run = [i]
    if run:
        parts.append(str(run[0]) if len(run) == 1 else "%d-%d" % (run[0], run[-1]))
    return ",".join(parts)


def summarize(plans):
    """Fleet summary over node plans."""
    gpus, resources, configs, strategies = {}, {}, {}, {}
    for plan in plans:
        for gpu in plan["gpus"]:
            gpus[gpu["model"]] = gpus.get(gpu["model"], 0) + 1
        for name, count in plan["resources"].items():
            resources[name] = resources.get(name, 0) + count
        if plan["device_plugin"] is not None:
            name = plan["device_plugin"]["config_name"]
            configs[name] = configs.get(name, 0) + 1
        strategies[plan["strategy"]] = strategies.get(plan["strategy"], 0) + 1
    return {
        "nodes": len(plans),
        "physical_gpus": sum(gpus.values()),
        "gpus_by_model": dict(sorted(gpus.items())),
        "resources": dict(sorted(resources.items())),
        "device_plugin_configs": dict(sorted(configs.items())),
        "strategies": dict(sorted(strategies.items())),
    }


def device_plugin_configs(plans):
    """{config name: config} over the fleet; one entry per distinct config."""
    configs = {}
    for plan in plans:
        if plan["device_plugin"] is None:
            continue  # a node without the NVIDIA device plugin (HAMi)
        name = plan["device_plugin"]["config_name"]
        config = plan["device_plugin"]["config"]
        if configs.setdefault(name, config) != config:
            raise AssertionError("device-plugin config name %s names two different configs" % name)
    return dict(sorted(configs.items()))


def plan_fleet(intents):
    """Plan every intent. Returns (result dict, [Problem])."""
    planner = Planner()
    nodes, problems = {}, []
    # A Kubernetes node name names one node: two hosts with one name would drain, label and
    # report each other's node.
    owners = {}
    for intent in intents:
        owners.setdefault(intent.node_name, []).append(intent.host)
    for intent in intents:
        others = [h for h in owners[intent.node_name] if h != intent.host]
        if others:
            problems.append(Problem(intent.host, "gpuprov_node_name", "node name %s is also the node name of %s; "
                                    "each host needs its own" % (intent.node_name, ", ".join(others[:5]))))
            continue
        plan, node_problems = planner.plan_node(intent)
        if node_problems:
            problems.extend(node_problems)
        else:
            nodes[intent.host] = plan
    plans = list(nodes.values())
    return {
        "format": PLAN_FORMAT_VERSION,
        "nodes": nodes,
        "device_plugin_configs": device_plugin_configs(plans),
        "summary": summarize(plans),
    }, problems
