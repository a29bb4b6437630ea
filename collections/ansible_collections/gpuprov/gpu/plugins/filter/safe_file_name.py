# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A host name as a file name that cannot leave its folder."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: safe_file_name
short_description: A host name as a file name that stays in its folder
version_added: "0.1.0"
author: gpuprov maintainers (@gpuprov)
description:
  - Returns the input unchanged when it is a plain file name (letters, digits, C(_), C(.), C(-),
    not starting with C(.), at most 100 characters).
  - Otherwise every other character becomes C(_) and a short hash of the original is
    appended, so C(../../etc/x) can never name a file outside the folder it is joined to and
    two different names never share a file.
  - C(gpuprov status) and C(gpuprov baseline) find the files by the same rule.
options:
  _input:
    description: The name, usually C(inventory_hostname).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Write one file per host on the controller
  ansible.builtin.copy:
    content: "{{ result | to_json }}"
    dest: "{{ out_dir }}/{{ inventory_hostname | gpuprov.gpu.safe_file_name }}.json"
    mode: "0600"
  delegate_to: localhost
"""

RETURN = r"""
_value:
  description: The file name.
  type: str
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.file_names import safe_file_name


class FilterModule(object):
    def filters(self):
        return {"safe_file_name": safe_file_name}
