# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A fake MPS node for the mps tests: fake NVML GPUs plus the fake nvidia-cuda-mps-control.

The fakes live in roles/fake_gpu_node/files (see that role's README), named by
``GPUPROV_FAKES_DIR`` (see fakes_dir.py); tests that need them skip when the collection runs
outside the repository.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.fakes_dir import fakes_dir

MPS_TOOL = "nvidia-cuda-mps-control"


FAKES = fakes_dir(os.path.join("bin", MPS_TOOL))


_FAKE_PYNVML = []


def load_fake_pynvml(monkeypatch):
    """The fake ``pynvml``, installed as ``pynvml`` for one test (nvml.py imports it lazily)."""
    if not _FAKE_PYNVML:
        spec = importlib.util.spec_from_file_location("pynvml", os.path.join(FAKES, "python", "pynvml.py"))
        module = importlib.util.module_from_spec(spec)
        # the fake looks itself up in sys.modules while it loads
        monkeypatch.setitem(sys.modules, "pynvml", module)
        spec.loader.exec_module(module)
        _FAKE_PYNVML.append(module)
    monkeypatch.setitem(sys.modules, "pynvml", _FAKE_PYNVML[0])
    return _FAKE_PYNVML[0]


class MpsNode:
    """One fake node under ``tmp_path``; the environment points the fakes at it."""

    def __init__(self, tmp_path, monkeypatch, gpus):
        self.root = str(tmp_path)
        self.pynvml = load_fake_pynvml(monkeypatch)
        self.nvml_state = os.path.join(self.root, "nvml.json")
        self.mps_state = os.path.join(self.root, "mps.json")
        self.call_log = os.path.join(self.root, "calls.log")
        self.pipe = os.path.join(self.root, "mps", "pipe")
        self.log = os.path.join(self.root, "mps", "log")
        self.binary = os.path.join(FAKES, "bin", MPS_TOOL)
        monkeypatch.setenv("GPUPROV_FAKE_NVML_STATE", self.nvml_state)
        monkeypatch.setenv("GPUPROV_FAKE_MPS_STATE", self.mps_state)
        monkeypatch.setenv("GPUPROV_FAKE_CALL_LOG", self.call_log)
        monkeypatch.setenv("PATH", os.path.join(FAKES, "bin") + os.pathsep + os.environ.get("PATH", ""))
        for name in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY", "CUDA_VISIBLE_DEVICES",
                     "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"):
            monkeypatch.delenv(name, raising=False)
        self.pynvml.write_new_state(self.nvml_state, gpus=gpus)

    # -- NVML side ---------------------------------------------------------------------
    def nvml(self):
        return self.pynvml.load_state(self.nvml_state)

    def uuids(self):
        return [gpu["uuid"] for gpu in self.nvml()["gpus"]]

    def compute_modes(self):
        names = {0: "DEFAULT", 2: "PROHIBITED", 3: "EXCLUSIVE_PROCESS"}
        return [names[gpu["compute_mode"]] for gpu in self.nvml()["gpus"]]

    def set_mig(self, index, enabled):
        with self.pynvml.mutate_state(self.nvml_state) as state:
            self.pynvml.set_mig_mode(state, index, enabled)

    # -- MPS side ----------------------------------------------------------------------
    def daemon(self):
        """The fake daemon record for our pipe directory, or None."""
        if not os.path.exists(self.mps_state):
            return None
        with open(self.mps_state) as handle:
            return json.load(handle)["daemons"].get(self.pipe)

    def client(self, *commands):
        """Run the fake client as a user would; returns (rc, stdout)."""
        env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=self.pipe, CUDA_MPS_LOG_DIRECTORY=self.log)
        proc = subprocess.run([self.binary], input="\n".join(commands) + "\n", env=env,
                              capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout

    def start_by_hand(self, visible_devices=None):
        """Start the daemon outside the code under test (as a systemd unit would)."""
        env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=self.pipe, CUDA_MPS_LOG_DIRECTORY=self.log)
        if visible_devices:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(visible_devices)
        os.makedirs(self.pipe, exist_ok=True)
        os.chmod(self.pipe, 0o755)
        subprocess.run([self.binary, "-d"], env=env, check=True)

    def kill_daemon(self):
        """kill -9 of the daemon: it leaves its pipe directory behind."""
        env = dict(os.environ, CUDA_MPS_PIPE_DIRECTORY=self.pipe)
        subprocess.run([self.binary, "--fake-kill"], env=env, check=True, capture_output=True)

    def calls(self, tool=MPS_TOOL):
        if not os.path.exists(self.call_log):
            return []
        with open(self.call_log) as handle:
            entries = [json.loads(line) for line in handle if line.strip()]
        return [e for e in entries if e["tool"] == tool]

    def commands(self):
        """Every MPS control command sent so far, ``-d`` included, in order."""
        sent = []
        for entry in self.calls():
            sent.extend(entry["argv"][1:] or entry["commands"])
        return sent

    def clear_calls(self):
        if os.path.exists(self.call_log):
            os.unlink(self.call_log)


@pytest.fixture
def mps_node(tmp_path, monkeypatch):
    if FAKES is None:
        pytest.skip("GPUPROV_FAKES_DIR names no folder of fakes: the collection runs outside its repository")

    def make(gpus=(("H100-80GB", 2),)):
        return MpsNode(tmp_path, monkeypatch, list(gpus))

    return make
