# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fixed names of the MPS control daemon: its binary, its files, default directories
and the compute modes it needs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


MPS_CONTROL = "nvidia-cuda-mps-control"
DEFAULT_PIPE_DIRECTORY = "/tmp/nvidia-mps"
DEFAULT_LOG_DIRECTORY = "/var/log/nvidia-mps"
CONTROL_ENDPOINT = "control"
PID_FILE = "nvidia-cuda-mps-control.pid"
# What this code started the daemon with: lets a later run see that the GPU set changed.
METADATA_FILE = ".gpuprov-mps.json"

COMPUTE_MODE_DEFAULT = "DEFAULT"
COMPUTE_MODE_EXCLUSIVE_PROCESS = "EXCLUSIVE_PROCESS"

# sun_path of a Unix socket holds 108 bytes including the terminating NUL.
UNIX_SOCKET_PATH_MAX = 107
# Variables that would silently change what a freshly started daemon uses as defaults.
DAEMON_ENV_OVERRIDES = ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")
