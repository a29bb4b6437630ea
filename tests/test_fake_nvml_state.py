# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fake pynvml parses its state file once per content, and still sees every change at once.

A real NVML call reads the driver; the fake reads its JSON state file on every call. It keeps
the parsed state while the file's bytes are unchanged, so these tests hold it to the rule that
matters: any write, by any writer, is what the next call answers.
"""

import json
import os
import subprocess
import sys

import pytest

from testlib import FAKES

sys.path.insert(0, os.path.join(FAKES, "python"))
import pynvml as fake_pynvml  # noqa: E402  (the fake)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    path = str(tmp_path / "nvml.json")
    fake_pynvml.write_new_state(path, gpus=[("A100-80GB", 2)])
    monkeypatch.setenv(fake_pynvml.STATE_ENV, path)
    monkeypatch.setattr(fake_pynvml, "_init_count", 0)
    fake_pynvml.nvmlInit()
    yield path
    fake_pynvml.nvmlShutdown()


def _rewrite_in_place(path, old, new):
    """Change the file's bytes without a new inode or size, as a careless writer would."""
    with open(path) as handle:
        text = handle.read()
    assert len(old) == len(new) and text.count(old) >= 1
    with open(path, "r+") as handle:
        handle.write(text.replace(old, new, 1))


def test_reads_parse_the_state_once_per_content(fake, monkeypatch):
    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(fake_pynvml.json, "loads", lambda raw, *a, **k: parsed.append(1) or real_loads(raw, *a, **k))
    handles = [fake_pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(fake_pynvml.nvmlDeviceGetCount())]
    for handle in handles * 5:
        assert fake_pynvml.nvmlDeviceGetComputeMode(handle) == fake_pynvml.NVML_COMPUTEMODE_DEFAULT
    assert len(parsed) <= 1, "the unchanged state file was parsed %d times" % len(parsed)


def test_an_in_place_write_of_the_same_size_is_seen_by_the_next_call(fake):
    handle = fake_pynvml.nvmlDeviceGetHandleByIndex(0)
    assert fake_pynvml.nvmlDeviceGetComputeMode(handle) == fake_pynvml.NVML_COMPUTEMODE_DEFAULT
    before = os.stat(fake)
    _rewrite_in_place(fake, '"compute_mode": 0', '"compute_mode": %d' % fake_pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)
    after = os.stat(fake)
    assert (before.st_ino, before.st_size) == (after.st_ino, after.st_size)
    assert fake_pynvml.nvmlDeviceGetComputeMode(handle) == fake_pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS


def test_a_change_by_another_process_is_seen_by_the_next_call(fake):
    handle = fake_pynvml.nvmlDeviceGetHandleByIndex(1)
    assert fake_pynvml.nvmlDeviceGetComputeMode(handle) == fake_pynvml.NVML_COMPUTEMODE_DEFAULT
    # Another process changes the GPU through the fake's own locked, atomic write.
    code = ("import sys; sys.path.insert(0, %r); import pynvml as f\n"
            "with f.mutate_state(%r) as s: s['gpus'][1]['compute_mode'] = f.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS\n"
            % (os.path.join(FAKES, "python"), fake))
    subprocess.run([sys.executable, "-c", code], check=True)
    assert fake_pynvml.nvmlDeviceGetComputeMode(handle) == fake_pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS


def test_a_change_through_nvml_is_seen_and_does_not_touch_the_shared_copy(fake):
    handle = fake_pynvml.nvmlDeviceGetHandleByIndex(0)
    shared = fake_pynvml._read()
    fake_pynvml.nvmlDeviceSetComputeMode(handle, fake_pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS)
    assert fake_pynvml.nvmlDeviceGetComputeMode(handle) == fake_pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS
    assert shared["gpus"][0]["compute_mode"] == fake_pynvml.NVML_COMPUTEMODE_DEFAULT
    with open(fake) as handle_file:
        assert json.load(handle_file)["gpus"][0]["compute_mode"] == fake_pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS


def test_the_helpers_load_state_returns_a_copy_of_its_own(fake):
    first = fake_pynvml.load_state(fake)
    first["gpus"][0]["compute_mode"] = 99
    assert fake_pynvml.load_state(fake)["gpus"][0]["compute_mode"] == fake_pynvml.NVML_COMPUTEMODE_DEFAULT
    assert fake_pynvml._read()["gpus"][0]["compute_mode"] == fake_pynvml.NVML_COMPUTEMODE_DEFAULT
