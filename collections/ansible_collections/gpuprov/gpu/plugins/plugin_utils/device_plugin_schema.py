# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Schema of the NVIDIA device-plugin config file (``version: v1``, k8s-device-plugin v0.20.0).

Written from the plugin's api/config/v1 types (config.go, flags.go, sharing.go, replicas.go,
imex.go in NVIDIA/k8s-device-plugin v0.20.0). ``SCHEMA`` is a standard JSON Schema
(draft 2020-12) and the unit tests check it with the ``jsonschema`` package; ``validate()``
here is a small validator for exactly the keywords SCHEMA uses, so that the collection and
the CLI check every rendered config without a runtime dependency on jsonschema (it is only
in the dev extra).

The plugin itself is more lenient in one way and stricter in others:

- it decodes with Go's encoding/json, which ignores unknown keys. The schema rejects them,
  because an unknown key (``replica``, ``timeslicing``) is a typo the plugin would silently
  drop, leaving GPUs unshared.
- it rejects things a schema cannot say well (MPS with MIG); ``semantic_problems()`` checks
  those, with the plugin's own error text where it has one.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import kubernetes_names

_BOOL = {"type": "boolean"}
_STR = {"type": "string"}
# GFD's sleepInterval: a Go duration such as 60s, 1m30s, 500ms, or "infinite" (api/config/v1
# duration.go: label once, then sleep for good).
_DURATION = {"type": "string", "pattern": r"^(infinite|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$"}
# An extended resource name as the plugin's NewResourceName checks it: nvidia.com/ and a
# lowercase RFC 1123 subdomain (k8s.io/apimachinery NameIsDNSSubdomain), 63 characters in all.
_DNS_SUBDOMAIN = kubernetes_names.DNS_SUBDOMAIN
_RESOURCE_NAME = {"type": "string", "maxLength": 63, "pattern": r"^nvidia\.com/%s$" % _DNS_SUBDOMAIN}
# NewResourceName also takes a short name and puts nvidia.com/ before it (the custom
# `resources` section; gpuprov's own sharing entries always carry the full name).
_SHORT_RESOURCE_NAME = {"type": "string", "maxLength": 63 - len("nvidia.com/"), "pattern": r"^%s$" % _DNS_SUBDOMAIN}
_DEVICE_LIST_STRATEGIES = ["envvar", "volume-mounts", "cdi-annotations", "cdi-cri"]
# One entry of a sharing `devices` list: a GPU index, a MIG index "g:m", or a GPU/MIG UUID.
_DEVICE_REF = {
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {"type": "string", "pattern": r"^([0-9]+|[0-9]+:[0-9]+)$"},
        {"type": "string", "pattern": r"^(MIG-)?GPU-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}(/[0-9]+/[0-9]+)?$"},
        {"type": "string", "pattern": r"^MIG-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$"},
    ]
}

