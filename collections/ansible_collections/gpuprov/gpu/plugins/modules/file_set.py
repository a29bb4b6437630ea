#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: file_set
short_description: Install several small files, in one or more directories, in one call
version_added: "0.2.0"
description:
  - Writes each file of O(files) whose content, mode, owner or group differ from what is asked,
    in one module run, after creating the directories of O(directories) that are missing.
    M(ansible.builtin.copy) and M(ansible.builtin.template) cost a stat, a transfer and a module
    run per file, M(ansible.builtin.file) a module run per directory; the boot-time MIG restore
    installs its directories, code, program, state file and unit this way in one.
  - Each file is written to a new temporary file in its directory, fsynced, given its owner,
    group and mode, and renamed over the old one, so a reader sees the old file or the new one,
    never a part. A failure removes the temporary file and leaves that file as it was; files
    written before it stay written and are listed in the result.
  - A file's directory must exist or be one of O(directories) (in check mode a missing one means
    every file in it would be written). It is opened without following a symbolic link as its
    last component, and the file is written relative to that open directory. A symbolic link in
    the place of a file is replaced by the file, never written through (and not backed up). A
    directory, device or FIFO in the place of a file, a path that is not absolute and normal,
    an unknown owner or a bad mode are refused before anything is written.
  - Meant for small text files whose content comes from the controller (for example
    C(ansible.builtin.file) or C(ansible.builtin.template) lookups); not for large or binary
    files.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reports which directories would be created and which files would change, and writes nothing.
  diff_mode:
    support: full
    details: One diff per file that changes, with its old and new content.
  platform:
    platforms: posix
options:
  files:
    description: The files, each written whole.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description:
          - Absolute, normal path of the file (no V(.) or V(..) component, no doubled or
            trailing C(/)).
        type: path
        required: true
      content:
        description: The whole content (text, written as UTF-8).
        type: str
        required: true
      mode:
        description: Permissions of this file, an octal string; default O(mode).
        type: str
      backup:
        description:
          - Before a file whose content changes is replaced, keep a copy of the old one beside
            it, named as M(ansible.builtin.copy) names its backups
            (C(NAME.PID.YYYY-MM-DD@HH:MM:SS~)).
        type: bool
        default: false
  directories:
    description:
      - Absolute paths of directories to create when missing (their missing parents too), with
        O(owner), O(group) and O(directory_mode); an existing one gets them too. A symbolic
        link as the last component of one is refused.
    type: list
    elements: path
    default: []
  mode:
    description: Permissions of every file whose entry gives none, an octal string such as V(0644).
    type: str
    required: true
  directory_mode:
    description: Permissions of the directories of O(directories), an octal string.
    type: str
    default: "0755"
  owner:
    description: Owner of every file and directory (a name or a number). Omitted, new ones belong to the user the module runs as.
    type: str
  group:
    description: Group of every file and directory (a name or a number). Omitted, new ones get the user's group.
    type: str
  require_root_folders:
    description:
      - For code that root runs (a boot-time program, its unit and settings), where whoever can
        change a file or a folder above it runs code as root. Before anything is read or
        written, every existing folder from C(/) down to each of O(directories) and to each
        file's directory must belong to root and be writable by no other user (group or
        others), except sticky folders such as C(/tmp) above O(directories); a symbolic link on
        the way must belong to root and is followed; none of O(directories) may be a symbolic
        link. Otherwise the module fails naming every such folder, and changes nothing.
      - Checked in check mode too.
    type: bool
    default: false
requirements:
  - write access to the directories (root, for the MIG restore)
"""

EXAMPLES = r"""
- name: Install a program and its unit
  become: true
  gpuprov.gpu.file_set:
    directories: [/usr/local/lib/example]
    mode: "0644"
    owner: root
    group: root
    files:
      - path: /usr/local/lib/example/run.py
        content: "{{ lookup('ansible.builtin.template', 'run.py.j2') }}"
        mode: "0755"
      - path: /etc/systemd/system/example.service
        content: "{{ lookup('ansible.builtin.template', 'example.service.j2') }}"
        backup: true
  register: installed

