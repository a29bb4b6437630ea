# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Run modules in tests as they run on a node.

ansible-core marks a process as "the controller" as soon as controller code is imported
(ansible._internal), and from then on module warnings go to the controller's display instead
of into the module result. On a node that never happens; in one pytest process that also
tests filters and action plugins it does. Module tests therefore run with the flag as a node
has it.

The fake GPU node (``fake_node``: fake pynvml first on sys.path, its state under the test's
tmp_path) and ``run_module`` come from plugins/module_utils/nvml_node.py, for the module and
module_utils tests.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.nvml_node import (  # noqa: F401
    fake_node,
    run_module,
)

__all__ = ["fake_node", "run_module"]


@pytest.fixture(autouse=True)
def node_side_module_process(monkeypatch):
    from ansible.module_utils import _internal

    monkeypatch.setattr(_internal, "is_controller", False)
