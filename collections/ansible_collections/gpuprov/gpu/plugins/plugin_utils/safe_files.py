# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Reading the YAML and JSON files users hand to gpuprov, with every size bounded.

mig-parted configs, workload files, cluster snapshots, kubeconfigs and ``-e @FILE`` files
all come through here, so a hostile or broken file is refused the same way everywhere, as a
``FileInputError`` naming the file, and never as a MemoryError, RecursionError or hang:

* only regular files are read (a FIFO or a device would block or never end);
* at most ``max_bytes`` are read: a bigger file is refused without reading the rest;
* binary content (a NUL byte) and text that is not UTF-8 are refused;
* nesting deeper than ``max_depth`` is refused before the parser recurses that deep;
* YAML aliases are counted as the data they expand to (``&a [*b, *b, ...]`` "billion
  laughs"): more than ``max_nodes`` expanded nodes is refused while composing, before any
  Python object is built;
* JSON's ``NaN``/``Infinity`` are refused (they are not JSON, RFC 8259 section 6).

A file an inventory names (``gpuprov_mig_config_file``, ``gpuprov_catalog_file``, a
``lookup('file')``) must also lie inside the inventory's folders (``confined_problem``): an
inventory from a repository its reader does not trust may not read the reader's files.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import yaml

MAX_BYTES = 4 * 1024 * 1024
SNAPSHOT_MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 500000


class FileInputError(ValueError):
    """A file that cannot be read as data; the message starts with the file's name."""

    def __init__(self, path, reason):
        self.path = path
        self.reason = reason
        super(FileInputError, self).__init__("%s: %s" % (path, reason))


def confined_problem(path, roots, must_exist=True):
    """Why a file named by the inventory may not be read (outside ``roots``, through a hidden
    folder, not a regular file, too big), or None."""
    if not roots:
        return "the inventory has no folder (a host list), so no file may be read"
    roots = [os.path.realpath(str(root)) for root in roots]
    real = os.path.realpath(str(path))
    inside = None
    for root in roots:
        if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
            inside = root
            break
    if inside is None:
        return "outside the inventory's folder%s %s (links resolved)" % (
            "" if len(roots) == 1 else "s", ", ".join(roots))
    if any(part.startswith(".") for part in os.path.relpath(real, inside).split(os.sep) if part != "."):
        return "a hidden file or folder (a name starting with '.'), which plans do not read"
    try:
        info = os.stat(real)
    except OSError:
        return "no such file" if must_exist else None
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_size > MAX_BYTES:
        return "%d bytes is over the limit of %d bytes" % (info.st_size, MAX_BYTES)
    return None


def read_text(path, max_bytes=MAX_BYTES):
    """The file's text; refuses non-regular files, oversized, binary and non-UTF-8 content."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused just below.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise FileInputError(path, "cannot read: %s" % (exc.strerror or exc))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileInputError(path, "not a regular file")
        if info.st_size > max_bytes:
            raise FileInputError(path, "%d bytes is over the limit of %d bytes" % (info.st_size, max_bytes))
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise FileInputError(path, "over the limit of %d bytes" % max_bytes)
    except OSError as exc:
        raise FileInputError(path, "cannot read: %s" % (exc.strerror or exc))
    finally:
        os.close(fd)
    return decode(b"".join(chunks), path)


def decode(data, path):
    if b"\x00" in data:
        raise FileInputError(path, "binary content (a NUL byte); expected YAML or JSON text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileInputError(path, "not UTF-8 text (byte %d)" % exc.start)
    return text[1:] if text.startswith(u"\ufeff") else text


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses deep nesting and alias bombs while composing nodes."""

    max_depth = MAX_DEPTH
    max_nodes = MAX_NODES

    def __init__(self, stream):
        super(_BoundedLoader, self).__init__(stream)
        self._depth = 0
        self._weights = {}

    def compose_node(self, parent, index):
        if self.check_event(yaml.events.AliasEvent):
            return super(_BoundedLoader, self).compose_node(parent, index)
        self._depth += 1
        if self._depth > self.max_depth:
            mark = self.peek_event().start_mark
            raise yaml.YAMLError("nesting deeper than %d levels (line %d)" % (self.max_depth, mark.line + 1))
        try:
            node = super(_BoundedLoader, self).compose_node(parent, index)
        finally:
            self._depth -= 1
        # The weight of a node is the number of values it stands for once every alias is
        # expanded; aliases return the anchored node itself, so its weight counts again.
        if isinstance(node, yaml.SequenceNode):
            weight = 1 + sum(self._weights.get(id(child), 1) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            weight = 1 + sum(self._weights.get(id(k), 1) + self._weights.get(id(v), 1) for k, v in node.value)
        else:
            weight = 1
        if weight > self.max_nodes:
            raise yaml.YAMLError("more than %d values once YAML aliases are expanded (line %d)"
                                 % (self.max_nodes, node.start_mark.line + 1))
        self._weights[id(node)] = weight
        return node


def _check_depth(data, path, max_depth):
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise FileInputError(path, "nesting deeper than %d levels" % max_depth)
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)


def _refuse_constant(name):
    raise ValueError("%s is not JSON" % name)


def parse_json(text, path, max_depth=MAX_DEPTH):
    # Depth first, by counting brackets outside strings is costly to get right; json's C
    # scanner raises RecursionError on deep input instead, which is turned into a refusal.
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise FileInputError(path, "nesting deeper than %d levels" % max_depth)
    except ValueError as exc:
        raise FileInputError(path, "not valid JSON: %s" % exc)
    _check_depth(data, path, max_depth)
    return data


def parse_yaml(text, path, max_depth=MAX_DEPTH, max_nodes=MAX_NODES, multi=False):
    loader_class = type("Loader", (_BoundedLoader,), {"max_depth": max_depth, "max_nodes": max_nodes})
    loader = loader_class(text)
    try:
        if multi:
            data = []
            while loader.check_data():
                data.append(loader.get_data())
        else:
            data = loader.get_single_data()
    except yaml.YAMLError as exc:
        raise FileInputError(path, "not valid YAML: %s" % " ".join(str(exc).split()))
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        # PyYAML's constructors raise these for a bad timestamp, a huge integer or an
        # unhashable key such as `? [a]: 1`.
        raise FileInputError(path, "not valid YAML: %s" % " ".join(str(exc).split()))
    finally:
        loader.dispose()
    return data


def load(path, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, max_nodes=MAX_NODES, kind=None):
    """Read ``path`` as JSON (``kind="json"`` or a .json name) or YAML; FileInputError if unfit."""
    text = read_text(path, max_bytes)
    if kind is None:
        kind = "json" if str(path).lower().endswith(".json") else "yaml"
    if kind == "json":
        return parse_json(text, path, max_depth)
    return parse_yaml(text, path, max_depth, max_nodes)
