# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The kubelet's KubeletConfiguration file, held as a YAML node graph.

The file is read into PyYAML's node graph (``yaml.compose``), only the managed keys are
replaced, and the graph is written back with ``yaml.serialize``. Working on nodes rather than
on Python dicts keeps, for every key this code does not manage, the key order, the scalar
quoting style (``containerRuntimeEndpoint: ""``, ``infoBufferSize: "0"``) and flow style
(``memorySwap: {}``). A file in the layout kubeadm writes (sorted keys, two-space indent,
sequences not indented under their key) therefore comes back byte for byte apart from the
managed keys. Other layouts are normalised to that one. PyYAML drops comments: the file is only
rewritten when a managed value changes, and a backup of the previous file is kept.

New keys go where kubeadm would put them (sorted position) when the existing keys are sorted,
otherwise at the end; new maps are written with sorted keys, as the kubelet's own marshalling
does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import bisect
import re
import traceback

try:
    import yaml
    HAS_YAML = True
    YAML_IMPORT_ERROR = None
except ImportError:  # pragma: no cover - PyYAML ships with ansible-core
    yaml = None
    HAS_YAML = False
    YAML_IMPORT_ERROR = traceback.format_exc()

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.errors import KubeletConfigError


STR_TAG = "tag:yaml.org,2002:str"
INT_TAG = "tag:yaml.org,2002:int"
BOOL_TAG = "tag:yaml.org,2002:bool"
MAP_TAG = "tag:yaml.org,2002:map"
SEQ_TAG = "tag:yaml.org,2002:seq"


# The kubelet reads YAML with sigs.k8s.io/yaml (go-yaml v2), which takes "1e3" for a float
# where PyYAML (YAML 1.1: a float needs a dot) takes a string (go.yaml.in/yaml/v2 resolve.go,
# yamlStyleFloat).
_GO_YAML_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z", re.ASCII)


def _plain_resolves_to_str(value):
    """True when ``value`` written plain reads back as a string in PyYAML and in the kubelet."""
    if _GO_YAML_FLOAT.match(value):
        return False
    resolver = yaml.resolver.Resolver()
    return resolver.resolve(yaml.ScalarNode, value, (True, False)) == STR_TAG


def to_node(value):
    """Build a YAML node for a new value, styled the way the kubelet's own marshalling is."""
    if isinstance(value, bool):
        return yaml.ScalarNode(BOOL_TAG, "true" if value else "false")
    if isinstance(value, int):
        return yaml.ScalarNode(INT_TAG, str(value))
    if isinstance(value, str):
        # Quote only what would otherwise read back as a number, bool or null ("0", "true").
        style = None if value and _plain_resolves_to_str(value) else '"'
        return yaml.ScalarNode(STR_TAG, value, style=style)
    if isinstance(value, dict):
        return yaml.MappingNode(MAP_TAG, [(to_node(str(k)), to_node(v)) for k, v in value.items()],
                                flow_style=False if value else True)
    if isinstance(value, list):
        return yaml.SequenceNode(SEQ_TAG, [to_node(item) for item in value],
                                 flow_style=False if value else True)
    raise TypeError("cannot write %r into a kubelet config" % (value,))


def node_value(node):
    """The Python value of a node, constructed the way ``yaml.safe_load`` would."""
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


KUBELET_CONFIG_KIND = "KubeletConfiguration"
KUBELET_CONFIG_API_VERSION = "kubelet.config.k8s.io/v1beta1"


