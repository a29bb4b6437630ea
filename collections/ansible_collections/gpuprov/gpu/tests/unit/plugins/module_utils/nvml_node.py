# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A fake GPU node for the NVML, MIG and facts tests.

The fake ``pynvml`` and ``nvidia-smi`` live in roles/fake_gpu_node/files (see that role's README),
named by ``GPUPROV_FAKES_DIR`` (see fakes_dir.py).
Importing this file puts roles/fake_gpu_node/files/python first on sys.path so product code's
``import pynvml`` finds the fake; the ``fake_node`` fixture points the fakes at a state file
under the test's tmp_path and roles/fake_gpu_node/files/bin first on PATH.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest

from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.fakes_dir import fakes_dir


FAKES = fakes_dir(os.path.join("python", "pynvml.py"))
if FAKES is not None:
    _python = os.path.join(FAKES, "python")
    if _python not in sys.path:
        sys.path.insert(0, _python)
    loaded = sys.modules.get("pynvml")
    if loaded is not None and not os.path.abspath(getattr(loaded, "__file__", "")).startswith(_python):
        del sys.modules["pynvml"]  # the real nvidia-ml-py must not answer for the fake GPUs


class FakeNode:
    """One node: NVML state file, call log and sysfs tree under ``tmp_path``."""

    def __init__(self, tmp_path, monkeypatch):
        import pynvml

        self.pynvml = pynvml
        self.state_path = str(tmp_path / "nvml-state.json")
        self.call_log = str(tmp_path / "calls.log")
        self.sysfs = str(tmp_path / "sys")
        self._monkeypatch = monkeypatch
        monkeypatch.setenv(pynvml.STATE_ENV, self.state_path)
        monkeypatch.setenv("GPUPROV_FAKE_CALL_LOG", self.call_log)
        monkeypatch.setenv("PATH", os.path.join(FAKES, "bin") + os.pathsep + os.environ.get("PATH", ""))
        # A test that failed between nvmlInit and nvmlShutdown must not leak into the next.
        monkeypatch.setattr(pynvml, "_init_count", 0)

    def setup(self, gpus, numa_nodes=1, **kwargs):
        state = self.pynvml.new_state(gpus=gpus, numa_nodes=numa_nodes, **kwargs)
        self.save(state)
        return state

    def load(self):
        return self.pynvml.load_state(self.state_path)

    def save(self, state):
        self.pynvml.save_state(state, self.state_path)

    def raw(self):
        with open(self.state_path, "rb") as handle:
            return handle.read()

    def hold(self, unit="nvidia-persistenced.service", name="nvidia-persistenced", persistence=True, socket=True):
        """A host service that holds every GPU open while the fake systemctl has it active
        (nvidia-persistenced by default; it also keeps persistence mode on). nvidia-persistenced
        gets its socket under the test's tmp folder unless ``socket`` is False (as in a container
        without /run/nvidia-persistenced), and then holds against ``nvidia-smi -r`` too."""
        systemd = os.environ.get("GPUPROV_FAKE_SYSTEMD_STATE")
        if not systemd:
            systemd = os.path.join(os.path.dirname(self.state_path), "systemd-state.json")
            self._monkeypatch.setenv("GPUPROV_FAKE_SYSTEMD_STATE", systemd)
        data = {"units": {}}
        if os.path.exists(systemd):
            with open(systemd) as handle:
                data = json.load(handle)
        data.setdefault("units", {})[unit] = {"active": True, "enabled": True}
        with open(systemd, "w") as handle:
            json.dump(data, handle)
        holder = {"name": name, "unit": unit, "persistence": persistence}
        if persistence and socket:
            path = os.path.join(os.path.dirname(self.state_path), "run", "nvidia-persistenced", "socket")
            if not os.path.isdir(os.path.dirname(path)):
                os.makedirs(os.path.dirname(path))
            open(path, "a").close()
            holder["socket"] = path
        with self.edit() as state:
            state.setdefault("holders", []).append(holder)

    def release(self, unit="nvidia-persistenced.service"):
        """Stop the holder unit (as systemctl stop would)."""
        systemd = os.environ["GPUPROV_FAKE_SYSTEMD_STATE"]
        with open(systemd) as handle:
            data = json.load(handle)
        data["units"][unit]["active"] = False
        with open(systemd, "w") as handle:
            json.dump(data, handle)

    def edit(self):
        return self.pynvml.mutate_state(self.state_path)

    def calls(self):
        if not os.path.exists(self.call_log):
            return []
        with open(self.call_log) as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def layout(self, index):
        """[(profile name, start)] of a GPU, sorted by start, read from the state."""
        state = self.load()
        gpu = state["gpus"][index]
        names = dict((p["id"], p["name"][4:]) for p in state["models"][gpu["model"]]["mig"]["profiles"])
        return sorted(((names[gi["profile_id"]], gi["placement"]["start"]) for gi in gpu["gpu_instances"]),
                      key=lambda item: item[1])


@pytest.fixture
def fake_node(tmp_path, monkeypatch):
    if FAKES is None:
        pytest.skip("GPUPROV_FAKES_DIR names no folder of fakes: the collection runs outside its repository")
    return FakeNode(tmp_path, monkeypatch)


class ModuleResult(dict):
    @property
    def failed(self):
        return bool(self.get("failed"))

    @property
    def warning_texts(self):
        """Warnings as strings (ansible-core 2.19 returns them as structured events)."""
        texts = []
        for warning in self.get("warnings", []):
            if isinstance(warning, dict):
                warning = (warning.get("event") or {}).get("msg") or warning.get("msg") or str(warning)
            texts.append(warning)
        return texts


def _clear_module_warnings():
    from ansible.module_utils.common import warnings

    for name in ("_global_warnings", "_global_deprecations"):
        store = getattr(warnings, name, None)
        if store is not None:
            store.clear()


@pytest.fixture
def run_module(capsys):
    """run_module(main, args, check_mode=False, diff=False) -> the module's result dict."""
    from ansible.module_utils.testing import patch_module_args

    def run(main, args, check_mode=False, diff=False):
        args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        capsys.readouterr()
        try:
            with patch_module_args(args):
                with pytest.raises(SystemExit):
                    main()
        finally:
            # Warnings are process-global in ansible-core: one module run's must not reach the next.
            _clear_module_warnings()
        out = capsys.readouterr().out
        return ModuleResult(json.loads(out))

    return run
