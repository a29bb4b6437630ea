# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # How mig_mode and mig_layout pick their GPUs (module_utils/mig_manager.py, select_gpus).
    # Both variants must stay plain string literals: ansible-test's yamllint sanity test reads
    # them from the syntax tree, so the shared lines are written twice, here only.

    # O(gpus) with default V(all) (mig_mode).
    DOCUMENTATION = r"""
options:
  gpus:
    description:
      - GPUs by NVML index (V("0"), V("1"), ...), or V(all).
      - V(all) skips GPUs without MIG support (reported in RV(skipped_gpus)), as mig-parted
        does for C(devices) V(all); naming such a GPU by index is an error.
    type: list
    elements: str
    default: [all]
"""

    # mig_layout: no default in the argument spec, since O(gpus) and O(devices) exclude each
    # other; left out, it means V(all).
    LAYOUT = r"""
options:
  gpus:
    description:
      - GPUs by NVML index (V("0"), V("1"), ...), or V(all).
      - V(all) skips GPUs without MIG support (reported in RV(skipped_gpus)), as mig-parted
        does for C(devices) V(all); naming such a GPU by index is an error.
      - Left out, V(all). Not used with O(devices), which names its GPUs itself.
    type: list
    elements: str
"""
