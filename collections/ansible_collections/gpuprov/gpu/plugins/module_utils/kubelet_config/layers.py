# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The files the kubelet merges into its config: the main file (``--config``) and the
drop-ins of ``--config-dir``, read safely.

Drop-ins (kubernetes.io "Kubelet Configuration Directory Merging"; KEP-3983): every file
ending in ``.conf`` in the directory, in alphanumeric order of their names, each a full
KubeletConfiguration document (``apiVersion`` and ``kind`` required, kubernetes#124796),
merged over the main file and the drop-ins before it: maps and structures field by field,
lists and scalars replaced whole. Command-line flags override all of them.
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
    """The drop-ins the kubelet reads from ``config_dir``, in the order it merges them."""
    try:
        names = os.listdir(config_dir)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise KubeletConfigError(
                "config_dir %s does not exist: create it, or give the directory the kubelet "
                "reads with --config-dir" % config_dir)
        raise KubeletConfigError("cannot list config_dir %s: %s" % (config_dir, exc.strerror))
    return [os.path.join(config_dir, name) for name in sorted(names)
            if name.endswith(DROP_IN_SUFFIX)]


def merge_layer(base, overlay):
    """``overlay`` merged over ``base`` as the kubelet merges a drop-in: maps key by key,
    recursively; lists and scalars replace."""
    merged = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_layer(merged[key], value)
        else:
            merged[key] = value
    return merged


def sets_key(config, key_path):
    """True when the config dict names ``key_path`` (such as ``("kubeReserved", "cpu")``)."""
    node = config
    for key in key_path:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True
