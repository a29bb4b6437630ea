# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Whether root may write a file without following or replacing something another user put
on its way.

A module that writes as root through a path such as /var/lib/kubelet/config.yaml follows its
symbolic links as the kernel does. If another user can create entries in a folder on the way,
that user can plant a link there (to /etc/shadow, say) and have root write through it, or swap
the backup root copies to. The rule, the one plugin_utils/root_paths.py applies from one stat(1)
for the code root runs (the gpu_mig role's restore, the gpu_mps role's start program), widened to
the user running the module: every folder passed through belongs to root or to the
user running the module and no one else can write to it (group write is fine for root's group or
the user's own), except sticky folders such as /tmp,
whose entry on the way must then belong to root or that user (as the kernel's
fs.protected_symlinks does); every symbolic link on the way belongs to root or that user.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat

# Linux resolves at most 40 links in one path (MAXSYMLINKS); the same bound ends a loop here.
MAX_LINKS = 40


def is_normal_absolute(path):
    """PATH is an absolute, normal path: no '.' or '..' component, no doubled or trailing '/'
    (POSIX keeps a leading '//', which may mean something else), no NUL."""
    return (isinstance(path, str) and path.startswith("/") and not path.startswith("//")
            and "\0" not in path and os.path.normpath(path) == path)


def _writable_by_others(info):
    """Other users can create entries: write for everyone, or for a group that is neither
    root's nor this user's own (a umask of 002 leaves a user's folders group-writable)."""
    if info.st_mode & stat.S_IWOTH:
        return True
    return bool(info.st_mode & stat.S_IWGRP) and info.st_gid not in (0, os.getegid())


def planted_path_problem(path):
    """None when ``path`` may be written as described above; else one line that says why not.
    Parts of the path that do not exist yet are not looked at (nothing can be planted where
    the folder above is trusted)."""
    trusted = (0, os.geteuid())
    pending = [part for part in path.split("/") if part]
    current = "/"
    links = 0
    folder = os.lstat("/")
    while True:
        if folder.st_uid not in trusted:
            return "%s belongs to uid %d, neither root nor this user" % (current, folder.st_uid)
        sticky = bool(folder.st_mode & stat.S_ISVTX)
        if _writable_by_others(folder) and not sticky:
            return "%s can be written by other users (mode %s)" % (current, oct(stat.S_IMODE(folder.st_mode)))
        if not pending:
            return None
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)
            folder = os.lstat(current)
            continue
        entry = os.path.join(current, name)
        try:
            info = os.lstat(entry)
        except OSError:
            return None  # not there yet: created below a folder already checked
        if _writable_by_others(folder) and info.st_uid not in trusted:
            return "%s in the folder %s, which others can write to, belongs to uid %d" % (entry, current, info.st_uid)
        if stat.S_ISLNK(info.st_mode):
            if info.st_uid not in trusted:
                return "the symbolic link %s belongs to uid %d, neither root nor this user" % (entry, info.st_uid)
            links += 1
            if links > MAX_LINKS:
                return "%s: too many levels of symbolic links" % path
            target = os.readlink(entry)
            if target.startswith("/"):
                current = "/"
                folder = os.lstat("/")
            pending = [part for part in target.split("/") if part] + pending
            continue
        if not pending:
            return None  # the file itself: its folder was checked above
        if not stat.S_ISDIR(info.st_mode):
            return None  # opening it fails with ENOTDIR; the writer reports that
        current, folder = entry, info
