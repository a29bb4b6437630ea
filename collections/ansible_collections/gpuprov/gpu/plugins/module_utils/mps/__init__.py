# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Host MPS control daemon: directories, compute mode, default limits.

One ``nvidia-cuda-mps-control`` daemon serves a set of GPUs through its pipe directory.
The daemon is told what to do by running ``nvidia-cuda-mps-control`` again as a client,
with the same ``CUDA_MPS_PIPE_DIRECTORY``, and writing commands to its stdin.

Facts this code relies on (NVIDIA MPS documentation, k8s-device-plugin
``cmd/mps-control-daemon/mps/daemon.go``):

* ``-d`` forks the daemon and returns; the pipe directory then holds the ``control``
  endpoint. A client without an answering daemon prints "Cannot find MPS control daemon
  process" and exits non-zero.
* ``set_default_active_thread_percentage`` and ``set_default_device_pinned_mem_limit``
  apply to MPS servers started afterwards only; running servers keep their limits. The
  defaults are lost when the daemon quits, so they are set again after every start.
* Devices named in the daemon's ``CUDA_VISIBLE_DEVICES`` are remapped: ordinal N is the
  N-th entry. This code always starts the daemon with the GPU UUIDs in NVML index order
  and addresses per-device limits by that ordinal.
* A rejected command prints an error but the client still exits 0, so every change is
  read back and compared.
* MPS on MIG devices is out of scope here (the device plugin refuses it as well).

Nothing here imports Ansible: the module passes in a runner built on
``AnsibleModule.run_command``; ``tests/device/mps_real.py`` passes a subprocess runner.

One concept per file: ``constants`` (the daemon's binary, files and compute modes),
``replies`` (parsing the control client's answers), ``runners`` (running the binary),
``control`` (the client protocol), ``directories`` (pipe and log directories, metadata),
``gpus`` (the GPUs served and their limits) and ``daemon_manager`` (the converge run).
Each name is imported from its own file: the package imports nothing, so ``node_state`` on a
node without host MPS compiles none of the daemon's code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type
