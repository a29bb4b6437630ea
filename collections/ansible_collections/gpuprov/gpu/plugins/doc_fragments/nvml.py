# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # What a module that reads or changes GPUs through NVML (module_utils/nvml.py) needs on
    # the node. Ansible merges these requirements with the module's own.
    DOCUMENTATION = r"""
options: {}
requirements:
  - nvidia-ml-py (the C(pynvml) module) and the NVIDIA driver on the node
"""
