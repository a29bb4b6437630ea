# -*- coding: utf-8 -*-
"""path_ancestors: every folder from / down to a path, for the gpu_mps role's no-follow checks."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.filter.path_ancestors import path_ancestors


def test_every_folder_once_root_first():
    assert path_ancestors("/run/nvidia-mps") == ["/", "/run", "/run/nvidia-mps"]
    assert path_ancestors(["/etc/gpuprov", "/etc/gpuprov/x", "/var/./log"]) == [
        "/", "/etc", "/etc/gpuprov", "/etc/gpuprov/x", "/var", "/var/log"]


@pytest.mark.parametrize("bad", ["etc/gpuprov", "/etc/../tmp", ""])
def test_a_relative_path_or_one_with_dotdot_is_refused(bad):
    with pytest.raises(AnsibleFilterError, match="not an absolute path"):
        path_ancestors([bad])
