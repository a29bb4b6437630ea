#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mps_daemon
short_description: Run a host NVIDIA MPS control daemon with thread and memory limits
version_added: "0.1.0"
description:
  - Ensures one NVIDIA Multi-Process Service (MPS) control daemon (C(nvidia-cuda-mps-control))
    is started or stopped for a set of GPUs, with its pipe and log directories, the GPUs'
    compute mode, the default active thread percentage and the default pinned device memory
    limit per GPU.
  - This is the host daemon, for nodes whose jobs run outside the NVIDIA device plugin or where
    the operating system should own the daemon. The device plugin's own MPS support
    (C(sharing.mps)) needs none of this.
  - A daemon counts as running when its pipe directory holds the C(control) endpoint and the
    daemon answers C(get_server_list). A pipe directory with files but no answering daemon
    (the daemon died) is stale; the module removes those files, starts a new daemon and says
    so in RV(daemon.stale_recovered).
  - The daemon is started with C(CUDA_VISIBLE_DEVICES) set to the selected GPUs' UUIDs in NVML
    index order, so device ordinal N of the MPS commands is the N-th selected GPU (see
    RV(gpus[].ordinal)).
  - Limits are changed on the running daemon, never by restarting it. They apply to MPS servers
    started afterwards only; the module warns, naming the running servers that keep their old
    limits.
  - With O(service), a systemd unit (the P(gpuprov.gpu.gpu_mps#role) role installs one) runs the
    daemon; the module then never starts or stops it, and only checks that it answers (or no
    longer answers), sets compute mode and sets the limits.
  - Refuses GPUs with MIG mode enabled (or pending), since MPS on MIG devices is out of scope here.
  - On any failure the changes of this run to compute mode, the daemon and the limits are
    undone (directories it created stay), and the message says what could not be undone.
author: gpuprov maintainers (@gpuprov)
requirements:
  - nvidia-cuda-mps-control on the PATH
extends_documentation_fragment:
  - gpuprov.gpu.attributes
  - ansible.builtin.action_common_attributes
  - gpuprov.gpu.attributes
  - gpuprov.gpu.nvml
attributes:
  check_mode:
    support: full
    details: Reports what would change, including the limits a new daemon would get.
  diff_mode:
    support: full
options:
  state:
    description:
      - V(started) starts the daemon when none answers and sets the limits; V(stopped) sends it
        C(quit), removes what is left in the pipe directory and puts compute mode back to
        C(DEFAULT).
    type: str
    choices: [started, stopped]
    default: started
  gpus:
    description:
      - The GPUs the daemon serves, by NVML index (V("0")) or UUID (V(GPU-...)); V(all) for
        every GPU on the node.
    type: list
    elements: str
    default: [all]
  pipe_directory:
    description:
      - C(CUDA_MPS_PIPE_DIRECTORY) of the daemon; clients must use the same. A directory of its
        own (a stale one is emptied of files); shared system directories such as V(/tmp) are
        refused. The C(control) socket path inside it must fit in 107 bytes.
    type: path
    default: /tmp/nvidia-mps
  pipe_directory_owner:
    description: Owner of O(pipe_directory) (name or uid); unset keeps the current owner.
    type: str
  pipe_directory_group:
    description:
      - Group of O(pipe_directory) (name or gid); unset keeps the current group. Give MPS users
        a group and a mode such as V("0770") rather than a world-writable directory.
    type: str
  pipe_directory_mode:
    description:
      - Mode of O(pipe_directory), in octal. World-writable modes are refused; an existing
        world-writable directory is set to this mode, with a warning.
    type: str
    default: "0755"
  log_directory:
    description: C(CUDA_MPS_LOG_DIRECTORY) of the daemon (C(control.log), C(server.log)).
    type: path
    default: /var/log/nvidia-mps
  log_directory_owner:
    description: Owner of O(log_directory); unset keeps the current owner.
    type: str
  log_directory_group:
    description: Group of O(log_directory); unset keeps the current group.
    type: str
  log_directory_mode:
    description: Mode of O(log_directory), in octal; world-writable modes are refused.
    type: str
    default: "0755"
  manage_compute_mode:
    description:
      - Set C(EXCLUSIVE_PROCESS) compute mode on the GPUs while the daemon runs (before it
        starts, as the device plugin does) and C(DEFAULT) after it stops.
      - V(false) leaves compute mode alone, for example on a shared machine where only the
        daemon itself is being tried out.
    type: bool
    default: true
  active_thread_percentage:
    description:
      - Default active thread percentage of new MPS servers, greater than 0 and at most 100.
        Unset leaves it as it is (100 on a new daemon) unless O(replicas) is given.
      - Needs Volta (compute capability 7.0) or newer.
    type: float
  pinned_memory_limit:
    description:
      - Default pinned device memory limit of new MPS servers, in MiB. One number (or a string
        such as V(20G) or V(20350M)) applies to every selected GPU; a dictionary maps a GPU index
        or UUID to its limit.
      - In strings V(M) is MiB and V(G) is 1024 MiB (V(Gi), V(GiB) and V(GB) read the same); the
        result must be a whole number of MiB.
      - Unset leaves the limits as they are unless O(replicas) is given. Needs Volta or newer.
    type: raw
  replicas:
    description:
      - How many clients share each GPU. Derives the limits that are not given explicitly, as
        the device plugin does - C(100 // replicas) percent of the threads and each GPU's total
        memory C(// replicas) MiB.
    type: int
  service:
    description:
      - Name of the systemd unit that runs the daemon. The module then does not start or stop
        the daemon; it fails when the daemon does not answer with O(state=started), or still
        answers with O(state=stopped).
    type: str
  allow_restart:
    description:
      - Allow restarting a daemon this module started when O(gpus) now selects different GPUs
        (its C(CUDA_VISIBLE_DEVICES) cannot change while it runs). A restart ends the daemon's
        MPS servers and their clients, so it is refused by default.
    type: bool
    default: false
  timeout:
    description: Seconds to wait for the daemon to answer after starting, or to go after C(quit).
    type: int
    default: 30
notes:
  - Run as root (C(become)) - setting compute mode and starting the daemon need it.
  - C(quit) waits for the MPS servers' clients to finish; the module fails after O(timeout)
    seconds if the daemon is still there.
  - The exact text of some daemon replies is not documented by NVIDIA; every change is read
    back with the matching C(get_) command instead of trusting the reply.
seealso:
  - name: NVIDIA Multi-Process Service
    description: The MPS documentation, with the control commands and environment variables.
    link: https://docs.nvidia.com/deploy/mps/
  - module: gpuprov.gpu.mig_mode
"""

EXAMPLES = r"""
- name: MPS on all GPUs, four clients per GPU (25% threads, a quarter of each GPU's memory)
  gpuprov.gpu.mps_daemon:
    replicas: 4
  become: true

- name: MPS on two GPUs with explicit limits, pipe directory for the mps group
  gpuprov.gpu.mps_daemon:
    gpus: ["0", "1"]
    pipe_directory: /run/nvidia-mps
    pipe_directory_group: mps
    pipe_directory_mode: "0770"
    active_thread_percentage: 50
    pinned_memory_limit:
      "0": 20480
      "1": 10G
  become: true

- name: Limits only; the gpuprov-mps systemd unit runs the daemon
  gpuprov.gpu.mps_daemon:
    service: gpuprov-mps.service
    pipe_directory: /run/nvidia-mps
    active_thread_percentage: 25
  become: true

- name: Stop the daemon and put compute mode back to DEFAULT
  gpuprov.gpu.mps_daemon:
    state: stopped
  become: true
"""

RETURN = r"""
daemon:
  description: The MPS control daemon after the run.
  returned: always
  type: dict
  contains:
    running:
      description: Whether the daemon answers after the run (in check mode, whether it would).
      type: bool
      sample: true
    pid:
      description: PID from the daemon's pid file in the pipe directory; null when not running.
      type: int
      sample: 41000
    pipe_directory:
      description: The daemon's C(CUDA_MPS_PIPE_DIRECTORY).
      type: str
      sample: /tmp/nvidia-mps
    log_directory:
      description: The daemon's C(CUDA_MPS_LOG_DIRECTORY).
      type: str
      sample: /var/log/nvidia-mps
    service:
      description: O(service), when given.
      type: str
      sample: gpuprov-mps.service
    started:
      description: This run started the daemon.
      type: bool
      sample: false
    stopped:
      description: This run stopped the daemon.
      type: bool
      sample: false
    restarted:
      description: This run restarted the daemon for a new GPU set (O(allow_restart)).
      type: bool
      sample: false
    stale_recovered:
      description: The pipe directory held a dead daemon's files; they were removed.
      type: bool
      sample: false
    removed_files:
      description: Files removed from the pipe directory.
      type: list
      elements: str
      sample: [control, control_lock, nvidia-cuda-mps-control.pid]
gpus:
  description: The selected GPUs, in NVML index order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: NVML index.
      type: int
      sample: 0
    uuid:
      description: GPU UUID.
      type: str
      sample: GPU-5d8a0c6e-7b0e-5b1c-9a55-3f3c2c0a1b2d
    name:
      description: Product name.
      type: str
      sample: NVIDIA H100 80GB HBM3
    ordinal:
      description: The device ordinal the daemon sees this GPU as (MPS commands use it).
      type: int
      sample: 0
    memory_total_mib:
      description: Total memory in MiB.
      type: int
      sample: 81559
    compute_mode_before:
      description: Compute mode before the run.
      type: str
      sample: DEFAULT
    compute_mode_after:
      description: Compute mode after the run.
      type: str
      sample: EXCLUSIVE_PROCESS
limits:
  description: The daemon's default limits before and after the run. Null values mean none
    (no daemon, or no memory limit on that GPU).
  returned: always
  type: dict
  contains:
    before:
      description: Limits before the run.
      type: dict
      sample: {active_thread_percentage: 100.0, pinned_memory_limit_mib: {GPU-5d8a0c6e-7b0e-5b1c-9a55-3f3c2c0a1b2d: null}}
    after:
      description: Limits after the run.
      type: dict
      sample: {active_thread_percentage: 25.0, pinned_memory_limit_mib: {GPU-5d8a0c6e-7b0e-5b1c-9a55-3f3c2c0a1b2d: 20389}}
servers:
  description: PIDs of the MPS servers running after the run.
  returned: always
  type: list
  elements: int
  sample: [41001]
directories:
  description: The pipe and log directories before and after (mode, uid, gid).
  returned: when O(state=started)
  type: dict
  sample:
    pipe_directory:
      path: /tmp/nvidia-mps
      changed: true
      before: {exists: false, mode: null, uid: null, gid: null}
      after: {exists: true, mode: "0755", uid: 0, gid: 0}
diff:
  description: Daemon, compute modes, limits and directories before and after, in diff mode.
  returned: diff mode
  type: dict
"""

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.constants import (
    DEFAULT_LOG_DIRECTORY,
    DEFAULT_PIPE_DIRECTORY,
    MPS_CONTROL,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.daemon_manager import MpsDaemonManager
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.errors import MpsError
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.gpus import NvmlGpus
from ansible_collections.gpuprov.gpu.plugins.module_utils.mps.runners import ModuleRunner
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml, NvmlError

_UNIT_NAME_RE = re.compile(r"^[A-Za-z0-9:_.@\\-]+$")


def argument_spec():
    return dict(
        state=dict(type="str", choices=["started", "stopped"], default="started"),
        gpus=dict(type="list", elements="str", default=["all"]),
        pipe_directory=dict(type="path", default=DEFAULT_PIPE_DIRECTORY),
        pipe_directory_owner=dict(type="str"),
        pipe_directory_group=dict(type="str"),
        pipe_directory_mode=dict(type="str", default="0755"),
        log_directory=dict(type="path", default=DEFAULT_LOG_DIRECTORY),
        log_directory_owner=dict(type="str"),
        log_directory_group=dict(type="str"),
        log_directory_mode=dict(type="str", default="0755"),
        manage_compute_mode=dict(type="bool", default=True),
        active_thread_percentage=dict(type="float"),
        pinned_memory_limit=dict(type="raw"),
        replicas=dict(type="int"),
        service=dict(type="str"),
        allow_restart=dict(type="bool", default=False),
        timeout=dict(type="int", default=30),
    )


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    params = module.params
    if params["service"] is not None and not _UNIT_NAME_RE.match(params["service"]):
        module.fail_json(msg="service %r is not a systemd unit name" % params["service"])
    if params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % params["timeout"])
    binary = module.get_bin_path(MPS_CONTROL)
    if binary is None:
        module.fail_json(msg="%s is not on the PATH of this node: install the NVIDIA driver's compute "
                             "utilities (for example nvidia-compute-utils-<branch>)" % MPS_CONTROL)

    try:
        with Nvml() as nvml:
            manager = MpsDaemonManager(params, NvmlGpus(nvml), ModuleRunner(module, params["timeout"]),
                                       check_mode=module.check_mode, warn=module.warn, binary=binary)
            result = manager.run()
    except (MpsError, NvmlError) as exc:
        module.fail_json(msg=str(exc))

    diff = result.pop("diff")
    result.pop("warnings")  # already reported through module.warn
    if module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
