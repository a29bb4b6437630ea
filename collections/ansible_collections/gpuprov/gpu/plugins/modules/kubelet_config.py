#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kubelet_config
short_description: Set the kubelet's CPU, Topology and Memory Manager settings
version_added: "0.1.0"
description:
  - Edits the KubeletConfiguration file (C(kubelet.config.k8s.io/v1beta1)) that the kubelet
    reads with C(--config), setting only the CPU Manager, Topology Manager, Memory Manager and
    CPU reservation keys given, and leaving every other key, its order and its quoting as it
    was.
  - Options left unset (null) are not managed. An empty value removes the key from the file
    (V({}) for the option maps, V([]) for O(reserved_memory), an empty string for
    O(reserved_system_cpus), O(kube_reserved_cpu) and O(system_reserved_cpu)).
  - Validates the config as the kubelet will see it after the change and fails, naming each
    field, when the kubelet would refuse to start. Checks enum values, known policy option
    names and their value types, that C(cpuManagerPolicy=static) has CPUs reserved
    (C(reservedSystemCPUs) or C(kubeReserved.cpu) + C(systemReserved.cpu) above zero), that
    C(reservedSystemCPUs) names CPUs online on this node, and that with
    C(memoryManagerPolicy=Static) the C(reservedMemory) sum over NUMA nodes equals
    C(kubeReserved.memory) + C(systemReserved.memory) + C(evictionHard) C(memory.available)
    (100Mi when unset).
  - Reports whether the kubelet's C(cpu_manager_state) or C(memory_manager_state) checkpoint
    must be deleted before the kubelet restarts. That is needed whenever the effective
    C(cpuManagerPolicy) (default C(none)) or C(memoryManagerPolicy) (default C(None)) changes;
    the kubelet otherwise crash-loops. This module does not restart the kubelet or touch the
    checkpoints; the P(gpuprov.gpu.kubelet_topology#role) role does, draining the node first.
  - Reports the same when, under the static CPU policy, the reserved CPUs grow or move
    (C(reservedSystemCPUs), or without it the rounded-up count of C(kubeReserved.cpu) +
    C(systemReserved.cpu)), change at all under C(strict-cpu-reservation), or that option
    changes; and when, under the Static memory policy, the reservation per NUMA node
    (C(reservedMemory)) changes. RV(cpu_manager_state_reset_reasons) and
    RV(memory_manager_state_reset_reasons) say why. These follow the kubelet's CPU and Memory
    Managers (kubernetes 1.37), which refuse such checkpoints at start.
  - Values are read by the kubelet's own syntaxes (Go durations, C(strconv) booleans and
    integers, its cpuset parser, Kubernetes quantities; ASCII digits, no spaces), and
    C(reservedSystemCPUs) together with C(kubeReservedCgroup) or C(systemReservedCgroup) is
    refused, as the kubelet refuses it.
  - With O(config_dir) (the kubelet's C(--config-dir)), the managed keys go into
    C(<config_dir>/50-gpuprov.conf), a KubeletConfiguration holding only those keys, and the
    main file O(path) is only read, so that C(kubeadm upgrade) or a Kubespray run that rewrites
    the main file does not undo them. Validation and the checkpoint resets use the config the
    kubelet builds - the main file with its default C(evictionHard) when it has none, then
    every C(*.conf) under the directory, subfolders included, in the order the kubelet walks
    them, each as a JSON merge patch. A drop-in merged after the file written here that sets
    a managed key to another value is refused,
    naming it.
  - With O(kubelet_version), policy options that release does not know, or knows only behind
    a feature gate that is off, are refused. On a node with more NUMA nodes than the Topology
    Manager allows (8, or C(max-allowable-numa-nodes)) a topology policy is refused.
  - The file is written atomically with Ansible's C(atomic_move) (temporary file in the same
    directory, rename; owner, mode, SELinux context and attributes kept), and only when a
    managed value changes. A symlinked config is written through to its target and the link
    kept, but only when every folder and link on the way belongs to root (or the user running
    the module) and no one else can write to those folders (sticky folders such as C(/tmp)
    excepted for entries of root); otherwise the change is refused, also in check mode. A path
    that is a FIFO, a device or a directory is refused without being opened; an empty file or
    a document that is not a C(kubelet.config.k8s.io/v1beta1) C(KubeletConfiguration) is
    refused rather than rewritten.
  - PyYAML drops comments, so a rewritten file loses the comments it had; O(backup) keeps the
    previous file. A file in kubeadm's layout otherwise keeps every unmanaged line byte for
    byte; other layouts are normalised to two-space indentation.
