"""Numbers, names and quantities as their consumers read them.

Python's int(), float(), str.isdigit() and the ``\\d`` and ``\\s`` of ``re`` take any Unicode
digit or space ("\u0663" is 3, "\uff13" is 3, "\u00b2" passes isdigit); the kubelet, the API
server and nvidia-smi read ASCII only (Go's strconv). Every number gpuprov reads from input
is therefore read as ASCII digits, every whole-string pattern ends at the end of the string
(``$`` also matches before a trailing newline), and every quantity is finite and at least
a stated floor.
"""
import ast
import json
import os
import re

import pytest
import yaml

from test_hostile_input import T4, inventory, write
from testlib import REPO

ARABIC_3 = "\u0663"
FULLWIDTH_3 = "\uff13"


@pytest.mark.parametrize("kubelet, field", [
    ({"cpu_manager_policy": "static", "reserved_system_cpus": "0-" + ARABIC_3}, "reserved_system_cpus: invalid cpuset"),
    ({"cpu_manager_policy": "static", "reserved_system_cpus": FULLWIDTH_3}, "reserved_system_cpus: invalid cpuset"),
    ({"cpu_manager_policy": "static", "reserved_system_cpus": "0,\u00a01"}, "reserved_system_cpus: invalid cpuset"),
    ({"cpu_manager_policy": "static", "kube_reserved_cpu": ARABIC_3}, "kube_reserved_cpu: must be a CPU quantity"),
    ({"topology_manager_policy": "single-numa-node",
      "topology_manager_policy_options": {"max-allowable-numa-nodes": "1" + ARABIC_3}},
     "topology_manager_policy_options.max-allowable-numa-nodes: '1\\u0663' is not an integer"),
])
def test_numbers_in_non_ascii_digits_are_refused(gpuprov, tmp_path, kubelet, field):
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": dict(T4, gpuprov_kubelet=kubelet)}))
    assert code == 2, out
    assert "n1: gpuprov_kubelet." + field in err, err


def test_pinned_memory_in_non_ascii_digits_is_refused(gpuprov, tmp_path):
    host = dict(T4, gpuprov_sharing={"strategy": "mps", "replicas": 2,
                                     "mps": {"provider": "host", "pinned_memory_limit": ARABIC_3 + "G"}})
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": host}))
    assert code == 2
    assert "n1: gpuprov_sharing.mps.pinned_memory_limit: must be a size" in err, err


@pytest.mark.parametrize("entry, field", [
    ({"memory": ARABIC_3 + "8Gi"}, "memory"),
    ({"compute_capability": "8." + ARABIC_3}, "compute_capability"),
    ({"pci_device_id": "0x20b" + ARABIC_3}, "pci_device_id"),
])
def test_catalog_numbers_in_non_ascii_digits_are_refused(gpuprov, tmp_path, entry, field):
    model = dict({"name": "Lab-GPU", "memory": "48Gi", "compute_capability": "8.9", "pci_device_id": "0x2b85"}, **entry)
    path = write(tmp_path / "gpus.yml", yaml.safe_dump({"models": [model]}))
    code, out, err = gpuprov("catalog", "--catalog", path)
    assert code == 2, out
    assert field in err and path in err, err


@pytest.mark.parametrize("waves", ["\u00b2", ARABIC_3, "1," + FULLWIDTH_3 + "0%"])
def test_apply_waves_in_non_ascii_digits_are_refused(gpuprov, tmp_path, monkeypatch, waves):
    from gpuprov import cmd_apply

    monkeypatch.setattr(cmd_apply, "run_playbook", lambda *a, **k: pytest.fail("must not run"))
    code, out, err = gpuprov("apply", "-i", inventory(tmp_path, {"n1": T4}), "--waves", waves)
    assert code == 2
    assert "--waves" in err and "Traceback" not in err


@pytest.mark.parametrize("name", ["worker-1\n", "worker-1\r", "worker-1\x00", "worker-1\u200b", " worker-1"])
def test_node_names_with_control_or_invisible_characters_are_refused(gpuprov, tmp_path, name):
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": dict(T4, gpuprov_node_name=name)}))
    assert code == 2, out
    assert "n1: gpuprov_node_name: gpuprov_node_name" in err and "is not a valid Kubernetes node name" in err


def test_host_names_that_collide_once_stripped_do_not_both_plan(gpuprov, tmp_path):
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"worker-1": T4, "worker-1\n": T4}))
    assert code == 2, out
    assert "worker-1\\x0a: gpuprov_node_name: host name 'worker-1\\n' is not a valid Kubernetes node name" in err, err


@pytest.mark.parametrize("memory, reason", [
    (1e-300, "at least 1 MiB"),
    (5e-324, "at least 1 MiB"),
    ("0.0000001GiB", "at least 1 MiB"),
    (float("nan"), "finite"),
    (float("inf"), "finite"),
    (10 ** 400, "at most"),
    (ARABIC_3 + "GiB", "must be a size"),
])
def test_absurd_workload_memory_is_refused(gpuprov, tmp_path, memory, reason):
    path = tmp_path / "workloads.yaml"
    path.write_text(yaml.safe_dump({"workloads": [{"name": "w", "memory": memory}],
                                    "pool": [{"model": "A100-80GB", "count": 1}]}))
    code, out, err = gpuprov("fit", str(path))
    assert code == 2, out
    assert "workload w: memory:" in err and reason in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("entry, reason", [
    ({"compute": 1e-300}, "compute:"),
    ({"compute": float("nan")}, "compute:"),
    ({"cpu": 5e-324}, "cpu:"),
    ({"cpu": float("nan")}, "cpu:"),
])
def test_absurd_fractions_are_refused(gpuprov, tmp_path, entry, reason):
    path = tmp_path / "workloads.yaml"
    path.write_text(yaml.safe_dump({"workloads": [dict({"name": "w", "memory": 8}, **entry)],
                                    "pool": [{"model": "A100-80GB", "count": 1}]}))
    code, out, err = gpuprov("fit", str(path))
    assert code == 2, out
    assert "workload w: " + reason in err, err


