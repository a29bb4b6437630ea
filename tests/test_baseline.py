"""gpuprov baseline: the summary, the ansible-playbook command line, the command around them."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gpuprov import cmd_baseline
from gpuprov import diagnose as diag

from testlib import FAKES, REPO


def samples(rows):
    """rows: (index, memory used MiB, utilization %) one per second."""
    text = "".join("2026/11/30 10:%02d:%02d.250, %d, NVIDIA L40S, %s, 46068, %s\n"
                   % (second // 60, second % 60, index, used, util)
                   for second, (index, used, util) in enumerate(rows))
    return diag.parse_utilization_csv(text, "n.csv")


def test_summary_per_node_and_gpu():
    rows = [(0, 1000 + 10 * i, i) for i in range(1, 21)] + [(1, 500, 50)] * 4
    summary = cmd_baseline.summarise_baseline({"gpu-b": samples(rows[:2]), "gpu-a": samples(rows)})
    assert list(summary) == ["gpu-a", "gpu-b"]
    gpu0, gpu1 = summary["gpu-a"]
    assert (gpu0["index"], gpu0["samples"]) == (0, 20)
    assert gpu0["sm_mean"] == 10.5           # mean of 1..20
    assert gpu0["sm_p95"] == 19              # nearest rank: the 19th of 20
    assert gpu0["memory_used_mean_mib"] == 1105.0
    assert gpu0["memory_used_p95_mib"] == 1190
    assert (gpu1["samples"], gpu1["sm_mean"], gpu1["sm_p95"]) == (4, 50.0, 50)
    assert len(summary["gpu-b"]) == 1 and summary["gpu-b"][0]["samples"] == 2


def test_summary_of_unreadable_values_is_none():
    (gpu,) = cmd_baseline.summarise_baseline({"n": samples([(0, "[N/A]", "[N/A]")] * 3)})["n"]
    assert gpu["samples"] == 3
    assert gpu["sm_mean"] is None and gpu["sm_p95"] is None and gpu["memory_used_mean_mib"] is None
    assert gpu["pattern"] is None


def test_argv_is_a_list_with_typed_extra_vars():
    argv = cmd_baseline.build_argv("/venv/bin/ansible-playbook", "gpuprov.gpu.baseline", "inv.yml",
                                   "/tmp/out dir", 300, 2, limit="gpu_t4:&rack1")
    assert argv[:5] == ["/venv/bin/ansible-playbook", "-i", "inv.yml", "-l", "gpu_t4:&rack1"]
    assert argv[5] == "-e"
    assert json.loads(argv[6]) == {"gpuprov_baseline_duration": 300, "gpuprov_baseline_interval": 2,
                                   "gpuprov_baseline_dest": "/tmp/out dir"}
    assert argv[7:] == ["gpuprov.gpu.baseline"]
    assert "-l" not in cmd_baseline.build_argv("ap", "pb", "inv.yml", "/d", 10, 1)


def test_failed_hosts_from_the_play_recap():
    output = """
