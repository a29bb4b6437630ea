# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Where the repository's fakes (pynvml, nvidia-smi, nvidia-cuda-mps-control) are.

The repository's root conftest.py names the folder in ``GPUPROV_FAKES_DIR``; nothing here
searches the file system for it. Outside the repository (an installed collection, or
``ansible-test units`` in its own copy) the variable is unset and the tests that need the
fakes skip.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

FAKES_DIR_ENV = "GPUPROV_FAKES_DIR"


def fakes_dir(needs):
    """The fakes folder when it holds ``needs`` (a path inside it), else None."""
    path = os.environ.get(FAKES_DIR_ENV)
    if path and os.path.exists(os.path.join(path, needs)):
        return path
    return None
