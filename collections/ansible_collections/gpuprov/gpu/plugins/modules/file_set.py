#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: file_set
short_description: Install several small files into one directory in one call
version_added: "0.2.0"
description:
  - Writes each file of O(files) whose content, mode, owner or group differ from what is asked,
    in one module run. M(ansible.builtin.copy) costs a stat, a transfer and a module run per
    file; the boot-time MIG restore installs its four source files this way in one.
  - Each file is written to a new temporary file in O(directory), fsynced, given its owner,
    group and mode, and renamed over the old one, so a reader sees the old file or the new one,
    never a part. A failure removes the temporary file and leaves that file as it was; files
    written before it stay written and are listed in the result.
  - O(directory) must exist (in check mode a missing one means every file would be written); it is opened without following a symbolic link as its last
    component, and every file is written relative to that open directory. A symbolic link in
    the place of a file is replaced by the file, never written through. A directory, device or
    FIFO in the place of a file is refused before any file is written.
  - Meant for the collection's own node-side files, whose content comes from the controller
    (for example C(ansible.builtin.file) lookups of the collection's sources); not for large or
    binary files.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reports which files would change and writes nothing.
  diff_mode:
    support: full
    details: One diff per file that changes, with its old and new content.
  platform:
    platforms: posix
options:
  directory:
    description: Absolute path of the existing directory the files go into.
    type: path
    required: true
  files:
    description:
      - The files, as file name to its whole content (text, written as UTF-8).
      - A name is a plain file name, not a path; V(.), V(..) and names with C(/) or a NUL are refused.
    type: dict
    required: true
  mode:
    description: The permissions of every file, an octal string such as V(0644).
    type: str
    required: true
  owner:
    description: Owner of every file (a name or a number). Omitted, new files belong to the user the module runs as.
    type: str
  group:
    description: Group of every file (a name or a number). Omitted, new files get the user's group.
    type: str
requirements:
  - write access to O(directory) (root, for the MIG restore)
"""

EXAMPLES = r"""
- name: Install the node-side code of the MIG restore
  become: true
  gpuprov.gpu.file_set:
    directory: /usr/local/lib/gpuprov/ansible_collections/gpuprov/gpu/plugins/module_utils
    mode: "0644"
    owner: root
    group: root
    files:
      mig_solver.py: "{{ lookup('ansible.builtin.file', 'plugins/module_utils/mig_solver.py', rstrip=false) }}"
"""

RETURN = r"""
changed_files:
  description: The paths written (check mode - that would be written), in the order of the file names.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/gpuprov/ansible_collections/gpuprov/gpu/plugins/module_utils/mig_solver.py]
"""

import errno
import grp
import os
import pwd
import stat

from ansible.module_utils.basic import AnsibleModule


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


def _mode(text):
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o7777:
        raise FileSetError("mode %r is not an octal permission such as 0644" % (text,))
    return mode


def _check_name(name):
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise FileSetError("file name %r: a plain file name is needed, not a path" % (name,))


def _open_directory(directory):
    """DIRECTORY, opened without following a link as its last component."""
    if not os.path.isabs(directory):
        raise FileSetError("directory %r: an absolute path is needed" % (directory,))
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise FileSetError("%s is not a directory (a symbolic link or a file); refusing to write there" % directory)
        if exc.errno == errno.ENOENT:
            raise FileSetError("directory %s does not exist" % directory)
        raise FileSetError("cannot open directory %s: %s" % (directory, exc.strerror))


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
    def __init__(self, name, path, content, info, old):
        self.name, self.path, self.content, self.info, self.old = name, path, content, info, old

    def needs_write(self, mode, uid, gid):
        info = self.info
        if info is None or not stat.S_ISREG(info.st_mode) or self.old != self.content:
            return True
        if stat.S_IMODE(info.st_mode) != mode:
            return True
        return (uid is not None and info.st_uid != uid) or (gid is not None and info.st_gid != gid)


def plan(dir_fd, directory, files):
    """Read every file first: a refusal (a directory in a file's place) comes before any write."""
    planned = []
    for name in sorted(files):
        _check_name(name)
        content = files[name]
        if not isinstance(content, str):
            raise FileSetError("%s: the content must be text, not %s" % (name, type(content).__name__))
        path = os.path.join(directory, name)
        info, old = _current(dir_fd, name) if dir_fd is not None else (None, None)
        if info is not None and not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
            raise FileSetError("%s exists and is not a regular file; refusing to replace it" % path)
        planned.append(Planned(name, path, content.encode("utf-8"), info, old))
    return planned


def write(dir_fd, item, mode, uid, gid):
    """Write ITEM through a temporary file in the directory, renamed over the old one."""
    temporary = None
    try:
        for attempt in range(100):
            candidate = ".%s.%d.%d.tmp" % (item.name, os.getpid(), attempt)
            try:
                fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    continue
                raise
            temporary = candidate
            break
        else:
            raise FileSetError("%s: no free temporary name in its directory" % item.path)
        with os.fdopen(fd, "wb") as handle:
            handle.write(item.content)
            handle.flush()
            if uid is not None or gid is not None:
                os.fchown(handle.fileno(), -1 if uid is None else uid, -1 if gid is None else gid)
            # After the chown, which clears set-id bits.
            os.fchmod(handle.fileno(), mode)
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
            directory=dict(type="path", required=True),
            files=dict(type="dict", required=True),
            mode=dict(type="str", required=True),
            owner=dict(type="str"),
            group=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    written = []
    try:
        mode = _mode(params["mode"])
        uid, gid = _uid(params["owner"]), _gid(params["group"])
        if module.check_mode and not os.path.lexists(params["directory"]):
            # Check mode of a run that creates the directory first (as M(ansible.builtin.copy)
            # reports it): every file would be written.
            dir_fd = None
        else:
            dir_fd = _open_directory(params["directory"])
        try:
            planned = plan(dir_fd, params["directory"], params["files"])
            changes = [item for item in planned if item.needs_write(mode, uid, gid)]
            if not module.check_mode:
                for item in changes:
                    write(dir_fd, item, mode, uid, gid)
                    written.append(item.path)
                if written:
                    os.fsync(dir_fd)
        finally:
            if dir_fd is not None:
                os.close(dir_fd)
    except (FileSetError, OSError) as exc:
        module.fail_json(msg="file_set: %s" % exc, changed=bool(written), changed_files=written)
    result = dict(changed=bool(changes), changed_files=[item.path for item in changes])
    if module._diff:
        result["diff"] = [dict(before_header=item.path, after_header=item.path, before=_text(item.old),
                               after=_text(item.content)) for item in changes]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
