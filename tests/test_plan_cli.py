"""`gpuprov plan`: the JSON contract, the example fleet, and every bad-input case."""
import json
import os
import shutil
import textwrap

import pytest
import yaml

from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import MIG_PARTED, module_file
from testlib import REPO

EXAMPLES = os.path.join(REPO, "examples", "inventory.yml")


def write_inventory(tmp_path, hosts, extra_files=None):
    """hosts: {name: vars}. Returns the inventory path."""
    inv = {"all": {"hosts": hosts}}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    for name, text in (extra_files or {}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return str(path)


def plan_json(gpuprov, inventory, *extra):
    code, out, err = gpuprov("plan", "-i", inventory, "-o", "json", *extra)
    assert code == 0, err
    return json.loads(out)


def test_examples_json_contract(gpuprov):
    data = plan_json(gpuprov, EXAMPLES)
    nodes = data["nodes"]
    assert set(nodes) == {"gpu-a100-01", "gpu-a100-02", "gpu-h100-01", "gpu-t4-01", "gpu-t4-02", "gpu-t4-03",
                          "gpu-t4-04", "gpu-l40s-01", "gpu-l40s-02"}
    assert data["skipped_hosts"] == ["cp-01"]
    a100 = nodes["gpu-a100-01"]
    for key in ("gpus", "resources", "device_plugin", "labels", "kubelet", "mps", "actions", "warnings"):
        assert key in a100
    first = a100["gpus"][0]["mig"]["instances"]
    assert sorted(i["profile"] for i in first) == ["1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb"]
    assert all(set(i["placement"]) == {"start", "size"} for i in first)
    assert a100["resources"] == {"nvidia.com/mig-1g.10gb": 16, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-3g.40gb": 8}
    assert a100["device_plugin"]["config_name"] == "mig-mixed"
    assert a100["device_plugin"]["config"] == {"version": "v1", "flags": {"migStrategy": "mixed"}}
    assert a100["labels"] == {"nvidia.com/device-plugin.config": "mig-mixed"}
    assert a100["kubelet"]["cpu_manager_policy"] == "static"
    actions = [s["action"] for s in a100["actions"]]
    assert actions[0] == "drain" and actions[-1] == "uncordon"
    assert actions.index("mig-mode") < actions.index("gpu-reset") < actions.index("mig-layout")
    assert actions.index("mig-layout") < actions.index("kubelet-state-reset")
    # H100 does not need a reset for a MIG mode change.
    assert "gpu-reset" not in [s["action"] for s in nodes["gpu-h100-01"]["actions"]]
    t4 = nodes["gpu-t4-01"]
    assert t4["resources"] == {"nvidia.com/gpu": 4} and t4["device_plugin"]["config_name"] == "ts-4"
    assert t4["gpus"][0]["mig"] is None
    mps = nodes["gpu-l40s-01"]["mps"]
    assert mps["active_thread_percentage"] == 12 and mps["devices"][0]["pinned_memory_limit_mib"] == 46068 // 8
    assert nodes["gpu-l40s-02"]["mps"]["active_thread_percentage"] == 25
    summary = data["summary"]
    assert summary["physical_gpus"] == 36
    assert summary["gpus_by_model"] == {"A100-80GB": 16, "H100-80GB": 8, "L40S": 8, "T4": 4}
    assert summary["resources"]["nvidia.com/mig-1g.10gb"] == 16 + 6 * 7 * 4 + 4 * 7 + 4
    assert set(data["device_plugin_configs"]) == set(summary["device_plugin_configs"])


def test_table_output_and_limit(gpuprov):
    code, out, _ = gpuprov("plan", "-i", EXAMPLES, "-l", "gpu_t4")
    assert code == 0
    assert "gpu-t4-01" in out and "gpu-a100-01" not in out
    assert "Fleet: 4 node(s), 4 physical GPU(s): 4 T4" in out
    code, _, err = gpuprov("plan", "-i", EXAMPLES, "-l", "nosuchgroup")
    assert code == 2 and "matches no host" in err


def test_yaml_output_round_trips(gpuprov):
    code, out, _ = gpuprov("plan", "-i", EXAMPLES, "-o", "yaml", "-l", "gpu-h100-01")
    assert code == 0
    data = yaml.safe_load(out)
    assert len(data["nodes"]["gpu-h100-01"]["gpus"]) == 8


def test_issue_example_resources(gpuprov, tmp_path):
    inv = write_inventory(tmp_path, {"n1": {
        "gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 8,
        "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-1g.10gb"}, "time_slicing_replicas": 4}}})
    node = plan_json(gpuprov, inv)["nodes"]["n1"]
    assert node["resources"] == {"nvidia.com/mig-1g.10gb": 224}
    sharing = node["device_plugin"]["config"]["sharing"]["timeSlicing"]
    assert sharing["resources"] == [{"name": "nvidia.com/mig-1g.10gb", "replicas": 4}]
    assert sharing["failRequestsGreaterThanOne"] is True


