#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: Gather NVIDIA GPU, MIG and NUMA facts of a node
version_added: "0.1.0"
description:
  - Reads the node's NVIDIA GPUs through NVML (nvidia-ml-py) and returns them as the
    C(gpu_facts) fact - identity, memory, compute mode, MIG mode, GPU and compute instances
    with their placements, compute processes - together with the node's NUMA nodes from sysfs.
  - Read-only; it never changes anything, so check mode returns the same facts.
  - A node without the NVIDIA driver, without nvidia-ml-py or without GPUs is not an error;
    the facts say so (RV(ansible_facts.gpu_facts.driver_available) is V(false) with
    RV(ansible_facts.gpu_facts.driver_error) saying why).
  - A GPU that NVML cannot read (for example one that fell off the bus) is listed with its
    index and an C(error) message instead of failing the whole task.
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - gpuprov.gpu.attributes
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
  - gpuprov.gpu.nvml
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
    details: Nothing changes, so there is nothing to diff.
  facts:
    support: full
options:
  sysfs_root:
    description:
      - Where sysfs is mounted. NUMA nodes come from C(<sysfs_root>/devices/system/node) and
        each GPU's NUMA node from C(<sysfs_root>/bus/pci/devices/<address>/numa_node).
    type: path
    default: /sys
notes:
  - The GPU model key of the gpuprov catalog is not resolved here (the catalog lives on the
    controller); match RV(ansible_facts.gpu_facts.gpus[].name) or
    RV(ansible_facts.gpu_facts.gpus[].pci_device_id) against it.
seealso:
  - module: gpuprov.gpu.mig_mode
  - module: gpuprov.gpu.mig_layout
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpuprov.gpu.gpu_facts:

- name: Show the MIG instances of GPU 0
  ansible.builtin.debug:
    var: ansible_facts.gpu_facts.gpus[0].gpu_instances

- name: Fail early on nodes without a working driver
  ansible.builtin.assert:
    that: ansible_facts.gpu_facts.driver_available
    fail_msg: "{{ inventory_hostname }}: {{ ansible_facts.gpu_facts.driver_error }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    gpu_facts:
      description: The node's GPUs and NUMA nodes.
      returned: always
      type: dict
      contains:
        driver_available:
          description: Whether NVML could be used (driver loaded and nvidia-ml-py installed).
          type: bool
          sample: true
        driver_error:
          description: Why NVML could not be used, and what to do; null when it could.
          type: str
          sample: "initialising NVML failed: NVML Shared Library Not Found; install the NVIDIA driver"
        driver_version:
          description: The NVIDIA driver version.
          type: str
          sample: "550.54.15"
        cuda_driver_version:
          description: The newest CUDA version the driver supports.
          type: str
          sample: "12.4"
        gpu_count:
          description: Number of GPUs NVML reports.
          type: int
          sample: 2
        gpus:
          description: One entry per GPU, in NVML index order.
          type: list
          elements: dict
          contains:
            index:
              description: NVML index.
              type: int
            uuid:
              description: GPU UUID.
              type: str
              sample: GPU-e52c5ae4-83ac-56c8-84ba-f9cefa1236d3
            name:
              description: NVML product name.
              type: str
              sample: NVIDIA A100-SXM4-80GB
            pci_bus_id:
              description: PCI bus id as NVML writes it.
              type: str
              sample: "00000000:07:00.0"
            pci_device_id:
              description: PCI device id (without the vendor id).
              type: str
              sample: "0x20B2"
            memory_total_mib:
              description: Total memory in MiB.
              type: int
            memory_used_mib:
              description: Used memory in MiB.
              type: int
            compute_mode:
              description:
                - V(DEFAULT), V(EXCLUSIVE_PROCESS) or V(PROHIBITED).
                - Null on a GPU with MIG enabled, where NVML keeps the compute mode per MIG device
                  (see each compute instance's C(compute_mode) under C(gpu_instances)).
              type: str
            persistence_mode:
              description:
                - Whether persistence mode is on (nvidia-persistenced turns it on). Without it the
                  driver drops settings such as the compute mode when the last client leaves.
                - Null when NVML cannot say.
              type: bool
            compute_capability:
              description: CUDA compute capability.
              type: str
              sample: "8.0"
            mig_capable:
              description: Whether the GPU supports MIG.
              type: bool
            mig_mode_current:
              description: MIG mode in effect; null on a GPU without MIG.
              type: bool
            mig_mode_pending:
              description: MIG mode after the next GPU reset; null on a GPU without MIG.
              type: bool
            mig_profiles:
              description:
                - GPU-instance profiles NVML offers (only while MIG is enabled).
                - Missing when NVML refuses to list them (not root, or a driver without the call);
                  a warning then says why.
              type: list
              elements: dict
              returned: when MIG is enabled
            gpu_instances:
              description:
                - GPU instances with their placement (in memory slices) and compute instances.
                - Each compute instance carries the C(compute_mode) of its MIG device.
              type: list
              elements: dict
              sample:
                - id: 1
                  profile: 3g.40gb
                  profile_id: 9
                  placement: {start: 4, size: 4}
                  compute_instances:
                    - {id: 0, profile_id: 2, slices: 3, placement: {start: 0, size: 3}, compute_mode: DEFAULT}
            processes:
              description: Compute processes, with the GPU instance they run in under MIG (null when unknown).
              type: list
              elements: dict
              sample:
                - {pid: 4242, used_memory_mib: 1000, gpu_instance_id: 1}
            numa_node:
              description: NUMA node of the GPU from sysfs; null when the platform does not say.
              type: int
            error:
              description: Why the GPU could not be read; null when it could.
              type: str
        numa_nodes:
          description: NUMA nodes of the node with their CPUs, from sysfs.
          type: list
          elements: dict
          sample:
            - {id: 0, cpus: "0-15", cpu_list: [0, 1, 2]}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.gpu.plugins.module_utils.gpu_info import gather
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import NvmlError


def main():
    module = AnsibleModule(
        argument_spec=dict(sysfs_root=dict(type="path", default="/sys")),
        supports_check_mode=True,
    )
    try:
        facts, warnings = gather(sysfs_root=module.params["sysfs_root"])
    except NvmlError as exc:
        module.fail_json(msg="Reading the GPUs failed: %s" % exc, error=exc.as_dict())
    for warning in warnings:
        module.warn(warning)
    module.exit_json(changed=False, ansible_facts={"gpu_facts": facts})


if __name__ == "__main__":
    main()
