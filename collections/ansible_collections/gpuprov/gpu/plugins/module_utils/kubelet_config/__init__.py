# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The kubelet's KubeletConfiguration file, edited for CPU, topology and memory management.

One concept per file:

- ``fields``: the managed fields, their allowed values and the kubelet's defaults.
- ``grammar``: the kubelet's value syntaxes (Go durations, booleans, integers, cpusets,
  Kubernetes quantities), read as its Go code reads them.
- ``settings``: the module's snake_case settings, their kubelet values, and the kubelet's rules
  for them before any node is read (``gpuprov plan``).
- ``document``: the config file as a YAML node graph, edited key by key.
- ``layers``: the main file and the ``--config-dir`` drop-ins, merged as the kubelet merges them.
- ``validation``: the checks the kubelet applies when it reads and starts with the config.
- ``checkpoints``: which changes invalidate ``cpu_manager_state`` / ``memory_manager_state``.
- ``configz``: what the kubelet's ``/configz`` shows for the managed keys; comparing by meaning.
- ``plan``: the new text for a set of settings, and whether state files must be reset.
- ``launch``: the kubelet's unit, its flags, and the flags that override managed keys.
- ``versions``: what each kubelet release accepts.
- ``atomic_write``: writing the file atomically with a backup.
- ``errors``: ``KubeletConfigError``, the error every part raises.

tests/unit/plugins/module_utils/test_kubelet_peer_*.py hold these against the kubelet's own code
(the Go peers of the repository's tests/peers).

The names the ``kubelet_config`` module uses are re-exported here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.atomic_write import (  # noqa: F401
    backup_path_for,
    write_file_atomic,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.document import (  # noqa: F401
    HAS_YAML,
    KubeletConfigDocument,
    YAML_IMPORT_ERROR,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.errors import (  # noqa: F401
    KubeletConfigError,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.fields import (  # noqa: F401
    CPU_MANAGER_POLICIES,
    DEFAULT_CONFIG_PATH,
    MEMORY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_SCOPES,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.plan import (  # noqa: F401
    KubeletConfigPlan,
    plan_change,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.settings import (  # noqa: F401
    KubeletSettings,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.validation import (  # noqa: F401
    NodeTopology,
    validate_config,
)