class KubeletConfigDocument(object):
    """A KubeletConfiguration file held as a PyYAML node graph."""

    def __init__(self, text, path="<string>"):
        self.path = path
        self.original_text = text
        try:
            root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as exc:
            raise KubeletConfigError("%s is not valid YAML: %s" % (path, exc))
        if root is None:
            root = yaml.MappingNode(MAP_TAG, [], flow_style=False)
        if not isinstance(root, yaml.MappingNode):
            raise KubeletConfigError(
                "%s must hold a KubeletConfiguration mapping, found a %s" % (
                    path, type(root).__name__.replace("Node", "").lower()))
        self.root = root
        self.explicit_start = _starts_with_document_marker(text)

    def require_kubelet_configuration(self):
        """Refuse a file that is not a KubeletConfiguration: rewriting an empty file or another
        kind of document would leave the kubelet a config without ``apiVersion``/``kind``,
        which it refuses to load."""
        if not self.root.value:
            raise KubeletConfigError(
                "%s is empty, not a KubeletConfiguration: refusing to write a config without "
                "apiVersion and kind (restore the kubelet's config first)" % self.path)
        kind = self.get(("kind",))
        api_version = self.get(("apiVersion",))
        if kind != KUBELET_CONFIG_KIND or api_version != KUBELET_CONFIG_API_VERSION:
            raise KubeletConfigError(
                "%s is not a KubeletConfiguration (found apiVersion %r, kind %r; expected "
                "apiVersion %s, kind %s)" % (self.path, api_version, kind,
                                             KUBELET_CONFIG_API_VERSION, KUBELET_CONFIG_KIND))

    # -- reading

    def _find(self, mapping, key):
        for index, (key_node, _value_node) in enumerate(mapping.value):
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return index
        return None

    def _mapping_at(self, path, create):
        mapping = self.root
        for key in path:
            index = self._find(mapping, key)
            if index is None:
                if not create:
                    return None
                child = yaml.MappingNode(MAP_TAG, [], flow_style=False)
                self._insert(mapping, key, child)
                mapping = child
                continue
            child = mapping.value[index][1]
            if create and isinstance(child, yaml.ScalarNode) and node_value(child) is None:
                # "kubeReserved:" with no value: the kubelet reads it as an empty map.
                child = yaml.MappingNode(MAP_TAG, [], flow_style=False)
                mapping.value[index] = (mapping.value[index][0], child)
            if not isinstance(child, yaml.MappingNode):
                if not create:
                    return None
                raise KubeletConfigError(
                    "%s: %s must be a map to set keys inside it" % (self.path, ".".join(path)),
                    ["%s: must be a map" % ".".join(path)])
            mapping = child
        return mapping

    def get(self, path, default=None):
        """Python value at a key path such as ``("kubeReserved", "cpu")``."""
        mapping = self._mapping_at(path[:-1], create=False)
        if mapping is None:
            return default
        index = self._find(mapping, path[-1])
        if index is None:
            return default
        return node_value(mapping.value[index][1])

    def has(self, path):
        mapping = self._mapping_at(path[:-1], create=False)
        return mapping is not None and self._find(mapping, path[-1]) is not None

    def as_dict(self):
        return node_value(self.root) or {}

    # -- writing

    def _insert(self, mapping, key, value_node):
        keys = [k.value for k, _v in mapping.value if isinstance(k, yaml.ScalarNode)]
        entry = (to_node(key), value_node)
        if len(keys) == len(mapping.value) and keys == sorted(keys):
            mapping.value.insert(bisect.bisect(keys, key), entry)
        else:
            mapping.value.append(entry)
        if mapping.flow_style:
            # A "{}" placeholder that now holds keys is written as a block map, like kubeadm.
            mapping.flow_style = False

    def set(self, path, value):
        """Set a key path to a value; returns True when the value changed."""
        if self.has(path) and self.get(path) == value:
            return False
        mapping = self._mapping_at(path[:-1], create=True)
        index = self._find(mapping, path[-1])
        if index is None:
            self._insert(mapping, path[-1], to_node(value))
        else:
            mapping.value[index] = (mapping.value[index][0], to_node(value))
        return True

    def remove(self, path):
        """Remove a key path; returns True when it was there."""
        mapping = self._mapping_at(path[:-1], create=False)
        if mapping is None:
            return False
        index = self._find(mapping, path[-1])
        if index is None:
            return False
        del mapping.value[index]
        return True

    def render(self):
        return yaml.serialize(self.root, Dumper=yaml.SafeDumper, allow_unicode=True,
                              width=1 << 30, explicit_start=self.explicit_start)


def _starts_with_document_marker(text):
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("%"):
            continue
        return stripped == "---" or stripped.startswith("--- ")
    return False
