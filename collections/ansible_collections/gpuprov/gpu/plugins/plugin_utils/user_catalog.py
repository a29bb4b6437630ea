# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""GPU models a user adds to the built-in catalog, from a YAML file.

The file (inventory variable ``gpuprov_catalog_file``, or ``--catalog FILE`` on the commands
that plan)::

    models:
      - name: RTX-5880-Ada                 # catalog key: letters, digits, '-', '.', '_'
        memory: 48Gi                       # a Kubernetes quantity, or memory_mib: 49140
        compute_capability: "8.9"
        nvidia_smi_names: ["NVIDIA RTX 5880 Ada Generation"]   # optional; default "NVIDIA <name>"
        aliases: [RTX5880]                 # optional
        pci_device_id: "0x26BA"            # or pci_device_ids: [...]
        architecture: ada                  # optional, for display

User models have no MIG (a MIG geometry needs placement tables gpuprov cannot check); they
share with time-slicing, MPS or HAMi. Every entry is checked like the built-in models: no
name, alias, nvidia-smi name or PCI id may name two models, and every problem names the file
and the field.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import k8s_quantity
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog, safe_files

ENTRY_KEYS = {"name", "description", "memory", "memory_mib", "compute_capability", "architecture",
              "nvidia_smi_names", "aliases", "pci_device_id", "pci_device_ids"}
ARCHITECTURES = ("kepler", "maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell", "other")
_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}\Z")
_CC_RE = re.compile(r"^([1-9][0-9]?)\.([0-9])\Z")
_PCI_RE = re.compile(r"^(?:0x)?([0-9a-f]{4})\Z", re.IGNORECASE)
CATALOG_FILE_VAR = "gpuprov_catalog_file"
# The extra variable `gpuprov apply --catalog FILE` hands the node_plan action (not an inventory variable).
CLI_CATALOG_VAR = "gpuprov_cli_catalog_file"
# A GPU with more memory than this is a typo (the largest in the catalog has 180 GB).
MAX_MEMORY_MIB = 1024 * 1024
# More models than any fleet has kinds of GPU (the built-in catalog has a few dozen).
MAX_MODELS = 256


class CatalogFileError(ValueError):
    """A user catalog file that cannot be used; ``problems`` holds `FILE: FIELD: reason` lines."""

    def __init__(self, problems):
        self.problems = list(problems)
        super(CatalogFileError, self).__init__("; ".join(self.problems))


def _memory_mib(value):
    """A Kubernetes memory quantity (48Gi, 49140Mi) -> whole MiB, or None."""
    try:
        return int(k8s_quantity(value) / (1024 * 1024))
    except ValueError:
        return None


def _strings(value):
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
        return value
    return None


