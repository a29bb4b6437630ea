"""The node-side sampler gpuprov-baseline.service runs (playbooks/files/gpuprov-baseline-sampler)."""
import importlib.machinery
import importlib.util
import os
import signal
import subprocess
import sys
import time

import pytest

from testlib import FAKES, REPO

SAMPLER = os.path.join(REPO, "collections", "ansible_collections", "gpuprov", "gpu", "playbooks", "files",
                       "gpuprov-baseline-sampler")


@pytest.fixture(scope="module")
def sampler():
    loader = importlib.machinery.SourceFileLoader("gpuprov_baseline_sampler", SAMPLER)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_a_torn_last_row_is_cut_back_to_the_last_full_line(sampler, tmp_path):
    path = tmp_path / "samples.csv"
    path.write_text("a\nb\n2026/12/01 10:00:00.000, 0, Tesla")
    sampler.cut_torn_tail(str(path))
    assert path.read_text() == "a\nb\n"
    sampler.cut_torn_tail(str(path))          # whole lines stay as they are
    assert path.read_text() == "a\nb\n"
    path.write_text("no newline at all")
    sampler.cut_torn_tail(str(path))
    assert path.read_text() == ""
    sampler.cut_torn_tail(str(tmp_path / "missing.csv"))   # nothing recorded yet: nothing to do


def test_rotation_keeps_the_newest_files(sampler, tmp_path):
    for generation in range(5):
        (tmp_path / "samples.csv").write_text("gen %d\n" % generation)
        sampler.rotate(str(tmp_path), keep=3)
    names = sorted(os.listdir(tmp_path))
    assert names == ["samples.csv.1", "samples.csv.2", "samples.csv.3"]
    assert [(tmp_path / name).read_text() for name in names] == ["gen 4\n", "gen 3\n", "gen 2\n"]


def test_a_planted_link_is_not_written_through(sampler, tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("precious\n")
    os.symlink(target, tmp_path / "samples.csv")
    with pytest.raises(OSError):
        sampler.open_append(str(tmp_path / "samples.csv"))
    assert target.read_text() == "precious\n"


def test_samples_every_interval_until_sigterm(tmp_path):
    spec = importlib.util.spec_from_file_location("gpuprov_fake_pynvml", os.path.join(FAKES, "python", "pynvml.py"))
    fake = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fake
    spec.loader.exec_module(fake)
    state = tmp_path / "nvml.json"
    fake.write_new_state(str(state), gpus=[("T4", 2)])
    env = dict(os.environ, GPUPROV_FAKE_NVML_STATE=str(state),
               PATH=os.path.join(FAKES, "bin") + os.pathsep + os.environ["PATH"])
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "samples.csv").write_text("2026/12/01 09:59:59.000, 0, Tesla T4, 0, 15360, 0\n2026/12/0")
    proc = subprocess.Popen([sys.executable, SAMPLER, "--interval", "1", "--dir", str(tmp_path / "data"),
                             "--max-bytes", "4096"], env=env, stderr=subprocess.PIPE, text=True)
    time.sleep(2.5)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0, proc.stderr.read()
    rows = (tmp_path / "data" / "samples.csv").read_text().splitlines()
    # The torn row is gone, then two GPUs per interval, each a whole nvidia-smi row.
    assert rows[0] == "2026/12/01 09:59:59.000, 0, Tesla T4, 0, 15360, 0"
    assert len(rows) >= 1 + 2 * 2 and all(len(row.split(", ")) == 6 for row in rows)
    assert [row.split(", ")[1] for row in rows[1:5]] == ["0", "1", "0", "1"]


def test_bad_arguments_are_refused():
    result = subprocess.run([sys.executable, SAMPLER, "--interval", "0", "--dir", "/nonexistent"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "--interval and --keep must be >= 1" in result.stderr