PLAY RECAP *********************************************************************
gpu-t4-01                  : ok=4    changed=2    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
gpu-t4-02                  : ok=1    changed=0    unreachable=1    failed=0    skipped=0    rescued=0    ignored=0
gpu-t4-03                  : ok=2    changed=1    unreachable=0    failed=1    skipped=0    rescued=0    ignored=0
"""
    assert cmd_baseline.failed_hosts(output) == ["gpu-t4-02", "gpu-t4-03"]
    assert cmd_baseline.failed_hosts("no recap here") == []


def _fake_run(files, rc=0, log=""):
    """A run_playbook stand-in: writes what the playbook would have fetched."""
    calls = []

    def run(argv, duration, log_path):
        calls.append(argv)
        dest = json.loads(argv[argv.index("-e") + 1])["gpuprov_baseline_dest"]
        os.makedirs(os.path.join(dest, "utilization"), exist_ok=True)
        for host, text in files.items():
            with open(os.path.join(dest, "utilization", host + ".csv"), "w") as handle:
                handle.write(text)
        with open(log_path, "w") as handle:
            handle.write(log)
        return rc

    return run, calls


CSV = "".join("2026/11/30 10:00:%02d.000, 0, Tesla T4, 3100, 15360, %d\n" % (i, v)
              for i, v in enumerate([0, 0, 95, 90, 0, 0, 97, 92, 0, 1]))


def test_command_summarises_and_keeps_files_with_out(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu-t4-01:\n")
    run, calls = _fake_run({"gpu-t4-01": CSV})
    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    out_dir = tmp_path / "baseline"
    result = CliRunner().invoke(cmd_baseline.baseline, ["-i", str(inventory), "--duration", "10", "--out",
                                                        str(out_dir), "-l", "gpu-t4-01"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    (argv,) = calls
    assert argv[argv.index("-l") + 1] == "gpu-t4-01"
    row = next(line for line in result.stdout.splitlines() if line.startswith("gpu-t4-01"))
    assert row.split()[:5] == ["gpu-t4-01", "0", "Tesla", "T4", "10"]
    assert "cycling" in row
    assert (out_dir / "utilization" / "gpu-t4-01.csv").read_text() == CSV
    assert "gpuprov diagnose --gpu-data %s" % out_dir in result.stdout


def test_command_json_and_temporary_files_removed(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu-t4-01:\n")
    run, calls = _fake_run({"gpu-t4-01": CSV})
    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    result = CliRunner().invoke(cmd_baseline.baseline, ["-i", str(inventory), "--duration", "10", "-o", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["schema"] == "gpuprov.baseline/v1"
    assert summary["out"] is None
    assert summary["nodes"]["gpu-t4-01"][0]["sm_p95"] == 97
    dest = json.loads(calls[0][calls[0].index("-e") + 1])["gpuprov_baseline_dest"]
    assert not os.path.exists(dest)


def test_command_reports_failed_hosts(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu-t4-01:\n    gpu-t4-02:\n")
    log = ("fatal: [gpu-t4-02]: FAILED! => {\"msg\": \"non-zero return code\", \"rc\": 9}\n"
           "PLAY RECAP ****\n"
           "gpu-t4-01 : ok=4 changed=2 unreachable=0 failed=0 skipped=0 rescued=0 ignored=0\n"
           "gpu-t4-02 : ok=2 changed=1 unreachable=0 failed=1 skipped=0 rescued=0 ignored=0\n")
    run, _calls = _fake_run({"gpu-t4-01": CSV}, rc=2, log=log)
    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    result = CliRunner().invoke(cmd_baseline.baseline, ["-i", str(inventory), "--duration", "10"],
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert "ansible-playbook exited 2 (one or more hosts failed)" in result.stderr
    assert "FAILED!" in result.stderr
    assert "No samples from: gpu-t4-02 (failed or unreachable)" in result.stdout
    assert any(line.startswith("gpu-t4-01") for line in result.stdout.splitlines())


def test_command_rejects_bad_input(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cmd_baseline.baseline, ["-i", str(tmp_path / "missing.yml"), "--duration", "5"])
    assert result.exit_code == 2
    assert "missing.yml: inventory not found" in result.stderr
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    result = runner.invoke(cmd_baseline.baseline, ["-i", str(inventory), "--duration", "5", "--interval", "10"])
    assert result.exit_code == 2
    assert "--interval 10 is longer than --duration 5" in result.stderr
    result = runner.invoke(cmd_baseline.baseline, ["-i", str(inventory), "--duration", "0"])
    assert result.exit_code == 2


def test_unreadable_samples_name_the_file(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    run, _calls = _fake_run({"gpu-t4-01": "this is not nvidia-smi output\n"})
    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    result = CliRunner().invoke(cmd_baseline.baseline, ["-i", str(inventory), "--duration", "3", "--out",
                                                        str(tmp_path / "o")], catch_exceptions=False)
    assert result.exit_code == 1
    assert "utilization/gpu-t4-01.csv: line 1: expected 6 fields" in result.stderr
    assert "Traceback" not in result.stderr


def test_playbook_passes_syntax_check():
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    result = subprocess.run([ansible_playbook, "-i", "localhost,", "--syntax-check", "gpuprov.gpu.baseline"],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def fake_node(tmp_path):
    # Load the fake by path: `import pynvml` may already have given this process the real one.
    spec = importlib.util.spec_from_file_location("gpuprov_fake_pynvml", os.path.join(FAKES, "python", "pynvml.py"))
    fake = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = fake      # the fake looks itself up there while loading
    spec.loader.exec_module(fake)
    state = tmp_path / "nvml.json"
    fake.write_new_state(str(state), gpus=[("T4", 1)])
    env = dict(os.environ, GPUPROV_FAKE_NVML_STATE=str(state),
               PATH=os.path.join(FAKES, "bin") + os.pathsep + os.environ["PATH"])
    probe = subprocess.run(
        ["timeout", "--signal=INT", "2", "nvidia-smi", "--query-gpu=" + diag.NVIDIA_SMI_QUERY,
         "--format=csv,noheader,nounits", "-l", "1", "-f", str(tmp_path / "probe.csv")],
        env=env, capture_output=True, text=True)
    if probe.returncode not in (0, 124) or not (tmp_path / "probe.csv").exists():
        pytest.skip("tests/fakes/bin/nvidia-smi does not support -l/-f yet (rc %d: %s)"
                    % (probe.returncode, (probe.stderr or probe.stdout).strip()))
    return env


def test_baseline_on_localhost_with_the_fake_nvidia_smi(fake_node, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu-t4-01:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n")
    out_dir = tmp_path / "baseline"
    result = subprocess.run([sys.executable, "-m", "gpuprov", "baseline", "-i", str(inventory), "--duration", "3",
                             "--out", str(out_dir), "-o", "json"],
                            cwd=REPO, env=fake_node, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    (gpu,) = summary["nodes"]["gpu-t4-01"]
    assert gpu["name"] == "Tesla T4" and gpu["samples"] >= 2
    assert (out_dir / "utilization" / "gpu-t4-01.csv").exists()