_REPLICATED_RESOURCES = {
    "type": "object",
    "additionalProperties": False,
    "required": ["resources"],
    "properties": {
        "renameByDefault": _BOOL,
        "failRequestsGreaterThanOne": _BOOL,
        "resources": {
            "type": "array",
            "minItems": 1,  # "no resources specified"
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "replicas"],
                "properties": {
                    "name": _RESOURCE_NAME,
                    # The plugin strips rename and devices at load time ("not yet supported in
                    # the config"); they are valid syntax, so the schema accepts them.
                    "rename": _RESOURCE_NAME,
                    "devices": {
                        "anyOf": [
                            {"const": "all"},
                            {"type": "integer", "minimum": 1},
                            {"type": "array", "minItems": 1, "items": _DEVICE_REF},
                        ]
                    },
                    "replicas": {"type": "integer", "minimum": 2},  # "number of replicas must be >= 2"
                },
            },
        },
    },
}

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "NVIDIA k8s-device-plugin config v1",
    "type": "object",
    "additionalProperties": False,
    "required": ["version"],
    "properties": {
        # The plugin also reads an empty version as v1; gpuprov always writes it.
        "version": {"const": "v1"},
        "flags": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "migStrategy": {"enum": ["none", "single", "mixed"]},
                "failOnInitError": _BOOL,
                "mpsRoot": _STR,
                "nvidiaDriverRoot": _STR,
                "nvidiaDevRoot": _STR,
                "gdrcopyEnabled": _BOOL,
                "gdsEnabled": _BOOL,
                "mofedEnabled": _BOOL,
                "useNodeFeatureAPI": _BOOL,
                "deviceDiscoveryStrategy": {"enum": ["auto", "nvml", "tegra"]},
                "plugin": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "passDeviceSpecs": _BOOL,
                        "deviceListStrategy": {
                            "anyOf": [
                                {"enum": _DEVICE_LIST_STRATEGIES},
                                {"type": "array", "minItems": 1, "uniqueItems": True,
                                 "items": {"enum": _DEVICE_LIST_STRATEGIES}},
                            ]
                        },
                        "deviceIDStrategy": {"enum": ["uuid", "index"]},
                        "cdiAnnotationPrefix": _STR,
                        "nvidiaCTKPath": _STR,
                        "containerDriverRoot": _STR,
                        "sharedDevicesAllocationPolicy": {"enum": ["distributed", "packed"]},  # new in v0.20.0
                    },
                },
                "gfd": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "oneshot": _BOOL,
                        "noTimestamp": _BOOL,
                        "sleepInterval": _DURATION,
                        "outputFile": _STR,
                        "machineTypeFile": _STR,
                    },
                },
            },
        },
        # Custom resource names per device pattern; the plugin ignores this section with a
        # warning ("not yet supported in the config").
        "resources": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "gpus": {"type": "array", "items": {"$ref": "#/$defs/resource"}},
                "mig": {"type": "array", "items": {"$ref": "#/$defs/resource"}},
            },
        },
        "sharing": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "timeSlicing": _REPLICATED_RESOURCES,
                "mps": _REPLICATED_RESOURCES,
            },
        },
        "imex": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                # The plugin accepts [] or [0] ("channelIDs must be [] or [0]").
                "channelIDs": {"type": "array", "maxItems": 1, "items": {"const": 0}},
                "required": _BOOL,
            },
        },
    },
    "$defs": {
        "resource": {
            "type": "object",
            "additionalProperties": False,
            "required": ["pattern", "name"],
            "properties": {"pattern": _STR, "name": {"anyOf": [_RESOURCE_NAME, _SHORT_RESOURCE_NAME]}},
        },
    },
}

# MPS serves only full GPUs under nvidia.com/gpu (reference section 1, "Limits").
MPS_RESOURCE = "nvidia.com/gpu"


class DevicePluginConfigError(ValueError):
    """A config the device plugin would refuse; ``problems`` holds one line each."""

    def __init__(self, name, problems):
        self.name = name
        self.problems = list(problems)
        super(DevicePluginConfigError, self).__init__(
            "device-plugin config %s is not valid: %s" % (name, "; ".join(self.problems)))


_JSON_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
}


def _path(parts):
    text = ""
    for part in parts:
        text += "[%d]" % part if isinstance(part, int) else ("." if text else "") + part
    return text or "(top level)"


