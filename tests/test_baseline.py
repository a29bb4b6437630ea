"""gpuprov baseline: the summary, the ansible-playbook command line, the command around them."""
import importlib.util
import json
import os
import shutil
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


def test_failed_hosts_from_the_progress_summary():
    summary = {"check_mode": False, "nodes": {
        "gpu-t4-01": {"status": "changed", "changed": ["Fetch"], "failed": None, "ok": 4},
        "gpu-t4-02": {"status": "unreachable", "changed": [], "failed": "Failed to connect", "ok": 0},
        "gpu-t4-03": {"status": "failed", "changed": [], "failed": "Sample: rc 9", "ok": 1}}}
    assert cmd_baseline.failed_hosts(summary) == {"gpu-t4-02": "Failed to connect", "gpu-t4-03": "Sample: rc 9"}
    assert cmd_baseline.failed_hosts(None) == {}


def _fake_run(files, rc=0, nodes=None):
    """A runner.run_playbook stand-in: writes what the playbook would have fetched and
    returns what the progress callback's summary would say."""
    calls = []

    def run(playbook, inventories, limit=None, extra_vars=None, extra_args=(), stdout=None, **_):
        calls.append({"playbook": playbook, "inventories": inventories, "limit": limit, "extra_vars": extra_vars,
                      "stdout": stdout})
        dest = extra_vars["gpuprov_baseline_dest"]
        os.makedirs(os.path.join(dest, "utilization"), exist_ok=True)
        for host, text in files.items():
            with open(os.path.join(dest, "utilization", host + ".csv"), "w") as handle:
                handle.write(text)
        summary = {"check_mode": False, "nodes": nodes if nodes is not None else {
            host: {"status": "changed", "changed": ["Fetch the samples to the controller"], "failed": None, "ok": 4}
            for host in files}}
        return rc, summary

    return run, calls


CSV = "".join("2026/11/30 10:00:%02d.000, 0, Tesla T4, 3100, 15360, %d\n" % (i, v)
              for i, v in enumerate([0, 0, 95, 90, 0, 0, 97, 92, 0, 1]))


