# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""NodeIntent: what the inventory asks of one host, typed and checked.

Inventory contract (per host, from any inventory source, group_vars or host_vars)::

    gpuprov_gpu_model: A100-80GB        # or gpuprov_gpus: [{model: A100-80GB, count: 8}]
    gpuprov_gpu_count: 8
    gpuprov_sharing:
      strategy: exclusive | time-slicing | mps | mig
      replicas: 4                       # time-slicing and mps
      mig:                              # strategy mig
        config: all-balanced            # built-in or from gpuprov_mig_config_file
        devices: [...]                  # or mig-parted entries inline
        strategy: mixed                 # or single
      time_slicing_replicas: 2          # optional with mig
      mps: {provider: device-plugin | host, active_thread_percentage: 25, pinned_memory_limit: 10G}
    gpuprov_mig_config_file: mig-parted.yaml   # relative to the inventory's folder
    gpuprov_kubelet:
      cpu_manager_policy: static
      ...

Every problem is collected (not only the first) as a Problem naming host and field.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import difflib
import os

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import settings as kubelet_settings
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import mps_pinned_memory_mib
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import (
    catalog, known_vars, kubernetes_names, migparted, safe_files, sharing as sharing_mod, sharing_base, user_catalog)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.terminal_text import escape

# Each strategy is served by a sharing provider (plugin_utils/sharing.py), which checks the
# keys it owns (time_slicing_replicas, device_plugin, hami).
STRATEGIES = sharing_mod.strategies()  # exclusive, time-slicing, mps, mig, hami
SHARING_KEYS = {"strategy", "replicas", "mig", "mps"} | set(sharing_mod.owned_keys())
MIG_KEYS = {"config", "devices", "strategy"}
MPS_KEYS = {"provider", "active_thread_percentage", "pinned_memory_limit"}
MPS_PROVIDERS = ("device-plugin", "host")

# Bounds on every count an inventory sets. Each is far above any real node and low enough
# that a hostile value is refused before anything is built from it.
# No server has more than 16 GPUs today (HGX/DGX: 8; some PCIe chassis: 10-20); 64 leaves room.
MAX_GPUS_PER_NODE = 64
# A time-slicing or MPS replica needs memory to be a slot at all: at least this much per
# replica, and never more than MAX_REPLICAS replicas per GPU (a gpuprov policy, not NVIDIA's).
MIN_REPLICA_MIB = 256
MAX_REPLICAS = sharing_base.MAX_REPLICAS
MAX_NAME_LENGTH = 128


class Problem:
    __slots__ = ("host", "field", "reason")

    def __init__(self, host, field, reason):
        self.host = host
        self.field = field
        self.reason = reason

    def __str__(self):
        return "%s: %s: %s" % (escape(self.host), escape(self.field), escape(self.reason))

    def as_dict(self):
        return {"host": self.host, "field": self.field, "reason": self.reason}


class NodeIntent:
    """A host's validated request. ``key()`` is equal for hosts that plan identically.

    ``models_catalog`` is the catalog the host's models were looked up in (the user's
    catalog files, or None for the built-ins), for callers that check live hardware.
    """

    __slots__ = ("host", "models", "strategy", "replicas", "mig_requests", "mig_strategy",
                 "mig_source", "time_slicing_replicas", "mps", "kubelet", "options", "node_name", "models_catalog")

    def __init__(self, host, models, strategy, replicas=None, mig_requests=None, mig_strategy=None,
                 mig_source=None, time_slicing_replicas=None, mps=None, kubelet=None, options=None, node_name=None,
                 models_catalog=None):
        self.host = host
        self.node_name = node_name or host
        self.models = models
        self.strategy = strategy
        self.replicas = replicas
        self.mig_requests = mig_requests
        self.mig_strategy = mig_strategy
        self.mig_source = mig_source
        self.time_slicing_replicas = time_slicing_replicas
        self.mps = mps
        self.kubelet = kubelet or {}
        # The sharing provider's own options (device_plugin, hami), as its parse() returned them.
        self.options = options or {}
        self.models_catalog = models_catalog

    def key(self):
        mig = None
        if self.mig_requests is not None:
            mig = tuple(None if r is None else (r.enabled, tuple(sorted(r.counts.items())))
                        for r in self.mig_requests)
        return (tuple(m.key for m in self.models), self.strategy, self.replicas, mig, self.mig_strategy,
                self.mig_source, _freeze(self.time_slicing_replicas),
                tuple(sorted(self.mps.items())) if self.mps else None,
                _freeze(self.kubelet), _freeze(self.options),
                # User catalog models may share a key with other content: plan them apart.
                tuple((m.memory_mib, m.compute_capability) for m in self.models))