def _same(a, b):
    # JSON equality: true is not 1 (isinstance, not type(): Ansible hands over str subclasses).
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def _errors(value, schema, path, root):
    """Yield "path: reason" for every way ``value`` breaks ``schema``."""
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            raise ValueError("unsupported $ref %s" % ref)
        schema = root["$defs"][ref[len("#/$defs/"):]]
    where = _path(path)
    if "anyOf" in schema:
        if not any(not list(_errors(value, option, path, root)) for option in schema["anyOf"]):
            yield "%s: %r matches none of the allowed forms (%s)" % (where, value, _describe_any(schema["anyOf"]))
        return
    if "const" in schema and not _same(value, schema["const"]):
        yield "%s: must be %r, got %r" % (where, schema["const"], value)
        return
    if "enum" in schema and not any(_same(value, option) for option in schema["enum"]):
        yield "%s: must be one of %s, got %r" % (where, ", ".join(schema["enum"]), value)
        return
    kind = schema.get("type")
    if kind is not None and not _JSON_TYPES[kind](value):
        yield "%s: must be %s %s, got %s %r" % (where, "an" if kind[0] in "aeiou" else "a", kind,
                                                type(value).__name__, value)
        return
    if kind == "object":
        properties = schema.get("properties", {})
        for key in schema.get("required", ()):
            if key not in value:
                yield "%s: missing required key %s" % (where, key)
        for key in value:
            if key in properties:
                yield from _errors(value[key], properties[key], path + [key], root)
            elif schema.get("additionalProperties", True) is False:
                yield "%s: unknown key %r; allowed: %s" % (where, key, ", ".join(sorted(properties)))
    elif kind == "array":
        if len(value) < schema.get("minItems", 0):
            yield "%s: must list at least %d item(s)" % (where, schema["minItems"])
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            yield "%s: must list at most %d item(s)" % (where, schema["maxItems"])
        if schema.get("uniqueItems") and len(set(map(repr, value))) != len(value):
            yield "%s: items must be unique" % where
        if "items" in schema:
            for index, item in enumerate(value):
                yield from _errors(item, schema["items"], path + [index], root)
    elif kind == "integer":
        if "minimum" in schema and value < schema["minimum"]:
            yield "%s: must be >= %d, got %d" % (where, schema["minimum"], value)
    elif kind == "string":
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            yield "%s: must be at most %d characters, got %d" % (where, schema["maxLength"], len(value))
        if "pattern" in schema and not re.search(schema["pattern"], value):
            yield "%s: %r does not match %s" % (where, value, schema["pattern"])


def _describe_any(options):
    parts = []
    for option in options:
        if "const" in option:
            parts.append(repr(option["const"]))
        elif "enum" in option:
            parts.append("one of " + ", ".join(option["enum"]))
        elif "pattern" in option:
            parts.append("a string matching %s" % option["pattern"])
        else:
            parts.append(option.get("type", "value"))
    return " | ".join(parts)


def validate(config):
    """Schema problems of one config, as "path: reason" lines ([] when valid)."""
    return list(_errors(config, SCHEMA, [], SCHEMA))


def semantic_problems(config):
    """What the plugin rejects (or silently overrides) beyond the schema."""
    problems = []
    flags = config.get("flags") or {}
    sharing = config.get("sharing") or {}
    mig_strategy = flags.get("migStrategy", "none")
    if "mps" in sharing:
        if mig_strategy == "mixed":
            problems.append("sharing.mps: using --mig-strategy=mixed is not supported with MPS")
        elif mig_strategy == "single":
            problems.append("sharing.mps: sharing using MPS is not supported for MIG devices "
                            "(migStrategy single advertises MIG devices)")
        if "timeSlicing" in sharing:
            # The plugin would let MPS win silently; two methods in one config is a mistake.
            problems.append("sharing: timeSlicing and mps are mutually exclusive; set one")
    for method in ("timeSlicing", "mps"):
        resources = (sharing.get(method) or {}).get("resources") or []
        names = [r.get("name") for r in resources if isinstance(r, dict)]
        for name in sorted(set(n for n in names if names.count(n) > 1)):
            problems.append("sharing.%s.resources: %s is listed more than once" % (method, name))
        if method == "mps":
            for name in names:
                if name != MPS_RESOURCE:
                    problems.append("sharing.mps.resources: MPS shares only %s, not %s" % (MPS_RESOURCE, name))
        if mig_strategy == "single" or mig_strategy == "none":
            for name in names:
                if isinstance(name, str) and name.startswith("nvidia.com/mig-"):
                    problems.append("sharing.%s.resources: %s exists only with migStrategy mixed, not %s"
                                    % (method, name, mig_strategy))
    return problems


def problems(config):
    """Every problem with ``config``: schema first, then what the plugin would reject."""
    found = validate(config)
    if found:
        return found  # semantic checks assume the structure is right
    return semantic_problems(config)


def check(name, config):
    """Raise DevicePluginConfigError when ``config`` (named ``name``) is not valid."""
    found = problems(config)
    if found:
        raise DevicePluginConfigError(name, found)
