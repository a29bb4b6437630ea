# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Whether root may write a file without following or replacing something another user put
on its way.

A module that writes as root through a path such as /var/lib/kubelet/config.yaml follows its
symbolic links as the kernel does. If another user can create entries in a folder on the way,
that user can plant a link there (to /etc/shadow, say) and have root write through it, or swap
the backup root copies to. The rule (``planted_path_problem``): every folder passed through
belongs to root or to the user running the module and no one else can write to it (group write
is fine for root's group or the user's own), except sticky folders such as /tmp, whose entry on
the way must then belong to root or that user (as the kernel's fs.protected_symlinks does);
every symbolic link on the way belongs to root or that user.

Code that root runs (file_set's require_root_folders: the gpu_mig role's boot-time restore, the
gpu_mps role's start program) gets the stricter rule of ``root_folder_problems``: root alone.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
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


def root_entry_problems(entries, own_dirs, unread=()):
    """One line per kind of problem (empty: only root can change these folders).

    ENTRIES are (path, uid, mode, is_link) of every existing folder from / down to the code's
    own directories OWN_DIRS, and of every symbolic link on the way. The rule: each belongs to
    root; no folder can be written by its group or by others, except sticky folders (such as
    /tmp) that are not an own directory; no own directory is a symbolic link. UNREAD names the
    paths that could not be read for another reason than their absence.
    """
    own_dirs = set(own_dirs)
    seen, not_root, writable, links = set(), [], [], []
    for path, uid, mode, is_link in entries:
        if path in seen:
            continue
        seen.add(path)
        if uid != 0:
            not_root.append(path)
        if is_link:
            if path in own_dirs:
                links.append(path)
        elif mode & 0o022 and (path in own_dirs or not mode & stat.S_ISVTX):
            writable.append(path)
    problems = []
    if unread:
        problems.append("could not read every folder: %s" % "; ".join(unread))
    if not_root:
        problems.append("%s belong(s) to another user than root" % ", ".join(not_root))
    if writable:
        problems.append("%s can be written by other users" % ", ".join(writable))
    if links:
        problems.append("%s is a symbolic link" % ", ".join(links))
    return problems


def _root_walk(path, entries, unread, follow_last):
    """Add to ENTRIES every folder from / down to PATH and every link on the way, following
    the links as the kernel does. Returns the folder PATH resolves to (its last component when
    that is a link and not FOLLOW_LAST), or None when a component does not exist, is not a folder or
    cannot be read (the last two added to UNREAD)."""
    pending = [part for part in path.split("/") if part]
    current = "/"
    info = os.lstat(current)
    entries.append((current, info.st_uid, stat.S_IMODE(info.st_mode), False))
    links = 0
    while pending:
        name = pending.pop(0)
        if name in (".", ".."):
            current = current if name == "." else os.path.dirname(current)
            continue
        entry = os.path.join(current, name)
        try:
            info = os.lstat(entry)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                unread.append("%s: %s" % (entry, exc.strerror))
            return None
        is_link = stat.S_ISLNK(info.st_mode)
        entries.append((entry, info.st_uid, stat.S_IMODE(info.st_mode), is_link))
        if is_link:
            if not pending and not follow_last:
                return entry  # an own directory that is a link: refused, not followed
            links += 1
            if links > MAX_LINKS:
                unread.append("%s: too many levels of symbolic links" % path)
                return None
            target = os.readlink(entry)
            current = "/" if target.startswith("/") else current
            pending = [part for part in target.split("/") if part] + pending
            continue
        if not stat.S_ISDIR(info.st_mode):
            if pending:
                unread.append("%s: Not a directory" % entry)
            return None
        current = entry
    return current


def root_folder_problems(directories, own_dirs):
    """root_entry_problems of every folder from / down to each of DIRECTORIES and OWN_DIRS,
    read here with lstat(2); an own directory reached through a link is judged as own there."""
    entries, unread, own = [], [], set(own_dirs)
    for directory in list(own_dirs) + [d for d in directories if d not in own_dirs]:
        resolved = _root_walk(directory, entries, unread, follow_last=directory not in own_dirs)
        if directory in own_dirs and resolved is not None:
            own.add(resolved)
    return root_entry_problems(entries, own, unread)
