# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attribute every node-side module shares: it runs on the GPU node, a POSIX system.
    # List it before ansible.builtin.action_common_attributes, which declares the attributes:
    # where two fragments give the same attribute, the one merged first wins
    # (ansible/utils/plugin_docs.py, merge_fragment). Each module still states its own
    # check_mode and diff_mode support.
    DOCUMENTATION = r"""
options: {}
attributes:
  platform:
    support: full
    platforms: posix
"""
