# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What makes folders of code that root runs changeable by another user, from one stat(1)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: root_path_problems
short_description: Why another user could change the folders of code that root runs
version_added: "0.1.0"
author: gpuprov maintainers (@gpuprov)
description:
  - Reads the registered result of the command P(gpuprov.gpu.root_path_stat_argv#filter) builds
    and returns one line per problem; an empty list means root may write there.
  - "The rule, the same for the gpu_mig role's boot-time MIG restore and the gpu_mps role's start
    program: every existing folder from C(/) down to the own directories belongs to root and no
    one else can write to it, except sticky folders (such as C(/tmp)) above the own directories;
    none of the own directories is a symbolic link."
  - A path stat could not read for another reason than its absence (say C(Not a directory))
    is a problem, not taken as absent.
options:
  _input:
    description: The registered result of the stat command (its C(stdout_lines) and C(stderr_lines)).
    type: dict
    required: true
  own_dirs:
    description: The code's own directories (stat's other paths are the folders above them).
    type: list
    elements: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse directories another user could change
  ansible.builtin.assert:
    that: _problems | length == 0
    fail_msg: "{{ _problems | join('; ') }}"
  vars:
    _problems: "{{ _stats | gpuprov.gpu.root_path_problems(['/etc/gpuprov', '/usr/local/libexec/gpuprov']) }}"
"""

RETURN = r"""
_value:
  description: One sentence per kind of problem, naming the paths; empty when there is none.
  type: list
  elements: str
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.root_paths import root_path_problems


class FilterModule(object):
    def filters(self):
        return {"root_path_problems": root_path_problems}
