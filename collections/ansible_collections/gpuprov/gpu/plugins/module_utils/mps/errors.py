# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The one error type of MPS daemon handling."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class MpsError(Exception):
    """A failure to report to the user; the message names the GPU, path or daemon."""