author: gpuprov maintainers (@gpuprov)
requirements:
  - PyYAML
attributes:
  check_mode:
    description: Reports the change, the diff and the checkpoint resets without writing.
    support: full
  diff_mode:
    description: Returns the file before and after.
    support: full
  platform:
    description: Linux nodes; the topology is read from sysfs.
    support: full
    platforms: posix
options:
  path:
    description:
      - The kubelet config file (C(--config)). It must exist; this module does not create a
        config from nothing.
      - Unset, the C(--config) of O(service) when it is set and its unit names one, else
        C(/var/lib/kubelet/config.yaml).
    type: path
  service:
    description:
      - The kubelet's systemd unit (V(kubelet) or V(kubelet.service)). With it the module
        first reads how the unit starts the kubelet, as M(gpuprov.gpu.kubelet_launch) does (the
        unit file, its drop-ins and environment files), and fails, naming the file, when a flag
        there overrides a managed key (flags win over the config file), or when O(path) is not
        the unit's C(--config) (editing it would change nothing).
      - O(path), O(config_dir) and O(kubelet_version) left unset then come from the unit's
        C(--config), C(--config-dir) and C(kubelet --version); RV(launch) says what was found.
      - Unset, the unit is not read.
    type: str
    version_added: "0.2.0"
  launch_root:
    description:
      - The root the unit's files and the kubelet binary are looked up under with O(service)
        (a node image mounted elsewhere); the paths the unit names are taken under it too.
    type: path
    default: /
    version_added: "0.2.0"
  config_dir:
    description:
      - The kubelet's C(--config-dir). With it the managed keys are written to
        C(<config_dir>/50-gpuprov.conf) (see O(drop_in)) and the drop-ins are merged over
        O(path) for validation and reset detection.
    type: path
  drop_in:
    description:
      - Write the managed keys into C(<config_dir>/50-gpuprov.conf) and leave O(path)
        untouched. Defaults to true when O(config_dir) is set. V(false) edits O(path) in place
        and refuses when a drop-in overrides a managed key.
    type: bool
  kubelet_version:
    description:
      - The kubelet's version, such as V(1.31) or V(v1.31.2) (C(kubelet --version)). Options
        this release refuses are errors. Unset, no version checks are made.
    type: str
  cpu_manager_policy:
    description: C(cpuManagerPolicy). V(static) gives Guaranteed pods with integer CPU
      requests exclusive CPUs.
    type: str
    choices: [none, static]
  cpu_manager_policy_options:
    description:
      - C(cpuManagerPolicyOptions), option name to value. Booleans are written as the
        strings V("true") / V("false") the kubelet expects.
      - Known options are V(full-pcpus-only), V(distribute-cpus-across-numa),
        V(strict-cpu-reservation), V(prefer-align-cpus-by-uncorecache), V(align-by-socket)
        and V(distribute-cpus-across-cores); all take booleans and need
        O(cpu_manager_policy=static).
    type: dict
  cpu_manager_reconcile_period:
    description: C(cpuManagerReconcilePeriod), a Go duration such as V(10s).
    type: str
  topology_manager_policy:
    description: C(topologyManagerPolicy).
    type: str
    choices: [none, best-effort, restricted, single-numa-node]
  topology_manager_scope:
    description: C(topologyManagerScope).
    type: str
    choices: [container, pod]
  topology_manager_policy_options:
    description:
      - C(topologyManagerPolicyOptions). Known options are V(prefer-closest-numa-nodes)
        (boolean), V(max-allowable-numa-nodes) (integer above 8) and
        V(numa-allocation-strategy) (string, alpha).
    type: dict
  reserved_system_cpus:
    description:
      - C(reservedSystemCPUs), a cpuset such as V(0-1,32-33); each CPU must be online on the
        node. A CPU listed twice is an error.
      - V(auto) reserves the first physical core, with all its hyperthreads, of every NUMA node
        that has more than one core, so no NUMA node loses all its CPUs and the reservation
        stays whole cores. The CPUs are read from sysfs under O(sysfs_root); the result is
        returned as RV(reserved_system_cpus).
    type: str
  kube_reserved_cpu:
    description: C(kubeReserved.cpu), a quantity such as V(500m). Other C(kubeReserved) keys
      are left alone.
    type: str
  system_reserved_cpu:
    description: C(systemReserved.cpu), a quantity such as V(1). Other C(systemReserved) keys
      are left alone.
    type: str
  memory_manager_policy:
    description: C(memoryManagerPolicy). V(Static) needs O(reserved_memory).
    type: str
    choices: [None, Static]
  reserved_memory:
    description: C(reservedMemory), the memory reserved per NUMA node.
    type: list
    elements: dict
    suboptions:
      numa_node:
        description: NUMA node number; it must exist on the node.
        type: int
        required: true
      limits:
        description: 'Resource name to quantity, for example V({memory: 1Gi, hugepages-1Gi: 0}).'
        type: dict
        required: true
  backup:
    description:
      - Copy the previous file to C(<path>.<pid>.<timestamp>~) before writing. The
        P(gpuprov.gpu.kubelet_topology#role) role restores from it when the kubelet does not
        come back.
    type: bool
    default: true
  sysfs_root:
    description:
      - Where sysfs is mounted. The CPU and NUMA topology is read from
        C(<sysfs_root>/devices/system/cpu) and C(<sysfs_root>/devices/system/node). Tests
        point it at a fake tree; on a node leave the default.
    type: path
    default: /sys
notes:
  - Restart the kubelet after a change, and delete the checkpoints this module reports first
    (drain, stop kubelet, delete, start), as the Kubernetes CPU management docs describe.
seealso:
  - name: Control CPU Management Policies on the Node
    description: The CPU Manager, its policies and the state-file reset.
    link: https://kubernetes.io/docs/tasks/administer-cluster/cpu-management-policies/
  - name: Control Topology Management Policies on a node
    description: Topology Manager policies, scope and options.
    link: https://kubernetes.io/docs/tasks/administer-cluster/topology-manager/
"""

EXAMPLES = r"""
- name: NUMA-aligned kubelet with one core per NUMA node reserved
  gpuprov.gpu.kubelet_config:
    cpu_manager_policy: static
    cpu_manager_policy_options:
      full-pcpus-only: true
    topology_manager_policy: single-numa-node
    topology_manager_scope: pod
    reserved_system_cpus: auto
  register: kubelet_change

- name: Static Memory Manager; 256Mi + 512Mi reserved + 100Mi eviction = 868Mi over 2 nodes
  gpuprov.gpu.kubelet_config:
    memory_manager_policy: Static
    reserved_memory:
      - numa_node: 0
        limits:
          memory: 434Mi
      - numa_node: 1
        limits:
          memory: 434Mi

- name: Back to the default CPU Manager, dropping the options and the CPU reservation
  gpuprov.gpu.kubelet_config:
    path: /etc/kubernetes/kubelet-config.yaml
    cpu_manager_policy: none
    cpu_manager_policy_options: {}
    reserved_system_cpus: ""
"""

RETURN = r"""
changed_keys:
  description: The config keys this run set or removed, as dotted paths.
  returned: always
  type: list
  elements: str
  sample: [cpuManagerPolicy, reservedSystemCPUs, kubeReserved.cpu]
backup_file:
  description: The copy of the previous file; absent when nothing was written or O(backup=false).
  returned: changed and not check mode and backup
  type: str
  sample: /var/lib/kubelet/config.yaml.4242.2026-01-30@10:02:11~
path:
  description: The file this run writes (or would write), O(path) or the drop-in in
    O(config_dir).
  returned: always
  type: str
  sample: /var/lib/kubelet/config.yaml
config_file:
  description: The kubelet's main config file this run read (O(path), or the unit's C(--config)).
  returned: always
  type: str
  sample: /var/lib/kubelet/config.yaml
  version_added: "0.2.0"