def _freeze(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def short(value, limit=60):
    """repr() of a value for an error message, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...(%d characters)" % len(text)


class _Collector:
    def __init__(self, host):
        self.host = host
        self.problems = []

    def add(self, field, reason):
        self.problems.append(Problem(self.host, field, reason))


def parse_models(host, hostvars, out, models_catalog=None):
    """The node's GPU models, one per GPU index, from gpuprov_gpu_model/count or gpuprov_gpus.

    ``models_catalog``: a user_catalog.UserCatalog with the user's models, or None (built-ins).
    """
    models_catalog = models_catalog or catalog
    has_single = "gpuprov_gpu_model" in hostvars or "gpuprov_gpu_count" in hostvars
    has_list = "gpuprov_gpus" in hostvars
    if has_single and has_list:
        out.add("gpuprov_gpus", "set either gpuprov_gpus or gpuprov_gpu_model/gpuprov_gpu_count, not both")
        return None
    if has_list:
        gpus = hostvars["gpuprov_gpus"]
        if not isinstance(gpus, list) or not gpus:
            out.add("gpuprov_gpus", "must be a non-empty list of {model, count}")
            return None
        if len(gpus) > MAX_GPUS_PER_NODE:
            out.add("gpuprov_gpus", "%d items; a node has at most %d GPUs" % (len(gpus), MAX_GPUS_PER_NODE))
            return None
        specs = []
        for i, item in enumerate(gpus):
            field = "gpuprov_gpus[%d]" % i
            if not isinstance(item, dict) or set(item) - {"model", "count"} or "model" not in item:
                out.add(field, "each item must be {model: NAME, count: N}")
                continue
            specs.append((field + ".model", item["model"], field + ".count", item.get("count", 1)))
    elif has_single:
        if "gpuprov_gpu_model" not in hostvars:
            out.add("gpuprov_gpu_model", "required with gpuprov_gpu_count")
            return None
        specs = [("gpuprov_gpu_model", hostvars["gpuprov_gpu_model"], "gpuprov_gpu_count",
                  hostvars.get("gpuprov_gpu_count", 1))]
    else:
        out.add("gpuprov_gpu_model", "required: the node's GPU model (or gpuprov_gpus for several models)")
        return None
    models = []
    ok = True
    total = 0
    for mfield, name, cfield, count in specs:
        model = None
        if not isinstance(name, str) or not name.strip():
            out.add(mfield, "must be a GPU model name (a string such as A100-80GB), got %s" % short(name))
            ok = False
        elif len(name) > MAX_NAME_LENGTH:
            out.add(mfield, "a model name has at most %d characters, got %d" % (MAX_NAME_LENGTH, len(name)))
            ok = False
        else:
            try:
                model = models_catalog.lookup(name)
            except catalog.UnknownModelError as exc:
                out.add(mfield, str(exc))
                ok = False
        if not _is_int(count) or count < 1:
            out.add(cfield, "must be a positive integer, got %s" % short(count))
            ok = False
            continue
        total += count
        if total > MAX_GPUS_PER_NODE:
            # Checked before the list of models is built: a count of 10**12 costs nothing.
            out.add(cfield, "%d GPUs on one node; the limit is %d" % (total, MAX_GPUS_PER_NODE))
            return None
        if model is not None:
            models.extend([model] * count)
    return models if ok else None


def check_variables(hostvars, out):
    """Unknown gpuprov_* names (a typo like gpuprov_sharng) with a did-you-mean."""
    for name in sorted(hostvars):
        if not isinstance(name, str) or not name.startswith("gpuprov_") or name in known_vars.KNOWN_VARS:
            continue
        close = difflib.get_close_matches(name[:MAX_NAME_LENGTH], sorted(known_vars.KNOWN_VARS), n=1, cutoff=0.6)
        out.add(name[:MAX_NAME_LENGTH], "unknown gpuprov variable%s; a node's variables are %s"
                % (" (did you mean %s?)" % close[0] if close else "", ", ".join(known_vars.INTENT_VARS)))


def parse_node_name(host, hostvars, out):
    """The Kubernetes node name: gpuprov_node_name, else the inventory host name."""
    name = hostvars.get("gpuprov_node_name")
    field = "gpuprov_node_name"
    if name is None:
        name, field = host, "host name"
    if not isinstance(name, str) or len(name) > kubernetes_names.NODE_NAME_MAX or not kubernetes_names.NODE_NAME_RE.match(name):
        out.add("gpuprov_node_name", "%s %s is not a valid Kubernetes node name (lower-case letters, digits, "
                "'-' and '.', at most %d characters, RFC 1123)%s"
                % (field, short(name), kubernetes_names.NODE_NAME_MAX, "; set gpuprov_node_name" if field == "host name" else ""))
        return None
    return name


class IntentCache:
    """parse_intent for many hosts: hosts whose variables are the same objects (the hosts of a
    group, as Ansible hands them over) are parsed once; each still gets its own host name,
    node name and node-name check. Variables must not change while the cache is used."""

    def __init__(self):
        self._intents = {}

    def parse(self, host, hostvars, base_dir=None, file_cache=None, user_models=None, roots=None):
        """The same answer as parse_intent(...)."""
        values = tuple(sorted((name, id(value)) for name, value in hostvars.items() if name != "gpuprov_node_name"))
        key = (values, base_dir, roots, id(user_models))
        known = self._intents.get(key)
        if known is not None and all(hostvars.get(name) is value for name, value in known[0].items()):
            out = _Collector(host)
            node_name = parse_node_name(host, hostvars, out)
            if out.problems:
                return None, out.problems
            node_intent = copy.copy(known[1])
            node_intent.host, node_intent.node_name = host, node_name
            return node_intent, []
        node_intent, problems = parse_intent(host, hostvars, base_dir, file_cache, user_models, roots)
        if node_intent is not None and not problems:
            self._intents[key] = (dict((name, hostvars[name]) for name, number in values), node_intent)
        return node_intent, problems


def parse_intent(host, hostvars, base_dir=None, file_cache=None, user_models=None, roots=None):
    """Build a NodeIntent from a host's variables. Returns (intent or None, [Problem]).

    ``user_models``: a user_catalog.UserCatalog from ``--catalog`` (the host's own
    ``gpuprov_catalog_file`` adds to it). ``roots``: the folders the files a host names must
    lie in, for an inventory that may not be trusted (None: any file).
    """
    out = _Collector(host)
    check_variables(hostvars, out)
    node_name = parse_node_name(host, hostvars, out)
    models_catalog, catalog_problems = user_catalog.for_host(hostvars, base_dir, file_cache, user_models, roots)
    for reason in catalog_problems:
        out.add(user_catalog.CATALOG_FILE_VAR, reason)
    models = parse_models(host, hostvars, out, models_catalog)

    sharing = hostvars.get("gpuprov_sharing", {"strategy": "exclusive"})
    if sharing is None:
        sharing = {"strategy": "exclusive"}
    if not isinstance(sharing, dict):
        out.add("gpuprov_sharing", "must be a mapping with at least `strategy`")
        return None, out.problems
    unknown = _unknown_keys(sharing, SHARING_KEYS)
    if unknown:
        out.add("gpuprov_sharing", "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(sorted(SHARING_KEYS))))
    strategy = sharing.get("strategy", "exclusive")
    if strategy not in STRATEGIES:
        out.add("gpuprov_sharing.strategy", "unknown strategy %s; choose one of %s" % (short(strategy), ", ".join(STRATEGIES)))
        strategy = None

    replicas = sharing.get("replicas")
    ts_replicas = sharing.get("time_slicing_replicas")
    mps = None
    mig_requests = mig_strategy = mig_source = None

    if strategy in ("time-slicing", "mps"):
        if replicas is None:
            out.add("gpuprov_sharing.replicas", "required for strategy %s" % strategy)
        elif not _is_int(replicas) or replicas < 2:
            out.add("gpuprov_sharing.replicas", "must be an integer >= 2 (the device plugin rejects fewer), got %s"
                    % short(replicas))
            replicas = None
        else:
            replicas = _check_replicas("gpuprov_sharing.replicas", replicas, models, out)
    elif replicas is not None and strategy != "hami":  # hami: its provider says why
        out.add("gpuprov_sharing.replicas", "only used by time-slicing and mps; with mig use time_slicing_replicas")

    if "mig" in sharing and strategy not in ("mig", "hami"):  # hami: its provider says why
        out.add("gpuprov_sharing.mig", "only used with strategy mig")
    options = {}
    if strategy is not None:
        provider = sharing_mod.provider_for(strategy)
        for key, owner in sorted(sharing_mod.owned_keys().items()):
            if key in sharing and owner is not provider:
                out.add("gpuprov_sharing.%s" % key, "not used with strategy %s; it configures the %s provider "
                        "(strategy %s)" % (strategy, owner.name, ", ".join(owner.strategies)))
        options = provider.parse(sharing, strategy, models, out)
        ts_replicas = options.get("time_slicing_replicas")

    if "mps" in sharing and strategy != "hami":  # hami: its provider says why
        if strategy == "mig":
            out.add("gpuprov_sharing.mps", "MPS together with MIG is not supported by the device plugin "
                                           "(\"sharing using MPS is not supported for MIG devices\")")
        elif strategy == "time-slicing":
            out.add("gpuprov_sharing.mps", "MPS and time-slicing are mutually exclusive; choose one strategy")
        elif strategy != "mps":
            out.add("gpuprov_sharing.mps", "only used with strategy mps")
    if strategy == "mps":
        mps = _parse_mps(sharing.get("mps") or {}, out, models)
        if models and replicas:
            for model in sorted(set(models), key=lambda m: m.key):
                if replicas > model.mps_max_clients:
                    out.add("gpuprov_sharing.replicas",
                            "%d MPS replicas exceed the limit of %d for %s (compute capability %s)"
                            % (replicas, model.mps_max_clients, model.key, model.compute_capability))

    if strategy == "mig":
        mig = sharing.get("mig")
        if not isinstance(mig, dict):
            out.add("gpuprov_sharing.mig", "required for strategy mig: {config: NAME} or {devices: [...]}")
        else:
            mig_requests, mig_strategy, mig_source = _parse_mig(mig, hostvars, models, base_dir, file_cache, out, roots)
    elif "gpuprov_mig_config_file" in hostvars and strategy is not None:
        pass  # a group-wide file is fine on hosts that do not use MIG

    kubelet = _parse_kubelet(hostvars.get("gpuprov_kubelet"), out)

    if out.problems or models is None or strategy is None:
        return None, out.problems
    return NodeIntent(host, models, strategy, replicas, mig_requests, mig_strategy, mig_source,
                      ts_replicas, mps, kubelet, options, node_name, models_catalog), out.problems


def _check_replicas(field, replicas, models, out):
    """Replicas within MAX_REPLICAS and at least MIN_REPLICA_MIB of memory each."""
    limit = MAX_REPLICAS
    for model in models or ():
        limit = min(limit, model.memory_mib // MIN_REPLICA_MIB)
    if replicas > limit:
        out.add(field, "%d replicas; the limit is %d on this node (at most %d per GPU, and each replica needs "
                "at least %d MiB of the GPU's memory)" % (replicas, limit, MAX_REPLICAS, MIN_REPLICA_MIB))
        return None
    return replicas


def _parse_mps(mps, out, models=None):
    if not isinstance(mps, dict):
        out.add("gpuprov_sharing.mps", "must be a mapping: {provider, active_thread_percentage, pinned_memory_limit}")
        return None
    unknown = _unknown_keys(mps, MPS_KEYS)
    if unknown:
        out.add("gpuprov_sharing.mps", "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(sorted(MPS_KEYS))))
    provider = mps.get("provider", "device-plugin")
    if provider not in MPS_PROVIDERS:
        out.add("gpuprov_sharing.mps.provider", "must be one of %s, got %s" % (", ".join(MPS_PROVIDERS), short(provider)))
    result = {"provider": provider}
    pct = mps.get("active_thread_percentage")
    if pct is not None:
        if not _is_int(pct) or not 1 <= pct <= 100:
            out.add("gpuprov_sharing.mps.active_thread_percentage", "must be an integer from 1 to 100, got %s"
                    % short(pct))
        result["active_thread_percentage"] = pct
    limit = mps.get("pinned_memory_limit")
    if limit is not None:
        mib = _pinned_memory_mib(limit)
        if mib is None:
            out.add("gpuprov_sharing.mps.pinned_memory_limit", "must be a size such as 10G or 10240M, got %s"
                    % short(limit))
        elif models and mib > min(m.memory_mib for m in models):
            smallest = min(models, key=lambda m: m.memory_mib)
            out.add("gpuprov_sharing.mps.pinned_memory_limit", "%d MiB is more than the %d MiB of the node's %s"
                    % (mib, smallest.memory_mib, smallest.key))
        result["pinned_memory_limit_mib"] = mib
    if provider == "device-plugin" and (pct is not None or limit is not None):
        out.add("gpuprov_sharing.mps", "the device plugin sets MPS limits itself from replicas; "
                                       "active_thread_percentage and pinned_memory_limit need provider: host")
    return result


def _parse_mig(mig, hostvars, models, base_dir, file_cache, out, roots=None):
    unknown = _unknown_keys(mig, MIG_KEYS)
    if unknown:
        out.add("gpuprov_sharing.mig", "unknown key(s) %s; allowed: %s" % (", ".join(unknown), ", ".join(sorted(MIG_KEYS))))
    mig_strategy = mig.get("strategy", "mixed")
    if mig_strategy not in ("single", "mixed"):
        out.add("gpuprov_sharing.mig.strategy", "must be single or mixed, got %s" % short(mig_strategy))
    has_config, has_devices = "config" in mig, "devices" in mig
    if has_config == has_devices:
        out.add("gpuprov_sharing.mig", "set exactly one of config (a named config) or devices (mig-parted entries)")
        return None, mig_strategy, None
    if models is None:
        return None, mig_strategy, None
    if not any(m.mig_capable for m in models):
        out.add("gpuprov_sharing.strategy", "MIG asked on a node whose GPUs have no MIG (%s)"
                % ", ".join(sorted(set(m.key for m in models))))
        return None, mig_strategy, None

    if has_devices:
        field = "gpuprov_sharing.mig.devices"
        try:
            entries = migparted.parse_entries(mig["devices"], field)
        except migparted.MigPartedError as exc:
            out.add(exc.field, exc.reason)
            return None, mig_strategy, None
        source = "inline"
    else:
        name = mig["config"]
        if not isinstance(name, str) or not name or len(name) > MAX_NAME_LENGTH:
            out.add("gpuprov_sharing.mig.config", "must be a config name (a string of at most %d characters), got %s"
                    % (MAX_NAME_LENGTH, short(name)))
            return None, mig_strategy, None
        path = hostvars.get("gpuprov_mig_config_file")
        if path is not None and (not isinstance(path, str) or not path or len(path) > 4096 or "\x00" in path):
            out.add("gpuprov_mig_config_file", "must be a path to a mig-parted file, got %s" % short(path))
            return None, mig_strategy, None
        if path is not None:
            if base_dir and not os.path.isabs(str(path)):
                path = os.path.join(base_dir, str(path))
            problem = None if roots is None else safe_files.confined_problem(path, roots, must_exist=False)
            if problem is not None:
                out.add("gpuprov_mig_config_file", "%s: %s" % (path, problem))
                return None, mig_strategy, None
            try:
                configs = _load_cached(path, file_cache)
            except migparted.MigPartedError as exc:
                out.add("gpuprov_mig_config_file", str(exc))
                return None, mig_strategy, None
            if name not in configs:
                out.add("gpuprov_sharing.mig.config", "no config named %s in %s (it has: %s)"
                        % (short(name), path, ", ".join(sorted(configs)[:20])))
                return None, mig_strategy, None
            entries = configs[name]
            field = "%s: mig-configs.%s" % (path, name)
            source = "%s#%s" % (path, name)
        else:
            entries = migparted.builtin_entries(str(name), models)
            if entries is None:
                out.add("gpuprov_sharing.mig.config", "no built-in config named %s; built-ins for this node: %s "
                        "(or name a mig-parted file with gpuprov_mig_config_file)"
                        % (short(name), ", ".join(migparted.builtin_names(models))))
                return None, mig_strategy, None
            field = "gpuprov_sharing.mig.config(%s)" % name
            source = "builtin#%s" % name
    requests, problems = migparted.resolve(entries, models, field)
    for pfield, reason in problems:
        out.add(pfield, reason)
    return requests, mig_strategy, source


def _load_cached(path, cache):
    if cache is None:
        return migparted.load_file(path)
    key = os.path.abspath(path)
    if key not in cache:
        try:
            cache[key] = migparted.load_file(path)
        except migparted.MigPartedError as exc:
            cache[key] = exc
    if isinstance(cache[key], Exception):
        raise cache[key]
    return cache[key]


def _parse_kubelet(kubelet, out):
    # The kubelet's own rules for each setting live with the collection's kubelet model.
    if kubelet is None:
        return {}
    for field, reason in kubelet_settings.settings_problems(kubelet):
        out.add("gpuprov_kubelet" + ("." + field if field else ""), reason)
    return dict(kubelet) if isinstance(kubelet, dict) else {}


def _unknown_keys(mapping, allowed):
    return sorted(escape(short(k, 40) if not isinstance(k, str) else k[:MAX_NAME_LENGTH])
                  for k in mapping if k not in allowed)


def _pinned_memory_mib(value):
    """An MPS pinned memory limit -> MiB, or None when malformed or below 1 MiB."""
    try:
        mib = mps_pinned_memory_mib(value)
    except ValueError:
        return None
    return mib if mib >= 1 else None
