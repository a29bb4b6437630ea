#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_launch
short_description: Find the config files and flags the kubelet really runs with
version_added: "0.2.0"
description:
  - Reads the kubelet's systemd unit, the unit's drop-ins (kubeadm's C(10-kubeadm.conf)) and
    the environment files they load (kubeadm's C(/var/lib/kubelet/kubeadm-flags.env),
    C(/etc/default/kubelet), Kubespray's C(/etc/kubernetes/kubelet.env)), and returns the
    kubelet's command line with the C(--config) file, the C(--config-dir) drop-in directory
    and every flag, each with the file it came from.
  - Flags override the config file and its drop-ins. When a flag sets one of
    O(managed_keys), the module fails naming the file and the flag, before anything is
    changed.
  - Says whether kubeadm or Kubespray manages the node, and asks the kubelet binary of the
    unit for its version (C(kubelet --version)).
  - Reads only; never changes anything.
author: gpuprov maintainers (@gpuprov)
attributes:
  check_mode:
    description: Reads only, so it runs the same in check mode.
    support: full
  diff_mode:
    description: Nothing to diff.
    support: none
  platform:
    description: Linux nodes running the kubelet under systemd.
    support: full
    platforms: posix
options:
  service:
    description: The kubelet's systemd unit.
    type: str
    default: kubelet.service
  root:
    description: Where the node's file system is mounted; paths read and returned are under
      it. Tests point it at a fake tree; on a node leave the default.
    type: path
    default: /
  managed_keys:
    description: KubeletConfiguration keys (dotted, such as C(kubeReserved.cpu)) that gpuprov
      manages; a flag setting one of them fails the module.
    type: list
    elements: str
    default: []
  read_version:
    description: Run the unit's kubelet binary with C(--version).
    type: bool
    default: true
seealso:
  - module: gpuprov.gpu.kubelet_config
"""

EXAMPLES = r"""
- name: Find the kubelet's config and refuse flags that override the managed keys
  gpuprov.gpu.kubelet_launch:
    managed_keys: [cpuManagerPolicy, topologyManagerPolicy, reservedSystemCPUs]
  register: kubelet_launch
"""

RETURN = r"""
found:
  description: A unit file for O(service) exists.
  returned: always
  type: bool
config:
  description: The kubelet's C(--config) file; null when it has none.
  returned: always
  type: str
  sample: /var/lib/kubelet/config.yaml
config_dir:
  description: The kubelet's C(--config-dir); null when it has none.
  returned: always
  type: str
  sample: /etc/kubernetes/kubelet.conf.d
manager:
  description: V(kubeadm), V(kubespray) or V(unknown), from the files the unit loads.
  returned: always
  type: str
flags:
  description: Every flag on the kubelet's command line and the file that supplied it.
  returned: always
  type: list
  elements: dict
  sample: [{flag: --config, value: /var/lib/kubelet/config.yaml, layer: /etc/systemd/system/kubelet.service.d/10-kubeadm.conf}]
layers:
  description: The unit, drop-ins and environment files read, in order.
  returned: always
  type: list
  elements: str
kubelet_version:
  description: The kubelet's version (C(v1.31.2)), null when it could not be read.
  returned: always
  type: str
conflicts:
  description: One line per flag that overrides a managed key, naming its file.
  returned: failure
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.errors import KubeletConfigError
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.launch import (
    kubelet_version,
    launch_answer,
    read_launch,
    refuse_conflicts,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.systemd_unit import unit_name


def main():
    module = AnsibleModule(
        argument_spec=dict(
            service=dict(type="str", default="kubelet.service"),
            root=dict(type="path", default="/"),
            managed_keys=dict(type="list", elements="str", default=[], no_log=False),
            read_version=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    try:
        service = unit_name(module.params["service"])
    except ValueError as exc:
        module.fail_json(msg="service: %s" % exc)
    try:
        launch = read_launch(service, root=module.params["root"])
    except (IOError, OSError, ValueError) as exc:
        module.fail_json(msg="cannot read how %s starts the kubelet: %s" % (service, exc))

    version = None
    if module.params["read_version"]:
        version = kubelet_version(launch["binary"], module.params["root"], module.run_command)

    result = dict(launch_answer(launch, version), changed=False)
    try:
        refuse_conflicts(launch, module.params["managed_keys"])
    except KubeletConfigError as exc:
        module.fail_json(msg=str(exc), conflicts=exc.errors, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