- name: Enable the unit, reloading systemd when the unit file changed
  become: true
  ansible.builtin.systemd_service:
    name: example.service
    enabled: true
    daemon_reload: "{{ '/etc/systemd/system/example.service' in installed.changed_files }}"
"""

RETURN = r"""
changed_files:
  description: The paths written (check mode - that would be written), in the order of O(files).
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/example/run.py]
changed_directories:
  description: The directories created or given another owner, group or mode (check mode - that would be).
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/example]
summary:
  description: The directories and the names of the files that changed, in one line (empty when nothing changed).
  returned: always
  type: str
  sample: "directories: /usr/local/lib/example; files: run.py, example.service"
backup_files:
  description: Path of each file backed up before it was replaced, to the path of its backup.
  returned: always
  type: dict
  sample: {/etc/systemd/system/example.service: "/etc/systemd/system/example.service.4211.2026-12-07@10:00:00~"}
"""

import errno
import grp
import os
import pwd
import stat
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.gpu.plugins.module_utils.path_trust import is_normal_absolute, root_folder_problems


class FileSetError(Exception):
    pass


def _account_id(value, lookup, field, option, noun):
    """VALUE as a number (itself when digits, else looked up by name), or None when omitted."""
    if value is None:
        return None
    if value.isdigit():
        return int(value)
    try:
        return getattr(lookup(value), field)
    except KeyError:
        raise FileSetError("%s %r: no such %s on this node" % (option, value, noun))


def _uid(owner):
    return _account_id(owner, pwd.getpwnam, "pw_uid", "owner", "user")


def _gid(group):
    return _account_id(group, grp.getgrnam, "gr_gid", "group", "group")


def _mode(text, option="mode"):
    try:
        mode = int(text, 8)
    except (TypeError, ValueError):
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise FileSetError("%s %r is not an octal permission such as 0644" % (option, text))
    return mode


def _check_path(path, what):
    """PATH must be absolute and normal: no '.', '..', doubled or trailing '/', no NUL."""
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
        raise FileSetError("%s %r: an absolute path is needed" % (what, path))
    if not is_normal_absolute(path) or (what == "file" and path == "/"):
        raise FileSetError("%s %r: a normal absolute path is needed (no '.', '..', doubled or trailing '/')" % (what, path))


def _open_directory(directory):
    """DIRECTORY, opened without following a link as its last component."""
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise FileSetError("%s is not a directory (a symbolic link or a file); refusing to write there" % directory)
        if exc.errno == errno.ENOENT:
            raise FileSetError("directory %s does not exist" % directory)
        raise FileSetError("cannot open directory %s: %s" % (directory, exc.strerror))


def _lstat(path):
    try:
        return os.lstat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise


def plan_directory(path):
    """The components of PATH that are missing, checked read-only: every existing one must be a
    directory (a link on the way is followed, as the kernel does), the last one not a link."""
    _check_path(path, "directory")
    parts = [part for part in path.split("/") if part]
    for index in range(len(parts)):
        current = "/" + "/".join(parts[:index + 1])
        info = _lstat(current)
        if info is None:
            return ["/" + "/".join(parts[:end + 1]) for end in range(index, len(parts))]
        last = index == len(parts) - 1
        if last and stat.S_ISLNK(info.st_mode):
            raise FileSetError("%s is a symbolic link; refusing to use it as a directory" % current)
        if not os.path.isdir(current):
            raise FileSetError("%s is not a directory; refusing to create %s" % (current, path))
    return []


def require_root_folders(directories, files):
    """Fail unless only root can change the folders down to DIRECTORIES and the FILES' folders."""
    for path in list(directories) + list(files):
        _check_path(path, "directory" if path in directories else "file")
    folders = list(directories) + [os.path.dirname(path) for path in files]
    problems = root_folder_problems(sorted(set(folders), key=folders.index), directories)
    if problems:
        raise FileSetError("root runs what is written here, so only root may be able to change it: %s; "
                           "make every folder from / down to these directories belong to root and "
                           "writable by no one else" % "; ".join(problems))


