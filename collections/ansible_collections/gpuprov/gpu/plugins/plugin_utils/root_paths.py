# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Who could change the folders of code that root runs on a node, from one stat(1) command.

The gpu_mig role's boot-time MIG restore and the gpu_mps role's start program run as root:
whoever can change their program, node-side code or settings, or a folder above them, runs code
as root. Both roles read every folder with one ``stat`` (filter ``root_path_stat_argv``, with
``STAT_FORMAT`` below) and refuse what ``root_path_problems`` finds, before anything is
written. module_utils/path_trust.py holds the rule (root_entry_problems) and applies it inside
modules from lstat(2) too (file_set's require_root_folders).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.module_utils.path_trust import root_entry_problems

# %n name, %u owner uid, %04a octal mode with the sticky/setuid digit, %F file type.
STAT_FORMAT = '{"item": "%n", "uid": %u, "mode": "%04a", "type": "%F"}\n'
LINK_TYPE = "symbolic link"
ABSENT = re.compile(r": No such file or directory$")


def path_ancestors(paths):
    """/, each folder below it on the way to each path, then the path (no repeats, in order)."""
    result = []
    for path in [paths] if isinstance(paths, str) else list(paths):
        path = str(path)
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if not path.startswith("/") or ".." in parts:
            raise AnsibleFilterError("path_ancestors: %r is not an absolute path without '..'" % path)
        current = "/"
        candidates = ["/"]
        for part in parts:
            current = current.rstrip("/") + "/" + part
            candidates.append(current)
        result.extend(c for c in candidates if c not in result)
    return result


def stat_argv(directories):
    """stat(1) printing STAT_FORMAT for every folder from / down to ``directories``."""
    return ["stat", "--printf", STAT_FORMAT, "--"] + path_ancestors(directories)


def root_path_problems(result, own_dirs):
    """One line per problem (empty: root may write there), by path_trust.root_entry_problems's
    rule: every existing folder from / down to the code's own directories belongs to root and
    no one else can write to it, except sticky folders (such as /tmp) above the own directories;
    none of the own directories is a symbolic link; a path stat could not read for another
    reason than its absence is a problem, not taken as absent.
    """
    if not isinstance(result, dict) or "stdout_lines" not in result:
        raise AnsibleFilterError("root_path_problems: expects the registered result of root_path_stat_argv's command")
    entries = []
    for line in result.get("stdout_lines") or []:
        try:
            entry = json.loads(line)
        except ValueError:
            raise AnsibleFilterError("root_path_problems: stat printed a line that is not its JSON format: %r" % line)
        if not isinstance(entry, dict) or not re.fullmatch(r"[0-7]{4}", str(entry.get("mode"))):
            raise AnsibleFilterError("root_path_problems: stat printed an entry without a four-digit mode: %r" % line)
        entries.append((entry["item"], entry.get("uid"), int(entry["mode"], 8), entry.get("type") == LINK_TYPE))
    unread = [line for line in result.get("stderr_lines") or [] if not ABSENT.search(line)]
    return root_entry_problems(entries, [str(path) for path in own_dirs], unread, reader="stat(1)")
