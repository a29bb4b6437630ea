# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The pipe and log directories the daemon needs: owner, group, mode, leftovers, and the
metadata file that records what the daemon was started with."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import grp
import json
import os
import pwd
import re
import stat
import tempfile

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.constants import METADATA_FILE
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError


# Directories shared with everything else on the host: cleaning a stale pipe directory
# removes its files, which must never happen to these.
SHARED_DIRECTORIES = frozenset([
    "/", "/bin", "/boot", "/dev", "/dev/shm", "/etc", "/home", "/lib", "/opt", "/proc",
    "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/var/lib",
    "/var/log", "/var/run", "/var/tmp",
])


def parse_mode(value, field):
    """``'0755'`` / ``'755'`` / 493 -> 0o755, rejecting anything that is not an octal mode."""
    if isinstance(value, int) and not isinstance(value, bool):
        mode = value
    elif isinstance(value, str) and re.match(r"^0?[0-7]{3,4}$", value.strip()):
        mode = int(value.strip(), 8)
    else:
        raise MpsError("%s must be an octal mode such as '0755', got %r" % (field, value))
    if not 0 <= mode <= 0o7777:
        raise MpsError("%s must be an octal mode such as '0755', got %r" % (field, value))
    return mode


class DirectorySpec:
    """A directory the daemon needs, with the owner, group and mode it must have."""

    def __init__(self, path, field, mode, owner=None, group=None):
        self.field = field
        self.path = validate_directory_path(path, field)
        self.mode = parse_mode(mode, field + "_mode")
        if self.mode & stat.S_IWOTH:
            raise MpsError("%s_mode %s makes %s world-writable, which lets any user replace the "
                           "daemon's files; give the MPS users a group (%s_group) and a mode such "
                           "as 0770 instead" % (field, oct(self.mode), self.path, field))
        self.owner = owner
        self.group = group
        self.uid = _resolve_user(owner, field + "_owner") if owner is not None else None
        self.gid = _resolve_group(group, field + "_group") if group is not None else None


def validate_directory_path(path, field):
    if not isinstance(path, str) or not path:
        raise MpsError("%s must be an absolute path" % field)
    if "\x00" in path or "\n" in path:
        raise MpsError("%s %r contains a NUL or newline character" % (field, path))
    if not os.path.isabs(path) or os.path.normpath(path) != path.rstrip("/") or ".." in path.split("/"):
        raise MpsError("%s must be an absolute, normalized path without '..', got %r (use %r)"
                       % (field, path, os.path.normpath(path)))
    path = os.path.normpath(path)
    if path in SHARED_DIRECTORIES:
        raise MpsError("%s %s is a shared system directory; give MPS a directory of its own, "
                       "such as %s" % (field, path, os.path.join(path, "nvidia-mps")))
    return path


def _resolve_user(name, field):
    try:
        if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
            return int(name)
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise MpsError("%s: no user %r on this host" % (field, name))


def _resolve_group(name, field):
    try:
        if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
            return int(name)
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise MpsError("%s: no group %r on this host" % (field, name))


def directory_state(path):
    """{exists, mode, uid, gid} of a directory, refusing anything that is not one."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return {"exists": False, "mode": None, "uid": None, "gid": None}
        raise MpsError("cannot inspect %s: %s" % (path, exc))
    if stat.S_ISLNK(st.st_mode):
        raise MpsError("%s is a symbolic link; MPS directories must be real directories "
                       "(remove the link or point the option at its target)" % path)
    if not stat.S_ISDIR(st.st_mode):
        raise MpsError("%s exists but is not a directory; remove it or choose another path" % path)
    return {"exists": True, "mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}


def plan_directory(spec):
    """What has to change for ``spec``: a dict with before, after, actions and warnings."""
    before = directory_state(spec.path)
    warnings = []
    if before["exists"] and before["uid"] not in (0, os.getuid(), spec.uid):
        raise MpsError("%s %s belongs to uid %d, neither root nor the configured owner: "
                       "someone else created it; inspect and remove it, then run again"
                       % (spec.field, spec.path, before["uid"]))
    after = {
        "exists": True,
        "mode": spec.mode,
        "uid": spec.uid if spec.uid is not None else (before["uid"] if before["exists"] else os.getuid()),
        "gid": spec.gid if spec.gid is not None else (before["gid"] if before["exists"] else os.getgid()),
    }
    actions = []
    if not before["exists"]:
        actions.append("create")
    else:
        if before["mode"] != after["mode"]:
            actions.append("chmod")
            if before["mode"] & stat.S_IWOTH:
                warnings.append("%s %s was world-writable (mode %s); set to %s"
                                % (spec.field, spec.path, _octal(before["mode"]), _octal(spec.mode)))
        if before["uid"] != after["uid"] or before["gid"] != after["gid"]:
            actions.append("chown")
    return {"path": spec.path, "before": _public_dir(before), "after": _public_dir(after),
            "actions": actions, "warnings": warnings, "spec": spec}


def apply_directory(plan):
    spec = plan["spec"]
    try:
        if "create" in plan["actions"]:
            parent = os.path.dirname(spec.path)
            if not os.path.isdir(parent):
                os.makedirs(parent, 0o755)
            os.mkdir(spec.path, spec.mode)
        os.chmod(spec.path, spec.mode)  # mkdir's mode is filtered by the umask
        if spec.uid is not None or spec.gid is not None:
            os.chown(spec.path, -1 if spec.uid is None else spec.uid, -1 if spec.gid is None else spec.gid)
    except OSError as exc:
        raise MpsError("cannot set up %s %s: %s" % (spec.field, spec.path, exc))


def _octal(mode):
    return None if mode is None else "%04o" % mode


def _public_dir(state):
    return {"exists": state["exists"], "mode": _octal(state["mode"]), "uid": state["uid"], "gid": state["gid"]}


def leftover_entries(pipe_directory):
    """Files a dead daemon left in its pipe directory (never subdirectories)."""
    try:
        names = sorted(os.listdir(pipe_directory))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return []
        raise MpsError("cannot list %s: %s" % (pipe_directory, exc))
    return [n for n in names if not os.path.isdir(os.path.join(pipe_directory, n))
            or os.path.islink(os.path.join(pipe_directory, n))]


def remove_entries(pipe_directory, names):
    for name in names:
        try:
            os.unlink(os.path.join(pipe_directory, name))
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise MpsError("cannot remove stale %s: %s" % (os.path.join(pipe_directory, name), exc))


def read_metadata(pipe_directory):
    try:
        with open(os.path.join(pipe_directory, METADATA_FILE)) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_metadata(pipe_directory, data):
    """Atomic write: temp file in the same directory, then rename over the old one."""
    fd, tmp = tempfile.mkstemp(dir=pipe_directory, prefix=".gpuprov-mps.")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(pipe_directory, METADATA_FILE))
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise MpsError("cannot record the daemon's GPUs in %s: %s" % (pipe_directory, exc))