config_dir:
  description: The drop-in directory this run merged (O(config_dir), or the unit's C(--config-dir)); null when none.
  returned: always
  type: str
  sample: /etc/kubernetes/kubelet.conf.d
  version_added: "0.2.0"
kubelet_version:
  description: The kubelet version the options were checked against (O(kubelet_version), or the unit's kubelet); null when none.
  returned: always
  type: str
  sample: v1.31.2
  version_added: "0.2.0"
launch:
  description:
    - How O(service) starts the kubelet, as M(gpuprov.gpu.kubelet_launch) returns it; null without O(service).
  returned: always
  type: dict
  sample: {found: true, config: /var/lib/kubelet/config.yaml, config_dir: null, manager: kubeadm,
           flags: [], layers: [/usr/lib/systemd/system/kubelet.service], kubelet_version: v1.31.2}
  version_added: "0.2.0"
created:
  description: This run created RV(path) (a new drop-in); undoing the change removes it.
  returned: always
  type: bool
kubeadm_patch:
  description:
    - The managed keys as a KubeletConfiguration merge patch (a removed key is null), for
      kubeadm's C(--patches) directory as C(kubeletconfiguration+merge.yaml), so that
      C(kubeadm upgrade node --patches DIR) writes them again.
  returned: always
  type: dict
  sample: {apiVersion: kubelet.config.k8s.io/v1beta1, kind: KubeletConfiguration, cpuManagerPolicy: static}
kubespray_variables:
  description: The Kubespray inventory variables that keep the managed keys on a node
    Kubespray manages, one line (variable, colon, value) each.
  returned: always
  type: list
  elements: str
  sample: ['kubelet_cpu_manager_policy: "static"']
managed:
  description: Each managed key (dotted path) with its value in the merged config after the
    change; null when unset. Used to write a kubeadm C(kubeletconfiguration) patch.
  returned: always
  type: dict
  sample: {cpuManagerPolicy: static, reservedSystemCPUs: "0,4"}
configz:
  description:
    - Each managed key (dotted path) with the value the running kubelet's C(/configz) shows for
      it after the change; null when C(/configz) leaves it out. Keys left unset show the
      kubelet's default, and with C(reservedSystemCPUs) set C(kubeReserved.cpu) is gone and
      C(systemReserved.cpu) is the number of reserved CPUs, as the kubelet rewrites them.
    - Compare it with C(/configz) by meaning (quantities by amount, durations by value, CPU
      sets by CPUs), as the filter P(gpuprov.gpu.kubelet_configz_mismatches#filter) does.
  returned: always
  type: dict
  sample: {cpuManagerPolicy: static, reservedSystemCPUs: "0,4", kubeReserved.cpu: null}
cpu_manager_state_reset_reasons:
  description: Why C(cpu_manager_state) must be deleted; empty when it need not.
  returned: always
  type: list
  elements: str
  sample: ["reservedSystemCPUs changes under the static CPU policy"]
memory_manager_state_reset_reasons:
  description: Why C(memory_manager_state) must be deleted; empty when it need not.
  returned: always
  type: list
  elements: str
  sample: []
cpu_manager_state_reset_required:
  description: The CPU manager checkpoint contradicts the new config (see
    RV(cpu_manager_state_reset_reasons)), so C(cpu_manager_state) in the kubelet's root
    directory must be deleted while the kubelet is stopped.
  returned: always
  type: bool
  sample: true
memory_manager_state_reset_required:
  description: The memory manager checkpoint contradicts the new config (see
    RV(memory_manager_state_reset_reasons)), so C(memory_manager_state) must be deleted while
    the kubelet is stopped.
  returned: always
  type: bool
  sample: false
reserved_system_cpus:
  description: C(reservedSystemCPUs) after the change (V(auto) resolved to CPUs); null when the
    file has none.
  returned: always
  type: str
  sample: "0,4,8,12"
errors:
  description: One line per invalid field, when the config would be rejected.
  returned: failure
  type: list
  elements: str
  sample: ["reservedSystemCPUs: CPUs 64-65 do not exist (or are offline) on this node; online CPUs are 0-63"]
diff:
  description: The file before and after, when run with C(--diff).
  returned: changed and diff mode
  type: dict
  contains:
    before:
      description: Previous file content.
      type: str
    after:
      description: New file content.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config import (
    CPU_MANAGER_POLICIES,
    DEFAULT_CONFIG_PATH,
    HAS_YAML,
    KubeletConfigError,
    KubeletSettings,
    MEMORY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_POLICIES,
    TOPOLOGY_MANAGER_SCOPES,
    YAML_IMPORT_ERROR,
    plan_change,
    write_file_atomic,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.launch import (
    config_target,
    kubelet_version,
    kubespray_advice,
    launch_answer,
    read_launch,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.versions import (
    parse_kubelet_version,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.path_trust import planted_path_problem
from ansible_collections.gpuprov.gpu.plugins.module_utils.systemd_unit import unit_name


def argument_spec():
    return dict(
        path=dict(type="path"),
        service=dict(type="str"),
        launch_root=dict(type="path", default="/"),
        config_dir=dict(type="path"),
        drop_in=dict(type="bool"),
        kubelet_version=dict(type="str"),
        cpu_manager_policy=dict(type="str", choices=list(CPU_MANAGER_POLICIES)),
        cpu_manager_policy_options=dict(type="dict"),
        cpu_manager_reconcile_period=dict(type="str"),
        topology_manager_policy=dict(type="str", choices=list(TOPOLOGY_MANAGER_POLICIES)),
        topology_manager_scope=dict(type="str", choices=list(TOPOLOGY_MANAGER_SCOPES)),
        topology_manager_policy_options=dict(type="dict"),
        reserved_system_cpus=dict(type="str"),
        kube_reserved_cpu=dict(type="str"),
        system_reserved_cpu=dict(type="str"),
        memory_manager_policy=dict(type="str", choices=list(MEMORY_MANAGER_POLICIES)),
        reserved_memory=dict(
            type="list", elements="dict",
            options=dict(
                numa_node=dict(type="int", required=True),
                limits=dict(type="dict", required=True),
            ),
        ),
        backup=dict(type="bool", default=True),
        sysfs_root=dict(type="path", default="/sys"),
    )


def target(module):
    """(config file, drop-in directory, kubelet version text, launch) this run works on.

    With ``service``, read from how the unit starts the kubelet where the options leave them
    unset (failing on a flag that overrides a managed key, or a ``path`` the kubelet does not
    read); ``launch`` is then kubelet_launch's answer, else None.
    """
    params = module.params
    path, config_dir, version_text = params["path"], params["config_dir"], params["kubelet_version"]
    if params["service"] is None:
        return path or DEFAULT_CONFIG_PATH, config_dir, version_text, None
    try:
        service = unit_name(params["service"])
    except ValueError as exc:
        module.fail_json(msg="service: %s" % exc)
    try:
        found = read_launch(service, root=params["launch_root"])
    except (IOError, OSError, ValueError) as exc:
        module.fail_json(msg="cannot read how %s starts the kubelet: %s" % (service, exc))
    launch = launch_answer(found, kubelet_version(found["binary"], params["launch_root"], module.run_command))
    fields = [field for field in KubeletSettings.FIELDS if params.get(field) is not None]
    try:
        path, config_dir = config_target(found, fields, path, config_dir)
    except KubeletConfigError as exc:
        module.fail_json(msg=str(exc), errors=exc.errors, launch=launch)
    return path, config_dir, version_text or launch["kubelet_version"], launch


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"), exception=YAML_IMPORT_ERROR)

    path, config_dir, version_text, launch = target(module)
    version = None
    if version_text:
        try:
            version = parse_kubelet_version(version_text)
        except ValueError as exc:
            module.fail_json(msg="kubelet_version: %s" % exc, launch=launch)

    settings = KubeletSettings.from_params(module.params)
    try:
        plan = plan_change(path, settings, sysfs_root=module.params["sysfs_root"],
                           config_dir=config_dir,
                           drop_in=module.params["drop_in"], kubelet_version=version)
    except KubeletConfigError as exc:
        module.fail_json(msg=str(exc), errors=exc.errors, launch=launch)

    result = dict(
        changed=plan.changed,
        path=plan.path,
        config_file=path,
        config_dir=config_dir,
        kubelet_version=version_text,
        launch=launch,
        created=plan.created and plan.changed,
        kubeadm_patch=plan.kubeadm_patch(),
        kubespray_variables=kubespray_advice(plan.managed),
        changed_keys=plan.changed_keys,
        managed=plan.managed,
        configz=plan.configz,
        cpu_manager_state_reset_required=plan.cpu_manager_state_reset_required,
        memory_manager_state_reset_required=plan.memory_manager_state_reset_required,
        cpu_manager_state_reset_reasons=plan.cpu_manager_state_reset_reasons,
        memory_manager_state_reset_reasons=plan.memory_manager_state_reset_reasons,
        reserved_system_cpus=plan.reserved_system_cpus,
    )
    if plan.changed and module._diff:
        result["diff"] = dict(before=plan.before, after=plan.after,
                              before_header=plan.path, after_header=plan.path)

    if plan.changed:
        # Root writes through the config's links: refuse a path another user could have
        # planted a link on (also in check mode, so the dry run fails as the run would).
        problem = planted_path_problem(plan.path)
        if problem:
            module.fail_json(msg="kubelet config %s: %s; nothing was changed (the config must be reached "
                                 "only through folders and links that root owns)" % (plan.path, problem),
                             **dict((k, v) for k, v in result.items() if k != "changed"))

    if plan.changed and not module.check_mode:
        try:
            backup_file = write_file_atomic(plan.path, plan.after,
                                            backup=module.params["backup"],
                                            atomic_move=module.atomic_move)
        except Exception as exc:  # atomic_move raises a bare Exception; OSError otherwise
            cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
            module.fail_json(
                msg="could not write kubelet config %s: %s; the file is unchanged" % (
                    plan.path, getattr(cause, "strerror", None) or cause),
                **dict((k, v) for k, v in result.items() if k != "changed"))
        if backup_file:
            result["backup_file"] = backup_file

    module.exit_json(**result)


if __name__ == "__main__":
    main()