@pytest.mark.parametrize("scaling", [1e-300, 5e-324, float("nan")])
def test_absurd_hami_scaling_is_refused(gpuprov, tmp_path, scaling):
    host = {"gpuprov_gpu_model": "L20", "gpuprov_gpu_count": 2,
            "gpuprov_sharing": {"strategy": "hami", "hami": {"memory_scaling": scaling}}}
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": host}))
    assert code == 2, out
    assert "n1: gpuprov_sharing.hami.memory_scaling: must be a number" in err, err


@pytest.mark.parametrize("fits", [ARABIC_3 + "0", "1e-300", "nan"])
def test_pool_fits_size_is_read_as_ascii_and_bounded(gpuprov, fits):
    code, out, err = gpuprov("pool", "--snapshot", os.path.join(REPO, "examples", "snapshot"), "--fits", fits)
    assert code == 2, out
    assert "--fits" in err and "Traceback" not in err


def test_diagnose_reads_nvidia_smi_numbers_as_ascii(tmp_path):
    import shutil

    from click.testing import CliRunner

    from gpuprov import cmd_diagnose

    snapshot = tmp_path / "snapshot"
    shutil.copytree(os.path.join(REPO, "examples", "snapshot"), str(snapshot))
    with open(str(snapshot / "utilization" / "gpu-a100-01.csv"), "a") as handle:
        handle.write("2026/11/30 09:59:59.000, 0, NVIDIA A100-SXM4-80GB, %s, 81920, 5\n" % (ARABIC_3 * 3))
    result = CliRunner().invoke(cmd_diagnose.diagnose, ["--snapshot", str(snapshot), "-o", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 2, result.stdout
    assert "memory.used:" in result.stderr and "is not a number" in result.stderr


# -- the class, in the source: every pattern that validates input reads ASCII to the end ---------

COLLECTION = os.path.join(REPO, "collections", "ansible_collections", "gpuprov", "gpu", "plugins")
# What reads input on the controller: the CLI, plugin_utils, and the shared number and cpuset
# parsers of module_utils. (The node side reads NVIDIA tools' replies and the plan's own
# arguments; the node script of top runs on the node.)
PRODUCT = [os.path.join(REPO, "gpuprov"), os.path.join(COLLECTION, "plugin_utils"),
           os.path.join(COLLECTION, "module_utils", "cpuset.py"),
           os.path.join(COLLECTION, "module_utils", "quantities.py"),
           os.path.join(COLLECTION, "module_utils", "decimal_text.py"),
           # The kubelet model reads gpuprov_kubelet at plan time (settings_problems).
           os.path.join(COLLECTION, "module_utils", "kubelet_config")]
NOT_INPUT = [os.path.join(REPO, "gpuprov", "top", "node_script.py")]


def _product_files():
    for top in PRODUCT:
        if top.endswith(".py"):
            yield top
            continue
        for folder, _, files in os.walk(top):
            for name in sorted(files):
                path = os.path.join(folder, name)
                if name.endswith(".py") and path not in NOT_INPUT:
                    yield path


def _patterns():
    """(file, line, pattern, flags) of every re.compile/match/search/fullmatch of a literal."""
    for path in _product_files():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in ast.walk(tree):
            func = node.func if isinstance(node, ast.Call) else None
            if func is None or getattr(func, "attr", None) not in ("compile", "match", "fullmatch", "search") \
                    or getattr(getattr(func, "value", None), "id", None) != "re" or not node.args \
                    or not isinstance(node.args[0], ast.Constant) or not isinstance(node.args[0].value, str):
                continue
            at = 1 if func.attr == "compile" else 2
            flags = [ast.unparse(node.args[at])] if len(node.args) > at else []
            flags += [ast.unparse(k.value) for k in node.keywords if k.arg == "flags"]
            yield os.path.relpath(path, REPO), node.lineno, node.args[0].value, " ".join(flags)


def test_patterns_with_digit_or_space_classes_are_ascii():
    wide = [(path, line, pattern) for path, line, pattern, flags in _patterns()
            if re.search(r"\\[dsw]", pattern) and "ASCII" not in flags and "re.A" not in flags]
    assert not wide, wide


def test_whole_string_patterns_end_at_the_end_of_the_string():
    dollar = [(path, line, pattern) for path, line, pattern, flags in _patterns()
              if pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")]
    assert not dollar, dollar


def test_numbers_from_text_go_through_the_ascii_reader():
    """str.isdigit() and str.isdecimal() take non-ASCII digits; decimal_text.is_digits does not."""
    found = []
    for path in _product_files():
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if re.search(r"\.is(digit|decimal|numeric)\(\)", line) and not path.endswith("decimal_text.py"):
                    found.append("%s:%d" % (os.path.relpath(path, REPO), number))
    assert not found, found


def test_the_plan_json_stays_strict(gpuprov, tmp_path):
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": T4}), "-o", "json")
    assert code == 0, err
    json.loads(out, parse_constant=lambda name: pytest.fail(name))