def test_single_strategy_advertises_gpu_resource(gpuprov, tmp_path):
    inv = write_inventory(tmp_path, {"n1": {
        "gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 2,
        "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-3g.40gb", "strategy": "single"}}}})
    node = plan_json(gpuprov, inv)["nodes"]["n1"]
    assert node["resources"] == {"nvidia.com/gpu": 4}
    assert node["device_plugin"]["config"]["flags"]["migStrategy"] == "single"


def test_builtin_configs_follow_each_model(gpuprov, tmp_path):
    inv = write_inventory(tmp_path, {
        "a40": {"gpuprov_gpu_model": "A100-SXM4-40GB", "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-1g.10gb"}}},
        "h100": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-1g.10gb"}}},
        "a30": {"gpuprov_gpu_model": "A30", "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}},
        "me": {"gpuprov_gpu_model": "H200", "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-1g.18gb.me"}}},
    })
    nodes = plan_json(gpuprov, inv)["nodes"]
    # On A100-40GB 1g.10gb is the double-memory profile (max 4), on H100 the small one (max 7).
    assert nodes["a40"]["resources"] == {"nvidia.com/mig-1g.10gb": 4}
    assert nodes["h100"]["resources"] == {"nvidia.com/mig-1g.10gb": 7}
    assert nodes["a30"]["resources"] == {"nvidia.com/mig-1g.6gb": 2, "nvidia.com/mig-2g.12gb": 1}
    assert nodes["me"]["resources"] == {"nvidia.com/mig-1g.18gb.me": 1}


def test_mixed_models_on_one_node(gpuprov, tmp_path):
    inv = write_inventory(tmp_path, {"station": {
        "gpuprov_gpus": [{"model": "A100-80GB", "count": 4}, {"model": "T4", "count": 1}],
        "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-7g.80gb"}}}})
    node = plan_json(gpuprov, inv)["nodes"]["station"]
    assert node["resources"] == {"nvidia.com/gpu": 1, "nvidia.com/mig-7g.80gb": 4}
    assert node["gpus"][4]["model"] == "T4" and node["gpus"][4]["mig"] is None


def test_group_vars_and_templates_resolve_like_ansible(gpuprov, tmp_path):
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "pool.yml").write_text(
        "pool_replicas: 6\ngpuprov_gpu_model: L4\ngpuprov_sharing:\n  strategy: time-slicing\n"
        "  replicas: \"{{ pool_replicas }}\"\n")
    (tmp_path / "inventory.ini").write_text("[pool]\nl4-[1:3]\n")
    data = plan_json(gpuprov, str(tmp_path / "inventory.ini"))
    assert sorted(data["nodes"]) == ["l4-1", "l4-2", "l4-3"]
    assert data["nodes"]["l4-2"]["resources"] == {"nvidia.com/gpu": 6}


@pytest.mark.parametrize("config,model,expected", [
    ("all-balanced", "H200-141GB", {"nvidia.com/mig-1g.18gb": 2, "nvidia.com/mig-2g.35gb": 1, "nvidia.com/mig-3g.71gb": 1}),
    ("all-balanced", "A30", {"nvidia.com/mig-1g.6gb": 2, "nvidia.com/mig-2g.12gb": 1}),
    ("all-1g.10gb", "A100-SXM4-40GB", {"nvidia.com/mig-1g.10gb": 4}),
    ("all-1g.10gb", "A100-80GB", {"nvidia.com/mig-1g.10gb": 7}),
    ("all-3g.47gb", "H100-NVL", {"nvidia.com/mig-3g.47gb": 2}),
    ("all-disabled", "H100-80GB", {"nvidia.com/gpu": 1}),
])
def test_nvidia_config_default_is_understood(gpuprov, tmp_path, config, model, expected):
    # NVIDIA's shipped configs, at the mig-parted version tests/peers pins (Go module cache).
    shutil.copy(module_file(MIG_PARTED, "deployments/systemd/config-default.yaml"), tmp_path / "nv.yaml")
    inv = write_inventory(tmp_path, {"n": {"gpuprov_gpu_model": model, "gpuprov_mig_config_file": "nv.yaml",
                                           "gpuprov_sharing": {"strategy": "mig", "mig": {"config": config}}}})
    assert plan_json(gpuprov, inv)["nodes"]["n"]["resources"] == expected


