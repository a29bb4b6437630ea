# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The kubelet's KubeletConfiguration file, edited for CPU, topology and memory management.

One concept per file:

- ``fields``: the managed fields, their allowed values and the kubelet's defaults.
- ``quantities``: Kubernetes quantities and Go durations.
- ``settings``: the module's snake_case settings and their kubelet values.
- ``document``: the config file as a YAML node graph, edited key by key.
- ``validation``: the checks the kubelet applies when it reads the file.
- ``plan``: the new text for a set of settings, and whether state files must be reset.
- ``atomic_write``: writing the file atomically with a backup.

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
    CPU_MANAGER_STATE_FILE,
    DEFAULT_CONFIG_PATH,
    MEMORY_MANAGER_POLICIES,
    MEMORY_MANAGER_STATE_FILE,
    TOPOLOGY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_SCOPES,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.plan import (  # noqa: F401
    KubeletConfigPlan,
    plan_change,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.quantities import (  # noqa: F401
    parse_quantity,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.settings import (  # noqa: F401
    KubeletSettings,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.validation import (  # noqa: F401
    NodeTopology,
    validate_config,
)
