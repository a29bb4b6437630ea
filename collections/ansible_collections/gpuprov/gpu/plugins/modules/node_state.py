#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_state
short_description: Read a GPU node's GPUs, kubelet config, MPS daemon and MIG boot restore in one call
version_added: "0.2.0"
description:
  - Reads, in one round trip, everything a gpuprov plan governs on a node, with the same code
    as the modules that converge it. GPU facts as M(gpuprov.gpu.gpu_facts) returns them; the
    kubelet config keys M(gpuprov.gpu.kubelet_config) would change for O(kubelet.settings);
    whether the host MPS control daemon runs with the compute mode and limits of O(mps) (as
    M(gpuprov.gpu.mps_daemon) in check mode); and the boot-time MIG restore's unit, state
    file and installed files.
  - Read-only; it never changes anything.
  - M(gpuprov.gpu.node_plan) with O(gpuprov.gpu.node_plan#module:read_node=true) runs this module with
    arguments taken from the node's plan, and compares the result with the plan in the same task.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
requirements:
  - nvidia-ml-py (the C(pynvml) module) on the node, for GPU facts
  - PyYAML on the node, when O(kubelet) is given
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
    details: Nothing changes, so there is nothing to diff.
  facts:
    support: full
  platform:
    support: full
    platforms: posix
options:
  sysfs_root:
    description:
      - Where sysfs is mounted (NUMA nodes of the GPU facts, CPU topology of the kubelet check).
    type: path
    default: /sys
  kubelet:
    description:
      - Compare the kubelet config file with these settings. Omitted, the kubelet is not read.
    type: dict
    suboptions:
      path:
        description:
          - The kubelet config file. Default, the C(--config) of the kubelet's unit, else
            C(/var/lib/kubelet/config.yaml).
        type: path
      service:
        description:
          - The kubelet's systemd unit; its unit file, drop-ins and environment files say
            which config file and drop-in directory the kubelet reads (as
            M(gpuprov.gpu.kubelet_launch) finds them).
        type: str
        default: kubelet.service
      config_dir:
        description: The kubelet's drop-in directory, when not the one of its unit.
        type: path
      settings:
        description:
          - The managed settings, with the option names of M(gpuprov.gpu.kubelet_config)
            (for example C(cpu_manager_policy), C(reserved_system_cpus)).
        type: dict
        required: true
  mps:
    description:
      - Check the host MPS control daemon against these limits. Omitted, MPS is not read.
    type: dict
    suboptions:
      service:
        description: The systemd unit that runs the daemon.
        type: str
      pipe_directory:
        description: The daemon's pipe directory.
        type: path
        default: /tmp/nvidia-mps
      log_directory:
        description: The daemon's log directory.
        type: path
        default: /var/log/nvidia-mps
      active_thread_percentage:
        description: The default active thread percentage the daemon should have.
        type: float
      pinned_memory_limit:
        description: The default pinned device memory limit, as M(gpuprov.gpu.mps_daemon) takes it.
        type: raw
      timeout:
        description: Seconds each call of the MPS control client may take.
        type: int
        default: 30
  mig_restore:
    description:
      - Read the boot-time MIG restore. Omitted, it is not read.
    type: dict
    suboptions:
      unit:
        description: The restore's systemd unit name.
        type: str
        required: true
      unit_path:
        description: The unit file.
        type: path
        required: true
      state_file:
        description: The recorded MIG state file.
        type: path
        required: true
      paths:
        description:
          - Files and directories to describe (type, mode, SHA-1), without following links.
        type: list
        elements: path
        default: []
seealso:
  - module: gpuprov.gpu.node_plan
  - module: gpuprov.gpu.gpu_facts
  - module: gpuprov.gpu.kubelet_config
  - module: gpuprov.gpu.mps_daemon
"""

EXAMPLES = r"""
- name: Read the node against a NUMA-aligned kubelet and the MIG restore
  gpuprov.gpu.node_state:
    kubelet:
      settings:
        cpu_manager_policy: static
        topology_manager_policy: single-numa-node
    mig_restore:
      unit: gpuprov-mig-restore.service
      unit_path: /etc/systemd/system/gpuprov-mig-restore.service
      state_file: /etc/gpuprov/mig-state.json
  register: node

- name: Show the kubelet keys that differ
  ansible.builtin.debug:
    var: node.kubelet.changed_keys
"""

RETURN = r"""
ansible_facts:
  description: The node's GPU facts, as M(gpuprov.gpu.gpu_facts) returns them.
  returned: always
  type: dict
  contains:
    gpu_facts:
      description: See M(gpuprov.gpu.gpu_facts).
      type: dict
      returned: always
kubelet:
  description:
    - C(changed_keys), the kubelet config keys that differ from O(kubelet.settings), and
      C(error), why the file could not be compared (null when it could).
  returned: when O(kubelet) is given
  type: dict
mps:
  description:
    - C(running), whether the daemon answers; C(changed), whether compute mode or limits
      differ; C(error), why the daemon could not be checked (null when it could).
    - C(differences), each difference in words (for example C(active thread percentage 100
      (plan 25))); C(without_limits), whether the daemon runs with MPS's own defaults while
      the plan sets limits, as after a start that did not set them.
  returned: when O(mps) is given
  type: dict
mig_restore:
  description:
    - C(unit), C(unit_exists), C(unit_enabled) (systemd's UnitFileState, null without a unit),
      C(state_text) (the state file, null when missing), C(files) (one C({path, exists, isdir,
      islnk, mode, checksum}) per O(mig_restore.paths) entry) and C(error).
  returned: when O(mig_restore) is given
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.gpu.plugins.module_utils.gpu_info import gather
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import HAS_YAML
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.constants import (
    DEFAULT_LOG_DIRECTORY,
    DEFAULT_PIPE_DIRECTORY,
    MPS_CONTROL,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.runners import ModuleRunner
from ansible_collections.gpuprov.gpu.plugins.module_utils.node_reader import (
    mps_params,
    read_kubelet,
    read_mig_restore,
    read_mps,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import NvmlError
from ansible_collections.gpuprov.gpu.plugins.module_utils.systemd_unit import unit_name


def argument_spec():
    return dict(
        sysfs_root=dict(type="path", default="/sys"),
        kubelet=dict(type="dict", options=dict(
            path=dict(type="path"),
            service=dict(type="str", default="kubelet.service"),
            config_dir=dict(type="path"),
            settings=dict(type="dict", required=True),
        )),
        mps=dict(type="dict", options=dict(
            service=dict(type="str"),
            pipe_directory=dict(type="path", default=DEFAULT_PIPE_DIRECTORY),
            log_directory=dict(type="path", default=DEFAULT_LOG_DIRECTORY),
            active_thread_percentage=dict(type="float"),
            pinned_memory_limit=dict(type="raw"),
            timeout=dict(type="int", default=30),
        )),
        mig_restore=dict(type="dict", options=dict(
            unit=dict(type="str", required=True),
            unit_path=dict(type="path", required=True),
            state_file=dict(type="path", required=True),
            paths=dict(type="list", elements="path", default=[]),
        )),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    try:
        facts, warnings = gather(sysfs_root=params["sysfs_root"])
    except NvmlError as exc:
        module.fail_json(msg="Reading the GPUs failed: %s" % exc, error=exc.as_dict())
    for warning in warnings:
        module.warn(warning)
    result = dict(changed=False, ansible_facts={"gpu_facts": facts})

    kubelet = params["kubelet"]
    if kubelet is not None:
        if HAS_YAML:
            try:
                service = unit_name(kubelet["service"])
            except ValueError as exc:
                module.fail_json(msg="kubelet.service: %s" % exc)
            result["kubelet"] = read_kubelet(kubelet["path"], kubelet["settings"], params["sysfs_root"], service,
                                             config_dir=kubelet["config_dir"])
        else:
            result["kubelet"] = {"changed_keys": [], "error": "PyYAML is not installed on the node"}

    mps = params["mps"]
    if mps is not None:
        if mps["timeout"] < 1:
            module.fail_json(msg="mps.timeout must be at least 1 second, got %d" % mps["timeout"])
        result["mps"] = read_mps(
            mps_params(mps["service"], mps["pipe_directory"], mps["log_directory"],
                       mps["active_thread_percentage"], mps["pinned_memory_limit"]),
            ModuleRunner(module, mps["timeout"]), module.get_bin_path(MPS_CONTROL), module.warn)

    restore = params["mig_restore"]
    if restore is not None:
        result["mig_restore"] = read_mig_restore(
            lambda argv: module.run_command(argv, check_rc=False), module.get_bin_path("systemctl"),
            restore["unit"], restore["unit_path"], restore["state_file"], restore["paths"])

    module.exit_json(**result)


if __name__ == "__main__":
    main()