def _short(value, limit=60):
    """repr() of a value for an error message, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "...(%d characters)" % len(text)


def parse_models(document, source):
    """GpuModels from a parsed catalog document. Raises CatalogFileError with every problem."""
    problems = []

    def bad(field, reason):
        problems.append("%s: %s: %s" % (source, field, reason))

    if not isinstance(document, dict) or set(document) != {"models"} or not isinstance(document["models"], list):
        raise CatalogFileError(["%s: (top level): must be a mapping with one key, models: a list of GPU models"
                                % source])
    if len(document["models"]) > MAX_MODELS:
        raise CatalogFileError(["%s: models: %d entries; the limit is %d"
                                % (source, len(document["models"]), MAX_MODELS)])
    models = []
    for index, entry in enumerate(document["models"]):
        field = "models[%d]" % index
        if not isinstance(entry, dict):
            bad(field, "must be a mapping with name, memory, compute_capability and pci_device_id")
            continue
        name = entry.get("name")
        if not isinstance(name, str) or not _KEY_RE.match(name):
            bad(field + ".name", "required: 1-63 letters, digits, '.', '_' or '-', got %s" % (_short(name),))
            name = None
        elif name:
            field = "models[%d](%s)" % (index, name)
        unknown = sorted(set(entry) - ENTRY_KEYS)
        if unknown:
            bad(field, "unknown key(s) %s; allowed: %s" % (", ".join(map(str, unknown)), ", ".join(sorted(ENTRY_KEYS))))
        if ("memory" in entry) == ("memory_mib" in entry):
            bad(field + ".memory", "set exactly one of memory (a quantity such as 48Gi or 24564Mi) or memory_mib")
            memory = None
        else:
            raw = entry.get("memory", entry.get("memory_mib"))
            memory = _memory_mib(raw) if "memory" in entry else (raw if isinstance(raw, int) and not isinstance(raw, bool) else None)
            if memory is None or not 1024 <= memory <= MAX_MEMORY_MIB:
                bad(field + (".memory" if "memory" in entry else ".memory_mib"),
                    "must be a size from 1Gi to 1024Gi (e.g. 48Gi or 49140Mi), got %s" % (_short(raw),))
                memory = None
        cc = entry.get("compute_capability")
        if not isinstance(cc, str) or not _CC_RE.match(cc):
            bad(field + ".compute_capability", "required: major.minor as a string, e.g. \"8.9\", got %s" % (_short(cc),))
            cc = None
        arch = entry.get("architecture", "other")
        if arch not in ARCHITECTURES:
            bad(field + ".architecture", "must be one of %s, got %s" % (", ".join(ARCHITECTURES), _short(arch)))
        if ("pci_device_id" in entry) == ("pci_device_ids" in entry):
            bad(field + ".pci_device_id", "set exactly one of pci_device_id or pci_device_ids "
                                          "(the 4 hex digits lspci -nn shows after 10de:)")
            pci = None
        else:
            raw = entry.get("pci_device_id", entry.get("pci_device_ids"))
            raw_list = raw if isinstance(raw, list) else [raw]
            pci = []
            for item in raw_list:
                match = _PCI_RE.match(str(item)) if isinstance(item, (str, int)) and not isinstance(item, bool) else None
                if isinstance(item, int) and not isinstance(item, bool):
                    # YAML reads 0x26BA as the integer 9914.
                    match = _PCI_RE.match("%04x" % item) if 0 <= item <= 0xFFFF else None
                if not match:
                    bad(field + ".pci_device_id", "%s is not a PCI device id such as \"0x26BA\"" % (_short(item),))
                    pci = None
                    break
                pci.append(int(match.group(1), 16))
            if pci is not None and not pci:
                bad(field + ".pci_device_id", "must name at least one PCI device id")
                pci = None
        smi_names = _strings(entry.get("nvidia_smi_names", ["NVIDIA %s" % name if name else "NVIDIA"]))
        if smi_names is None:
            bad(field + ".nvidia_smi_names", "must be a non-empty list of names as nvidia-smi prints them")
        aliases = _strings(entry.get("aliases", [])) if entry.get("aliases", []) != [] else []
        if aliases is None:
            bad(field + ".aliases", "must be a list of names")
        description = entry.get("description", "%s (user catalog %s)" % (name, source))
        if not isinstance(description, str):
            bad(field + ".description", "must be a string")
        if name and memory and cc and pci and smi_names is not None and aliases is not None:
            models.append((field, catalog.GpuModel(name, description, memory, cc, arch, smi_names, pci, aliases)))
    problems.extend(_clashes(models, source))
    if problems:
        raise CatalogFileError(problems)
    return [model for _field, model in models]


def _clashes(models, source):
    """Names and PCI ids that would name two models (with the built-ins or each other)."""
    problems = []
    names, pci = {}, {}
    for field, model in models:
        for text in [model.key, model.gfd_product] + model.smi_names + model.aliases:
            owner = _builtin_owner(text)
            if owner is not None:
                problems.append("%s: %s: %r already names the built-in model %s; pick another name or remove the entry"
                                % (source, field, text, owner))
                continue
            norm = catalog.normalized_name(text)
            other = names.setdefault(norm, (field, model.key))
            if other[1] != model.key:
                problems.append("%s: %s: %r also names %s" % (source, field, text, other[0]))
        for dev in model.pci_device_ids:
            try:
                builtin = catalog.lookup(dev)
            except catalog.UnknownModelError:
                builtin = None
            if builtin is not None:
                problems.append("%s: %s.pci_device_id: 0x%04X is the built-in model %s" % (source, field, dev, builtin.key))
            other = pci.setdefault(dev, (field, model.key))
            if other[1] != model.key:
                problems.append("%s: %s.pci_device_id: 0x%04X is also %s" % (source, field, dev, other[0]))
    return problems


def _builtin_owner(text):
    try:
        return catalog.lookup(text).key
    except catalog.UnknownModelError:
        return None


def load_file(path):
    """Models of one catalog file. Raises CatalogFileError (unreadable, not YAML, bad entries).

    Read with the bounds of every input file (size, nesting, alias expansion, UTF-8): a
    hostile catalog is refused naming the file, never a MemoryError or a hang.
    """
    try:
        document = safe_files.load(path, kind="yaml")
    except safe_files.FileInputError as exc:
        raise CatalogFileError([str(exc)])
    return parse_models(document, path)


class UserCatalog:
    """The built-in catalog plus user models; ``lookup`` resolves names like catalog.lookup."""

    def __init__(self, models=()):
        self.models = list(models)
        self._index, self._pci = {}, {}
        for model in self.models:
            for text in [model.key, model.gfd_product] + model.smi_names + model.aliases:
                self._index[catalog.normalized_name(text)] = model
            for dev in model.pci_device_ids:
                self._pci[dev] = model

    def merged(self, other):
        """This catalog plus ``other``'s models; raises CatalogFileError where they clash."""
        mine = dict((m.key, m) for m in self.models)
        problems, added = [], []
        for model in other.models:
            if model.key in mine:
                if mine[model.key].as_dict() != model.as_dict():
                    problems.append("user catalog model %s is defined twice, differently (--catalog and "
                                    "gpuprov_catalog_file)" % model.key)
                continue
            added.append(model)
        if problems:
            raise CatalogFileError(problems)
        return UserCatalog(self.models + added)

    def all_models(self):
        return catalog.all_models() + list(self.models)

    def get(self, key):
        for model in self.models:
            if model.key == key:
                return model
        return catalog.get(key)

    def lookup(self, name):
        if isinstance(name, int) and not isinstance(name, bool) and name in self._pci:
            return self._pci[name]
        text = str(name).strip()
        match = _PCI_RE.match(text) or re.match(r"^(?:0x)?([0-9a-f]{4})10de\Z|^10de:([0-9a-f]{4})\Z", text, re.IGNORECASE)
        if match:
            dev = int(next(g for g in match.groups() if g), 16)
            if dev in self._pci:
                return self._pci[dev]
        norm = catalog.normalized_name(text)
        model = self._index.get(norm) or self._index.get(catalog.strip_vendor(norm))
        if model is not None:
            return model
        try:
            return catalog.lookup(name)
        except catalog.UnknownModelError as exc:
            raise catalog.UnknownModelError(exc.name, exc.suggestions or self._suggest(text))

    def _suggest(self, text):
        import difflib
        return difflib.get_close_matches(text, [m.key for m in self.models], n=3, cutoff=0.5)