def _set_attributes(fd, mode, uid, gid):
    """Give the open FD's file OWNER, GROUP and MODE; True when one differed."""
    info = os.fstat(fd)
    changed = False
    if (uid is not None and info.st_uid != uid) or (gid is not None and info.st_gid != gid):
        os.fchown(fd, -1 if uid is None else uid, -1 if gid is None else gid)
        changed = True
    # After the chown, which clears set-id bits.
    if changed or stat.S_IMODE(info.st_mode) != mode:
        os.fchmod(fd, mode)
        changed = changed or stat.S_IMODE(info.st_mode) != mode
    return changed


def _directory_differs(path, mode, uid, gid):
    info = os.lstat(path)
    return (stat.S_IMODE(info.st_mode) != mode or (uid is not None and info.st_uid != uid)
            or (gid is not None and info.st_gid != gid))


def make_directory(path, missing, mode, uid, gid):
    """Create the MISSING components of PATH, then give each created one and PATH itself the
    owner, group and mode; True when anything changed."""
    changed = False
    for component in missing:
        try:
            os.mkdir(component, 0o700)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
        fd = _open_directory(component)
        try:
            _set_attributes(fd, mode, uid, gid)
        finally:
            os.close(fd)
        changed = True
    if not missing:
        fd = _open_directory(path)
        try:
            changed = _set_attributes(fd, mode, uid, gid)
        finally:
            os.close(fd)
    return changed


