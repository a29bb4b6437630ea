# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Every folder from / down to a path, to check who could change any of them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: path_ancestors
short_description: Every folder from / down to an absolute path, the path last
version_added: "0.2.0"
author: gpuprov maintainers (@gpuprov)
description:
  - Returns C(/), then each folder below it on the way to the path, then the path itself,
    for a list of paths (without repeats, in order).
  - The gpu_mps role stats each of them before creating its pipe and log directories as root,
    so a folder another user can write to (where a link could be planted) is found first.
  - A relative path, or one with C(..) components, is refused.
options:
  _input:
    description: An absolute path, or a list of them.
    type: raw
    required: true
"""

EXAMPLES = r"""
- name: Look at every folder above the directory
  ansible.builtin.stat:
    path: "{{ item }}"
    follow: false
  loop: "{{ '/run/nvidia-mps' | gpuprov.gpu.path_ancestors }}"   # /, /run, /run/nvidia-mps
"""

RETURN = r"""
_value:
  description: The folders, C(/) first.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError


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


class FilterModule(object):
    def filters(self):
        return {"path_ancestors": path_ancestors}
