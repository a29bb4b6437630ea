# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Writing a config file atomically, with a backup in Ansible's style."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import shutil
import stat
import tempfile
import time


def backup_path_for(path, now=None):
    """Backup name in Ansible's style: ``<path>.<pid>.<YYYY-mm-dd@HH:MM:SS>~``."""
    stamp = time.strftime("%Y-%m-%d@%H:%M:%S", time.localtime(now))
    return "%s.%d.%s~" % (path, os.getpid(), stamp)


def _fsync_directory(directory):
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_file_atomic(path, text, backup=True, atomic_move=None, create_mode=0o644):
    """Replace ``path`` with ``text`` atomically, keeping its mode and owner.

    A symlink at ``path`` is written through: its target gets the new content and the link
    stays (kubelet configs managed by other tools are often links). A path that exists but is
    not a regular file (a FIFO, a device) is refused. A missing ``path`` is created with
    ``create_mode``.

    The new content goes to a temporary file in the target's directory, is fsynced, and is
    moved over the target. With ``atomic_move`` (Ansible's ``AnsibleModule.atomic_move``) the
    move keeps the target's owner, mode, SELinux context and attributes; without it,
    ``os.replace`` after copying mode and owner. A failure at any step removes the temporary
    file and leaves the target as it was. With ``backup`` the old content is first copied to
    ``backup_path_for(target)``.

    :returns: the backup file's path, or None.
    """
    target = os.path.realpath(path)
    directory = os.path.dirname(target)
    try:
        current = os.stat(target)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise
        current = None
    if current is not None and not stat.S_ISREG(current.st_mode):
        raise OSError(errno.EINVAL, "%s is not a regular file; refusing to replace it" % target)
    backup_file = None
    if backup and current is not None:
        backup_file = backup_path_for(target)
        shutil.copy2(target, backup_file)
        with open(backup_file, "rb") as handle:
            os.fsync(handle.fileno())

    fd, tmp_path = tempfile.mkstemp(prefix=".%s." % os.path.basename(target), suffix=".tmp",
                                    dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        if current is None:
            os.chmod(tmp_path, create_mode)
        if atomic_move is not None:
            atomic_move(tmp_path, target)
        else:
            if current is not None:
                os.chmod(tmp_path, stat.S_IMODE(current.st_mode))
                tmp_stat = os.stat(tmp_path)
                if (tmp_stat.st_uid, tmp_stat.st_gid) != (current.st_uid, current.st_gid):
                    os.chown(tmp_path, current.st_uid, current.st_gid)
            os.replace(tmp_path, target)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
    _fsync_directory(directory)
    return backup_file
