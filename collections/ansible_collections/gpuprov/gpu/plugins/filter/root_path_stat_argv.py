# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""One stat(1) command for every folder from / down to some directories."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: root_path_stat_argv
short_description: The stat(1) command that reads every folder from / down to some directories
version_added: "0.1.0"
author: gpuprov maintainers (@gpuprov)
description:
  - Returns the argv of one C(stat) command (GNU coreutils) that prints one JSON line per path
    that exists (C(item), C(uid), C(mode) as four octal digits, C(type)) for every folder from
    C(/) down to each given directory, without following links; a path that does not exist
    prints C(No such file or directory) on stderr and makes stat exit 1.
  - Its registered result goes to P(gpuprov.gpu.root_path_problems#filter), which holds the rule.
  - "The roles check the paths to letters, digits and C(_ . / + @ : -) before (a double quote or
    a backslash would break the JSON line)."
options:
  _input:
    description: The directories (absolute paths without C(..)).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Look at the directories and every folder above them
  ansible.builtin.command:
    argv: "{{ ['/etc/gpuprov', '/usr/local/libexec/gpuprov'] | gpuprov.gpu.root_path_stat_argv }}"
  environment:
    LC_ALL: C
  changed_when: false
  failed_when: _stats.rc not in [0, 1]
  register: _stats
"""

RETURN = r"""
_value:
  description: C(stat), its options, C(--), then the folders (C(/) first, no repeats).
  type: list
  elements: str
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.root_paths import stat_argv


class FilterModule(object):
    def filters(self):
        return {"root_path_stat_argv": stat_argv}