def test_command_summarises_and_keeps_files_with_out(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu-t4-01:\n")
    run, calls = _fake_run({"gpu-t4-01": CSV})
    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    out_dir = tmp_path / "baseline"
    result = CliRunner().invoke(cmd_baseline.baseline, ["record", "-i", str(inventory), "--duration", "10", "--out",
                                                        str(out_dir), "-l", "gpu-t4-01"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    (call,) = calls
    assert call["playbook"] == "gpuprov.gpu.baseline" and call["limit"] == "gpu-t4-01"
    assert call["extra_vars"] == {"gpuprov_baseline_duration": 10, "gpuprov_baseline_interval": 1,
                                  "gpuprov_baseline_dest": str(out_dir)}
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
    result = CliRunner().invoke(cmd_baseline.baseline, ["record", "-i", str(inventory), "--duration", "10", "-o",
                                                        "json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["schema"] == "gpuprov.baseline/v1"
    assert summary["out"] is None
    assert summary["nodes"]["gpu-t4-01"][0]["sm_p95"] == 97
    assert calls[0]["stdout"] is not None      # Ansible's progress goes to stderr, off the JSON
    assert not os.path.exists(calls[0]["extra_vars"]["gpuprov_baseline_dest"])


def test_command_reports_failed_hosts(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu-t4-01:\n    gpu-t4-02:\n")
    nodes = {"gpu-t4-01": {"status": "changed", "changed": ["Fetch"], "failed": None, "ok": 4},
             "gpu-t4-02": {"status": "failed", "changed": [], "failed": "Sample nvidia-smi: non-zero return code",
                           "ok": 2}}
    run, _calls = _fake_run({"gpu-t4-01": CSV}, rc=2, nodes=nodes)
    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    result = CliRunner().invoke(cmd_baseline.baseline, ["record", "-i", str(inventory), "--duration", "10"],
                                catch_exceptions=False)
    assert result.exit_code == 1
    assert "ansible-playbook exited 2 (one or more hosts failed)" in result.stderr
    assert "No samples from gpu-t4-02: Sample nvidia-smi: non-zero return code" in result.stdout
    assert any(line.startswith("gpu-t4-01") for line in result.stdout.splitlines())


def test_command_rejects_bad_input(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cmd_baseline.baseline, ["record", "-i", str(tmp_path / "missing.yml"), "--duration", "5"])
    assert result.exit_code == 2
    assert "missing.yml: inventory not found" in result.stderr
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    result = runner.invoke(cmd_baseline.baseline, ["record", "-i", str(inventory), "--duration", "5", "--interval", "10"])
    assert result.exit_code == 2
    assert "--interval 10 is longer than --duration 5" in result.stderr
    result = runner.invoke(cmd_baseline.baseline, ["record", "-i", str(inventory), "--duration", "0"])
    assert result.exit_code == 2


def test_unreadable_samples_name_the_file(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    run, _calls = _fake_run({"gpu-t4-01": "this is not nvidia-smi output\n"})
    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    result = CliRunner().invoke(cmd_baseline.baseline, ["record", "-i", str(inventory), "--duration", "3", "--out",
                                                        str(tmp_path / "o")], catch_exceptions=False)
    assert result.exit_code == 1
    assert "utilization/gpu-t4-01.csv: line 1: expected 6 fields" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("playbook", ["gpuprov.gpu.baseline", "gpuprov.gpu.baseline_start",
                                      "gpuprov.gpu.baseline_collect", "gpuprov.gpu.baseline_stop"])
def test_playbook_passes_syntax_check(playbook):
    ansible_playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    result = subprocess.run([ansible_playbook, "-i", "localhost,", "--syntax-check", playbook],
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
        pytest.skip("roles/fake_gpu_node/files/bin/nvidia-smi does not support -l/-f yet (rc %d: %s)"
                    % (probe.returncode, (probe.stderr or probe.stdout).strip()))
    return env


def test_baseline_on_localhost_with_the_fake_nvidia_smi(fake_node, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all:\n  hosts:\n    gpu-t4-01:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: \"{{ ansible_playbook_python }}\"\n")
    out_dir = tmp_path / "baseline"
    result = subprocess.run([sys.executable, "-m", "gpuprov", "baseline", "record", "-i", str(inventory),
                             "--duration", "3",
                             "--out", str(out_dir), "-o", "json"],
                            cwd=REPO, env=fake_node, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    (gpu,) = summary["nodes"]["gpu-t4-01"]
    assert gpu["name"] == "Tesla T4" and gpu["samples"] >= 2
    assert (out_dir / "utilization" / "gpu-t4-01.csv").exists()


# ------------------------------------------------------------------ start / collect / stop


def test_parse_interval():
    assert [cmd_baseline.parse_interval(t) for t in ("5s", "5", "2m", "60m")] == [5, 5, 120, 3600]
    for bad in ("0s", "61m", "1.5s", "5h", "s", ""):
        with pytest.raises(ValueError, match="1s to 60m"):
            cmd_baseline.parse_interval(bad)


def test_join_rotated_puts_the_oldest_file_first(tmp_path):
    (tmp_path / "samples.csv").write_text("c\n")
    (tmp_path / "samples.csv.1").write_text("b\n")
    (tmp_path / "samples.csv.10").write_text("a-oldest")       # torn: a newline is added
    (tmp_path / "samples.csv.2").write_text("a\n")
    (tmp_path / "other.csv").write_text("not ours\n")
    text, names = cmd_baseline.join_rotated(str(tmp_path))
    assert names == ["samples.csv.10", "samples.csv.2", "samples.csv.1", "samples.csv"]
    assert text == "a-oldest\na\nb\nc\n"


def test_torn_last_line_is_left_out_with_a_note():
    text = CSV + "2026/11/30 10:00:10.000, 0, Tesla T4, 31"
    notes = []
    samples = diag.parse_utilization_csv(text, "utilization/n.csv", notes=notes)
    assert len(samples) == 10
    assert notes == ["utilization/n.csv: line 11 is cut off mid-row ('2026/11/30 10:00:10.000, 0, Tesla T4, 31', "
                     "no newline): read up to the line before it"]
    # A torn row may even look whole: "97" cut to "9" still has six fields.
    notes = []
    assert len(diag.parse_utilization_csv(CSV + "2026/11/30 10:00:10.000, 0, Tesla T4, 3100, 15360, 9", "x",
                                          notes=notes)) == 10
    assert len(notes) == 1
    # Without `notes` nothing is dropped silently: the same line is an error.
    with pytest.raises(diag.SnapshotError, match="line 11: expected 6 fields"):
        diag.parse_utilization_csv(text, "utilization/n.csv")


def test_snapshot_reads_a_torn_file_up_to_the_tear(tmp_path):
    fixture = os.path.join(REPO, "tests", "fixtures", "diagnose", "application_cpu_bound")
    snapshot = tmp_path / "snap"
    shutil.copytree(fixture, snapshot)
    (path,) = list((snapshot / "utilization").iterdir())
    whole = path.read_text()
    path.write_text(whole + whole.splitlines()[0][:25])
    loaded = diag.load_snapshot(str(snapshot))
    assert len(loaded.utilization[path.stem]) == len(whole.splitlines())
    assert any("is cut off mid-row" in note for note in loaded.notes)


def _collect_run(files, nodes=None):
    calls = []

    def run(playbook, inventories, limit=None, extra_vars=None, extra_args=(), stdout=None, **_):
        calls.append({"playbook": playbook, "extra_vars": extra_vars, "extra_args": list(extra_args)})
        dest = extra_vars["gpuprov_baseline_dest"]
        for host, named in files.items():
            os.makedirs(os.path.join(dest, "raw", host), exist_ok=True)
            for name, text in named.items():
                with open(os.path.join(dest, "raw", host, name), "w") as handle:
                    handle.write(text)
        return 0, {"check_mode": False, "nodes": nodes or {
            host: {"status": "unchanged", "changed": [], "failed": None, "ok": 5} for host in files}}

    return run, calls


def test_collect_joins_rotated_files_into_the_snapshot(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    lines = CSV.splitlines(keepends=True)
    run, calls = _collect_run({"gpu-t4-01": {"samples.csv.1": "".join(lines[:6]),
                                             "samples.csv": "".join(lines[6:]) + "2026/11/30 10:0"}})
    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    out = tmp_path / "snap"
    result = CliRunner().invoke(cmd_baseline.baseline, ["collect", "-i", str(inventory), "--out", str(out),
                                                        "-e", "gpuprov_baseline_dir=/run/x", "-o", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert calls[0]["playbook"] == "gpuprov.gpu.baseline_collect"
    assert calls[0]["extra_vars"] == {"gpuprov_baseline_dest": str(out)}
    assert calls[0]["extra_args"] == ["-e", "gpuprov_baseline_dir=/run/x"]
    node = json.loads(result.stdout)["nodes"]["gpu-t4-01"]
    assert (node["samples"], node["first"], node["last"]) == (10, "2026/11/30 10:00:00.000", "2026/11/30 10:00:09.000")
    assert node["files"] == ["samples.csv.1", "samples.csv"]
    assert "cut off mid-row" in node["notes"][0]
    assert (out / "utilization" / "gpu-t4-01.csv").read_text().startswith(CSV)


def test_collect_refuses_a_host_name_that_would_leave_the_folder(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    run, _ = _collect_run({}, nodes={"..": {"status": "unchanged", "changed": [], "failed": None, "ok": 5}})
    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    result = CliRunner().invoke(cmd_baseline.baseline, ["collect", "-i", str(inventory), "--out",
                                                        str(tmp_path / "snap")], catch_exceptions=False)
    assert result.exit_code == 1
    assert "inventory name '..' cannot name a file" in result.stdout
    assert not (tmp_path / "snap" / "utilization" / "...csv").exists()


def test_start_passes_the_interval_in_seconds_and_reports_each_node(monkeypatch, tmp_path):
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    calls = []

    def run(playbook, inventories, limit=None, extra_vars=None, extra_args=(), stdout=None, **_):
        calls.append((playbook, extra_vars))
        return 4, {"nodes": {"a": {"status": "changed", "changed": ["Install the unit"], "failed": None, "ok": 6},
                             "b": {"status": "unreachable", "changed": [], "failed": "ssh: timed out", "ok": 0}}}

    monkeypatch.setattr(cmd_baseline, "run_playbook", run)
    result = CliRunner().invoke(cmd_baseline.baseline, ["start", "-i", str(inventory), "--interval", "1m"],
                                catch_exceptions=False)
    assert calls == [("gpuprov.gpu.baseline_start", {"gpuprov_baseline_interval": 60})]
    assert result.exit_code == 1
    rows = [line.split(None, 2) for line in result.stdout.splitlines()[1:]]
    assert rows == [["a", "changed", "Install the unit"], ["b", "unreachable", "ssh: timed out"]]
    result = CliRunner().invoke(cmd_baseline.baseline, ["start", "-i", str(inventory), "--interval", "2h"])
    assert result.exit_code == 2 and "--interval: '2h'" in result.stderr
