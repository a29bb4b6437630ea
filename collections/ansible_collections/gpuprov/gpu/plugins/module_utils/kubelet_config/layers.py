# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The files the kubelet merges into its config: the main file (``--config``) and the
drop-ins of ``--config-dir``, read safely.

How the kubelet builds its configuration (cmd/kubelet/app/server.go, kubernetes v1.37.2):

1. The main file is decoded and defaulted, and given the default ``evictionHard`` map when it
   has none (``loadConfigFile``), before any drop-in is read.
2. Every file whose name ends in ``.conf`` under ``--config-dir``, subfolders included, in the
   order ``filepath.WalkDir`` visits them (each folder's entries sorted by name), each a full
   KubeletConfiguration (``apiVersion`` and ``kind`` required), is applied as a JSON merge
   patch (RFC 7386): maps field by field, lists and scalars replaced whole, ``null`` removes
   (``mergeKubeletConfigurations``).
3. Command-line flags override all of them; a map flag such as ``--kube-reserved`` replaces the
   whole map (see ``launch.py``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import stat

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.document import (
    KUBELET_CONFIG_API_VERSION,
    KUBELET_CONFIG_KIND,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.errors import KubeletConfigError
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import DEFAULT_EVICTION_HARD

# gpuprov's drop-in: after the 10-/20- files distributions ship, before a site's 90- overrides.
DROP_IN_NAME = "50-gpuprov.conf"
DROP_IN_SUFFIX = ".conf"
EMPTY_DROP_IN = "apiVersion: %s\nkind: %s\n" % (KUBELET_CONFIG_API_VERSION, KUBELET_CONFIG_KIND)
# A KubeletConfiguration is a few KiB; anything far larger is not one.
MAX_CONFIG_BYTES = 1024 * 1024

_FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"),
)


def _kind_of(mode):
    for test, name in _FILE_KINDS:
        if test(mode):
            return name
    return "not a regular file"


def read_regular_text(path, what="kubelet config"):
    """The text of a regular file, following symlinks; refuses FIFOs, devices, sockets and
    directories without opening them (opening a FIFO would block), files over
    ``MAX_CONFIG_BYTES`` and text that is not UTF-8.

    :raises KubeletConfigError: naming ``path``.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise KubeletConfigError(
                "%s %s does not exist: configure the kubelet first (kubeadm join or kubespray "
                "writes it) or set path to the file the kubelet reads with --config"
                % (what, path))
        raise KubeletConfigError("cannot read %s %s: %s" % (what, path, exc.strerror))
    if not stat.S_ISREG(info.st_mode):
        raise KubeletConfigError("%s %s is %s, not a regular file: refusing to read or replace "
                                 "it" % (what, path, _kind_of(info.st_mode)))
    try:
        # O_NONBLOCK: should the path be swapped for a FIFO after the stat, open does not hang.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise KubeletConfigError("cannot read %s %s: %s" % (what, path, exc.strerror))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise KubeletConfigError("%s %s is not a regular file: refusing to read it"
                                     % (what, path))
        chunks = []
        size = 0
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_CONFIG_BYTES:
                raise KubeletConfigError("%s %s is larger than %d bytes: not a kubelet config"
                                         % (what, path, MAX_CONFIG_BYTES))
            chunks.append(chunk)
    finally:
        os.close(fd)
    try:
        return b"".join(chunks).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise KubeletConfigError("%s %s is not UTF-8 text: %s" % (what, path, exc))


def drop_in_paths(config_dir):
    """The drop-ins the kubelet reads from ``config_dir``, in the order it merges them: the
    walk of ``filepath.WalkDir`` (entries of each folder sorted by name, a folder's files
    where its name sorts), ``.conf`` files only. A link to a folder is not followed, as
    ``WalkDir`` does not follow it; the kubelet then fails on reading it, and so does the
    reader here."""
    if not os.path.isdir(config_dir):
        if not os.path.lexists(config_dir):
            raise KubeletConfigError(
                "config_dir %s does not exist: create it, or give the directory the kubelet "
                "reads with --config-dir" % config_dir)
    paths = []

    def walk(folder):
        try:
            entries = sorted(os.listdir(folder))
        except OSError as exc:
            raise KubeletConfigError("cannot list config_dir %s: %s" % (folder, exc.strerror))
        for name in entries:
            path = os.path.join(folder, name)
            if os.path.isdir(path) and not os.path.islink(path):
                walk(path)
            elif os.path.splitext(name)[1] == DROP_IN_SUFFIX or name == DROP_IN_SUFFIX:
                paths.append(path)

    walk(config_dir)
    return paths


def merged_before(path, config_dir, name=DROP_IN_NAME):
    """True when the kubelet merges drop-in ``path`` before ``<config_dir>/<name>``: the
    walk compares the first path component under ``config_dir``."""
    first = os.path.relpath(path, config_dir).split(os.sep)[0]
    return first < name


def merge_layer(base, overlay):
    """``overlay`` applied to ``base`` as a JSON merge patch (RFC 7386), as the kubelet applies
    a drop-in: maps key by key, recursively; ``None`` (YAML ``null``) removes the key; lists
    and scalars replace."""
    merged = dict(base)
    for key, value in overlay.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict):
            merged[key] = merge_layer(merged[key] if isinstance(merged.get(key), dict) else {},
                                      value)
        else:
            merged[key] = value
    return merged


def main_file_defaults(config):
    """The main file as the kubelet holds it before drop-ins merge: without an
    ``evictionHard`` map it gets the default one; with ``mergeDefaultEvictionSettings: true``
    the defaults fill the thresholds it does not name."""
    result = dict(config)
    eviction = result.get("evictionHard")
    if eviction is None:
        result["evictionHard"] = dict(DEFAULT_EVICTION_HARD)
    elif isinstance(eviction, dict) and result.get("mergeDefaultEvictionSettings") is True:
        result["evictionHard"] = dict(DEFAULT_EVICTION_HARD, **eviction)
    return result


def effective_config(main, drop_ins):
    """The configuration the kubelet runs with (before flags): the main file with its
    defaults, then each drop-in (dicts, in merge order) as a merge patch. ``evictionHard`` is
    always a map here; a drop-in that removes it leaves an empty one (no thresholds)."""
    config = main_file_defaults(main)
    for layer in drop_ins:
        config = merge_layer(config, layer)
    if "evictionHard" not in config:
        config["evictionHard"] = {}
    return config


def sets_key(config, key_path):
    """True when the config dict names ``key_path`` (such as ``("kubeReserved", "cpu")``)."""
    node = config
    for key in key_path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True
