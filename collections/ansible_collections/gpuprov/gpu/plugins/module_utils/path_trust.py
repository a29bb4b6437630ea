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


def _walk(path, follow_last=True):
    """Resolve PATH from / as the kernel does, with lstat(2), following symbolic links (at most
    MAX_LINKS in all); yield what the walk meets as (event, path, info, folder, folder_info):

    - ``folder``: the walk stands in the folder PATH (INFO its lstat): / first, then / again after
      an absolute link, the folder above after '..', each folder it goes down into;
    - ``entry``: PATH, INFO its lstat, exists in FOLDER (FOLDER_INFO its lstat), link or not;

    and last one of: ``resolved`` (PATH, INFO: where the whole path leads, a folder or not),
    ``link-not-followed`` (the last component, a link, when not FOLLOW_LAST), ``missing`` (PATH
    does not exist), ``unreadable`` (INFO: the OSError), ``not-a-directory`` (PATH is not a folder
    but a component follows it), ``loop`` (too many links; PATH is the link met last).
    """
    pending = [part for part in path.split("/") if part]
    current = "/"
    folder = os.lstat(current)
    yield "folder", current, folder, None, None
    links = 0
    while pending:
        name = pending.pop(0)
        if name == ".":
            continue
        if name == "..":
            current = os.path.dirname(current)
            folder = os.lstat(current)
            yield "folder", current, folder, None, None
            continue
        entry = os.path.join(current, name)
        try:
            info = os.lstat(entry)
        except OSError as exc:
            yield "missing" if exc.errno == errno.ENOENT else "unreadable", entry, exc, current, folder
            return
        yield "entry", entry, info, current, folder
        if stat.S_ISLNK(info.st_mode):
            if not pending and not follow_last:
                yield "link-not-followed", entry, info, current, folder
                return
            links += 1
            if links > MAX_LINKS:
                yield "loop", entry, info, current, folder
                return
            target = os.readlink(entry)
            if target.startswith("/"):
                current = "/"
                folder = os.lstat(current)
                yield "folder", current, folder, None, None
            pending = [part for part in target.split("/") if part] + pending
            continue
        if not pending:
            yield "resolved", entry, info, current, folder
            return
        if not stat.S_ISDIR(info.st_mode):
            yield "not-a-directory", entry, info, current, folder
            return
        current, folder = entry, info
        yield "folder", current, folder, None, None
    yield "resolved", current, folder, None, None


def planted_path_problem(path):
    """None when ``path`` may be written as described above; else one line that says why not.
    Parts of the path that do not exist yet are not looked at (nothing can be planted where
    the folder above is trusted); nor is the file itself, whose folder is."""
    trusted = (0, os.geteuid())
    for event, entry, info, folder, folder_info in _walk(path):
        if event == "folder":
            if info.st_uid not in trusted:
                return "%s belongs to uid %d, neither root nor this user" % (entry, info.st_uid)
            if _writable_by_others(info) and not info.st_mode & stat.S_ISVTX:
                return "%s can be written by other users (mode %s)" % (entry, oct(stat.S_IMODE(info.st_mode)))
        elif event == "entry":
            if _writable_by_others(folder_info) and info.st_uid not in trusted:
                return "%s in the folder %s, which others can write to, belongs to uid %d" % (entry, folder, info.st_uid)
            if stat.S_ISLNK(info.st_mode) and info.st_uid not in trusted:
                return "the symbolic link %s belongs to uid %d, neither root nor this user" % (entry, info.st_uid)
        elif event == "loop":
            return "%s: too many levels of symbolic links" % path
    # Missing or unreadable (not there yet: created below a folder already checked), not a
    # folder (writing through it fails with ENOTDIR; the writer reports that), or the file.
    return None


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
    for event, entry, info, _folder, _folder_info in _walk(path, follow_last):
        if event in ("folder", "entry"):
            entries.append((entry, info.st_uid, stat.S_IMODE(info.st_mode), stat.S_ISLNK(info.st_mode)))
        elif event == "resolved":
            return entry if stat.S_ISDIR(info.st_mode) else None
        elif event == "link-not-followed":
            return entry  # an own directory that is a link: refused, not followed
        elif event == "unreadable":
            unread.append("%s: %s" % (entry, info.strerror))
        elif event == "not-a-directory":
            unread.append("%s: Not a directory" % entry)
        elif event == "loop":
            unread.append("%s: too many levels of symbolic links" % path)
    return None


def root_folder_problems(directories, own_dirs):
    """root_entry_problems of every folder from / down to each of DIRECTORIES and OWN_DIRS,
    read here with lstat(2); an own directory reached through a link is judged as own there."""
    entries, unread, own = [], [], set(own_dirs)
    for directory in list(own_dirs) + [d for d in directories if d not in own_dirs]:
        resolved = _root_walk(directory, entries, unread, follow_last=directory not in own_dirs)
        if directory in own_dirs and resolved is not None:
            own.add(resolved)
    return root_entry_problems(entries, own, unread)