def test_nvidia_per_device_example_config(gpuprov, tmp_path):
    shutil.copy(module_file(MIG_PARTED, "examples/config.yaml"), tmp_path / "ex.yaml")
    inv = write_inventory(tmp_path, {"dgx": {"gpuprov_gpu_model": "A100-SXM4-40GB", "gpuprov_gpu_count": 8,
                                             "gpuprov_mig_config_file": "ex.yaml",
                                             "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "custom-config"}}}})
    node = plan_json(gpuprov, inv)["nodes"]["dgx"]
    assert [g["mig"]["enabled"] for g in node["gpus"]] == [False] * 4 + [True] * 4
    assert node["resources"] == {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.5gb": 9, "nvidia.com/mig-2g.10gb": 4,
                                 "nvidia.com/mig-3g.20gb": 3}


BAD_HOSTS = {
    "unknown-model": {"gpuprov_gpu_model": "A100-SXM4-81GB"},
    "mig-on-t4": {"gpuprov_gpu_model": "T4", "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}},
    "missing-profile": {"gpuprov_gpu_model": "H100-80GB", "gpuprov_sharing": {"strategy": "mig", "mig": {
        "devices": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 1}}]}}},
    "no-placement": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_sharing": {"strategy": "mig", "mig": {
        "devices": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2, "1g.10gb": 1}}]}}},
    "over-max": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_sharing": {"strategy": "mig", "mig": {
        "devices": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 8}}]}}},
    "replicas-one": {"gpuprov_gpu_model": "T4", "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 1}},
    "mps-too-many": {"gpuprov_gpu_model": "L40S", "gpuprov_sharing": {"strategy": "mps", "replicas": 49}},
    "mps-volta": {"gpuprov_gpu_model": "V100-32GB", "gpuprov_sharing": {"strategy": "mps", "replicas": 17}},
    "mps-with-mig": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_sharing": {
        "strategy": "mig", "mig": {"config": "all-balanced"}, "mps": {"provider": "host"}}},
    "mps-and-ts": {"gpuprov_gpu_model": "T4", "gpuprov_sharing": {
        "strategy": "time-slicing", "replicas": 2, "mps": {"provider": "host"}}},
    "index-beyond": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 2, "gpuprov_sharing": {"strategy": "mig", "mig": {
        "devices": [{"devices": [0, 2], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]}}},
    "single-mixed": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_sharing": {"strategy": "mig", "mig": {
        "config": "all-balanced", "strategy": "single"}}},
    "static-no-reserve": {"gpuprov_gpu_model": "T4", "gpuprov_kubelet": {"cpu_manager_policy": "static"}},
    "bad-cpuset": {"gpuprov_gpu_model": "T4", "gpuprov_kubelet": {"cpu_manager_policy": "static",
                                                                  "reserved_system_cpus": "3-1"}},
    "bad-policy": {"gpuprov_gpu_model": "T4", "gpuprov_kubelet": {"topology_manager_policy": "single-numa"}},
    "missing-file": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_mig_config_file": "nope.yaml",
                     "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "x"}}},
    "malformed-file": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_mig_config_file": "bad.yaml",
                       "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "x"}}},
    "no-such-config": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_mig_config_file": "good.yaml",
                       "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-5g"}}},
    "no-such-builtin": {"gpuprov_gpu_model": "A100-80GB", "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-5g"}}},
    "bad-strategy": {"gpuprov_gpu_model": "T4", "gpuprov_sharing": {"strategy": "timeslicing", "replicas": 2}},
}
EXPECTED = {
    "unknown-model": ("gpuprov_gpu_model", "did you mean A100-80GB"),
    "mig-on-t4": ("gpuprov_sharing.strategy", "no MIG"),
    "missing-profile": ("mig-devices", "has no MIG profile 3g.20gb"),
    "no-placement": ("mig-devices", "no non-overlapping placement"),
    "over-max": ("mig-devices", "a GPU has at most 7"),
    "replicas-one": ("gpuprov_sharing.replicas", ">= 2"),
    "mps-too-many": ("gpuprov_sharing.replicas", "limit of 48"),
    "mps-volta": ("gpuprov_sharing.replicas", "limit of 16"),
    "mps-with-mig": ("gpuprov_sharing.mps", "not supported for MIG"),
    "mps-and-ts": ("gpuprov_sharing.mps", "mutually exclusive"),
    "index-beyond": ("devices", "GPU index 2 is beyond the node's 2 GPU(s)"),
    "single-mixed": ("gpuprov_sharing.mig.strategy", "single strategy needs one MIG profile"),
    "static-no-reserve": ("gpuprov_kubelet.cpu_manager_policy", "static needs a CPU reservation"),
    "bad-cpuset": ("gpuprov_kubelet.reserved_system_cpus", "invalid cpuset"),
    "bad-policy": ("gpuprov_kubelet.topology_manager_policy", "unknown policy 'single-numa'"),
    "missing-file": ("gpuprov_mig_config_file", "file not found"),
    "malformed-file": ("gpuprov_mig_config_file", "unknown version"),
    "no-such-config": ("gpuprov_sharing.mig.config", "no config named 'all-5g'"),
    "no-such-builtin": ("gpuprov_sharing.mig.config", "no built-in config named 'all-5g'"),
    "bad-strategy": ("gpuprov_sharing.strategy", "unknown strategy 'timeslicing'"),
}