def _current(dir_fd, name):
    """(stat, bytes) of the regular file NAME, (stat, None) of anything else, (None, None) when absent."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None, None
        raise
    if not stat.S_ISREG(info.st_mode):
        return info, None
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as handle:
        return info, handle.read()


class Planned(object):
    def __init__(self, path, content, mode, backup, info, old):
        self.path, self.content, self.mode, self.backup, self.info, self.old = path, content, mode, backup, info, old
        self.directory, self.name = os.path.split(path)

    def needs_write(self, uid, gid):
        info = self.info
        if info is None or not stat.S_ISREG(info.st_mode) or self.old != self.content:
            return True
        if stat.S_IMODE(info.st_mode) != self.mode:
            return True
        return (uid is not None and info.st_uid != uid) or (gid is not None and info.st_gid != gid)

    def backs_up(self):
        return self.backup and self.info is not None and stat.S_ISREG(self.info.st_mode) and self.old != self.content


def plan_files(entries, default_mode, will_exist, check_mode):
    """Read every file first: a refusal (a directory in a file's place) comes before any write."""
    planned, seen, handles = [], set(), {}
    try:
        for entry in entries:
            path, content = entry["path"], entry["content"]
            _check_path(path, "file")
            if path in seen:
                raise FileSetError("file %s is given twice" % path)
            seen.add(path)
            if not isinstance(content, str):
                raise FileSetError("%s: the content must be text, not %s" % (path, type(content).__name__))
            mode = default_mode if entry.get("mode") is None else _mode(entry["mode"], "mode of %s" % path)
            directory, name = os.path.split(path)
            if directory not in handles:
                if directory in will_exist or (check_mode and not os.path.lexists(directory)):
                    # Created by this run (or, in check mode, by an earlier task): nothing to read.
                    handles[directory] = None
                else:
                    handles[directory] = _open_directory(directory)
            dir_fd = handles[directory]
            info, old = _current(dir_fd, name) if dir_fd is not None else (None, None)
            if info is not None and not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
                raise FileSetError("%s exists and is not a regular file; refusing to replace it" % path)
            planned.append(Planned(path, content.encode("utf-8"), mode, bool(entry.get("backup")), info, old))
    finally:
        for fd in handles.values():
            if fd is not None:
                os.close(fd)
    return planned


def _create_exclusive(dir_fd, stem, path, mode):
    """A new file STEM.<n> in DIR_FD, opened for writing, never following or reusing a name."""
    for attempt in range(100):
        candidate = stem if attempt == 0 else "%s.%d" % (stem, attempt)
        try:
            return candidate, os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno != errno.EEXIST:
                raise
    raise FileSetError("%s: no free name for a new file in its directory" % path)


def backup(dir_fd, item):
    """Copy the old content of ITEM beside it (its mode, owner and times kept); the backup's path."""
    stem = "%s.%d.%s~" % (item.name, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S", time.localtime()))
    name, fd = _create_exclusive(dir_fd, stem, item.path, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(item.old)
        handle.flush()
        info = item.info
        try:
            os.fchown(handle.fileno(), info.st_uid, info.st_gid)
        except OSError as exc:
            if exc.errno != errno.EPERM:
                raise
        os.fchmod(handle.fileno(), stat.S_IMODE(info.st_mode))
        os.utime(handle.fileno(), ns=(info.st_atime_ns, info.st_mtime_ns))
        os.fsync(handle.fileno())
    return os.path.join(item.directory, name)


def write(dir_fd, item, uid, gid):
    """Write ITEM through a temporary file in its directory, renamed over the old one."""
    temporary = None
    try:
        temporary, fd = _create_exclusive(dir_fd, ".%s.%d.tmp" % (item.name, os.getpid()), item.path, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(item.content)
            handle.flush()
            if uid is not None or gid is not None:
                os.fchown(handle.fileno(), -1 if uid is None else uid, -1 if gid is None else gid)
            # After the chown, which clears set-id bits.
            os.fchmod(handle.fileno(), item.mode)
            os.fsync(handle.fileno())
        os.rename(temporary, item.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        temporary = None
    finally:
        if temporary is not None:
            try:
                os.unlink(temporary, dir_fd=dir_fd)
            except OSError:
                pass


def _text(data):
    return data.decode("utf-8", "replace") if data is not None else ""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="dict", required=True, options=dict(
                path=dict(type="path", required=True),
                content=dict(type="str", required=True),
                mode=dict(type="str"),
                backup=dict(type="bool", default=False),
            )),
            directories=dict(type="list", elements="path", default=[]),
            mode=dict(type="str", required=True),
            directory_mode=dict(type="str", default="0755"),
            owner=dict(type="str"),
            group=dict(type="str"),
            require_root_folders=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    written, made, backups = [], [], {}
    try:
        mode = _mode(params["mode"])
        directory_mode = _mode(params["directory_mode"], "directory_mode")
        uid, gid = _uid(params["owner"]), _gid(params["group"])
        # Everything is read and checked before the first change.
        if params["require_root_folders"]:
            require_root_folders(params["directories"], [entry["path"] for entry in params["files"]])
        directories = [(path, plan_directory(path)) for path in params["directories"]]
        will_exist = set(component for _path, missing in directories for component in missing)
        planned = plan_files(params["files"], mode, will_exist, module.check_mode)
        changes = [item for item in planned if item.needs_write(uid, gid)]
        if module.check_mode:
            made = [path for path, missing in directories
                    if missing or _directory_differs(path, directory_mode, uid, gid)]
        else:
            for path, missing in directories:
                if make_directory(path, missing, directory_mode, uid, gid):
                    made.append(path)
            for item in changes:
                dir_fd = _open_directory(item.directory)
                try:
                    if item.backs_up():
                        backups[item.path] = backup(dir_fd, item)
                    write(dir_fd, item, uid, gid)
                    written.append(item.path)
                    os.fsync(dir_fd)
                finally:
                    os.close(dir_fd)
    except (FileSetError, OSError) as exc:
        module.fail_json(msg="file_set: %s" % exc, changed=bool(written or made), changed_files=written,
                         changed_directories=made, backup_files=backups)
    summary = "; ".join(part for part in (
        "directories: " + ", ".join(made) if made else "",
        "files: " + ", ".join(item.name for item in changes) if changes else "") if part)
    result = dict(changed=bool(changes or made), changed_files=[item.path for item in changes],
                  changed_directories=made, backup_files=backups, summary=summary)
    if module._diff:
        result["diff"] = [dict(before_header=item.path, after_header=item.path, before=_text(item.old),
                               after=_text(item.content)) for item in changes]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