def for_host(hostvars, base_dir=None, file_cache=None, extra=None, roots=None):
    """(UserCatalog or None, [problem]) for a host: ``extra`` (from --catalog) plus the models of
    the host's ``gpuprov_catalog_file`` (relative to the inventory's folder).

    ``roots``: the folders the file must lie in (safe_files.confined_problem), when the
    inventory may not be trusted; None where it is (the node_plan action in a playbook run).
    """
    path = hostvars.get(CATALOG_FILE_VAR)
    if path is None:
        return extra, []
    if not isinstance(path, str) or not path.strip() or "\x00" in path or len(path) > 4096:
        return extra, ["must be the path of a YAML file with `models:`"]
    if base_dir and not os.path.isabs(path):
        path = os.path.join(base_dir, path)
    if roots is not None:
        problem = safe_files.confined_problem(path, roots, must_exist=False)
        if problem is not None:
            return extra, ["%s: %s" % (path, problem)]
    key = os.path.abspath(path)
    cache = file_cache if file_cache is not None else {}
    if ("user-catalog", key) not in cache:
        try:
            cache[("user-catalog", key)] = UserCatalog(load_file(path))
        except CatalogFileError as exc:
            cache[("user-catalog", key)] = exc
    found = cache[("user-catalog", key)]
    if isinstance(found, CatalogFileError):
        return extra, found.problems
    if extra is None:
        return found, []
    try:
        return extra.merged(found), []
    except CatalogFileError as exc:
        return extra, exc.problems