def test_every_bad_input_reported_in_one_run(gpuprov, tmp_path):
    hosts = dict(BAD_HOSTS)
    hosts["good"] = {"gpuprov_gpu_model": "T4"}
    inv = write_inventory(tmp_path, hosts, {
        "bad.yaml": "version: v2\nmig-configs: {}\n",
        "good.yaml": "version: v1\nmig-configs:\n  half:\n    - devices: all\n      mig-enabled: false\n",
    })
    before = sorted(os.listdir(tmp_path))
    code, out, err = gpuprov("plan", "-i", inv)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    for host, (field, reason) in EXPECTED.items():
        matching = [line for line in lines if line.startswith(host + ": ") and field in line and reason in line]
        assert matching, "%s: expected a line with %r and %r in:\n%s" % (host, field, reason, err)
    assert not any(line.startswith("good:") for line in lines)
    assert sorted(os.listdir(tmp_path)) == before  # nothing written


@pytest.mark.parametrize("host", sorted(BAD_HOSTS))
def test_each_bad_input_alone_exits_2(gpuprov, tmp_path, host):
    inv = write_inventory(tmp_path, {host: BAD_HOSTS[host]}, {
        "bad.yaml": "version: v2\nmig-configs: {}\n",
        "good.yaml": "version: v1\nmig-configs:\n  half:\n    - devices: all\n      mig-enabled: false\n"})
    code, out, err = gpuprov("plan", "-i", inv, "-o", "json")
    assert code == 2 and out == ""
    field, reason = EXPECTED[host]
    assert field in err and reason in err


def test_missing_inventory_is_bad_input(gpuprov, tmp_path):
    code, _, err = gpuprov("plan", "-i", str(tmp_path / "nope.yml"))
    assert code == 2 and "no such file" in err


def test_plan_refuses_a_bad_kubelet_value_naming_host_and_field(gpuprov, tmp_path):
    inv = write_inventory(tmp_path, {"gpu-01": {
        "gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1,
        "gpuprov_kubelet": {"cpu_manager_reconcile_period": "forever; rm -rf /"}}})
    code, out, err = gpuprov("plan", "-i", inv)
    assert code == 2, out
    assert ("gpu-01: gpuprov_kubelet.cpu_manager_reconcile_period: 'forever; rm -rf /' is not a "
            "Go duration") in err


def test_catalog_command(gpuprov):
    code, out, _ = gpuprov("catalog")
    assert code == 0 and "H200-141GB" in out and "RTX-6000-Ada" in out
    code, out, _ = gpuprov("catalog", "NVIDIA A100-SXM4-40GB")
    assert code == 0 and "3g.20gb" in out and "{0,4}:4" in out
    code, out, _ = gpuprov("catalog", "0x2335", "-o", "json")
    data = json.loads(out)
    assert data["model"] == "H200-141GB" and len(data["mig"]["profiles"]) == 7
    code, _, err = gpuprov("catalog", "H1000")
    assert code == 2 and "did you mean" in err
