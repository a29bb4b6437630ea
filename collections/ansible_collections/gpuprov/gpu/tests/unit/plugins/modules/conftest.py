# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fixtures for tests that need a fake GPU node (fake pynvml first on sys.path)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.nvml_node import (  # noqa: F401
    fake_node,
    run_module,
)

__all__ = ["fake_node", "run_module"]
