# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Writing a config file atomically, with a backup in Ansible's style."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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


def write_file_atomic(path, text, backup=True):
    """Replace ``path`` with ``text`` atomically, keeping its mode and owner.

    The new content goes to a temporary file in the same directory, is fsynced, and is renamed
    over ``path`` with ``os.replace``; a failure at any step removes the temporary file and
    leaves ``path`` as it was. With ``backup`` the old content is first copied to
    ``backup_path_for(path)``.

    :returns: the backup file's path, or None.
    """
    directory = os.path.dirname(os.path.abspath(path))
    current = os.stat(path)
    backup_file = None
    if backup:
        backup_file = backup_path_for(path)
        shutil.copy2(path, backup_file)
        with open(backup_file, "rb") as handle:
            os.fsync(handle.fileno())

    fd, tmp_path = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp",
                                    dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_path, stat.S_IMODE(current.st_mode))
        tmp_stat = os.stat(tmp_path)
        if (tmp_stat.st_uid, tmp_stat.st_gid) != (current.st_uid, current.st_gid):
            os.chown(tmp_path, current.st_uid, current.st_gid)
        os.replace(tmp_path, path)
    except BaseException:
        try:
            os.unlink(tmp_path)
        except OSError:
            pass
        raise
    _fsync_directory(directory)
    return backup_file
