"""Hostile input: plan runs nothing, every input is typed and bounded, errors name the file,
output cannot be forged, relative paths and -e mean the same in plan and apply."""
import json
import os
import stat
import textwrap
import tracemalloc

import pytest
import yaml

from testlib import REPO

EXAMPLES = os.path.join(REPO, "examples", "inventory.yml")


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return str(path)


def inventory(tmp_path, hosts, name="inventory.yml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return str(path)


T4 = {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1}


# -- plan runs nothing ------------------------------------------------------------------------

def _pipe(marker):
    return "{{ lookup('pipe', 'touch %s') }}" % marker


@pytest.mark.parametrize("where, command", [
    (where, command) for where in ("gpuprov", "referenced", "unreferenced")
    for command in (("plan",), ("export", "device-plugin"), ("status",), ("apply", "--check"))
    # status and apply run a playbook once the plan is valid; the unreferenced case plans.
    if where != "unreferenced" or command[0] in ("plan", "export")])
def test_a_pipe_lookup_in_any_variable_never_runs(gpuprov, tmp_path, where, command):
    marker = tmp_path / "PWNED"
    host = dict(T4)
    if where == "gpuprov":
        host["gpuprov_gpu_model"] = _pipe(marker)
    elif where == "referenced":
        host["gpuprov_gpu_model"] = "{{ model_name }}"
        host["model_name"] = _pipe(marker)
    else:
        host["unrelated"] = _pipe(marker)
    code, out, err = gpuprov(command[0], "-i", inventory(tmp_path, {"n1": host}), *command[1:])
    assert not marker.exists()
    if where == "unreferenced":
        # Not a gpuprov_* variable and not used by one: never rendered, so no error either.
        assert code == 0, err
    else:
        assert code == 2
        assert "n1: gpuprov_gpu_model: lookup 'pipe' is not allowed while planning" in err


@pytest.mark.parametrize("template", [
    "{{ lookup('ansible.builtin.pipe', 'touch MARKER') }}",
    "{{ query('lines', 'touch MARKER') | first }}",
    "{{ q('ansible.legacy.pipe', 'touch MARKER') }}",
    "{{ lookup('url', 'http://127.0.0.1:9/MARKER') }}",
    "{{ lookup('password', 'MARKER') }}",
    "{{ lookup('vars', 'indirect') }}",
    "{{ lookup('ansible.builtin.template', 'MARKER') }}",
])
def test_every_lookup_but_file_env_vars_is_refused(gpuprov, tmp_path, template):
    marker = tmp_path / "MARKER"
    host = dict(T4, gpuprov_gpu_model=template.replace("MARKER", str(marker)),
                indirect="{{ lookup('pipe', 'touch %s') }}" % marker)
    code, _, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": host}))
    assert code == 2
    assert "is not allowed while planning" in err
    assert not marker.exists()


def test_file_env_and_vars_lookups_render(gpuprov, tmp_path, monkeypatch):
    (tmp_path / "model.txt").write_text("T4")
    monkeypatch.setenv("GPUPROV_TEST_COUNT", "2")
    host = {"gpuprov_gpu_model": "{{ lookup('file', '%s') }}" % (tmp_path / "model.txt"),
            "gpuprov_gpu_count": "{{ lookup('env', 'GPUPROV_TEST_COUNT') | int }}",
            "strategy_name": "time-slicing",
            "gpuprov_sharing": {"strategy": "{{ lookup('vars', 'strategy_name') }}", "replicas": 2}}
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": host}), "-o", "json")
    assert code == 0, err
    node = json.loads(out)["nodes"]["n1"]
    assert node["gpu_count"] == 2 and node["strategy"] == "time-slicing"


def test_a_template_that_never_ends_is_refused_not_waited_for(gpuprov, tmp_path):
    host = dict(T4, gpuprov_gpu_model="{% for i in range(10**9) %}x{% endfor %}")
    code, _, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": host}))
    assert code == 2
    assert "n1: gpuprov_gpu_model: cannot render: the template ran longer than 5 s" in err


@pytest.mark.parametrize("template", [
    "{{ 'x' * 10**10 }}",                                   # 10 GB asked for at once
    "{% set a = 'x' * 10**8 %}{{ (a ~ a ~ a ~ a) * 4 }}",   # grown step by step, quickly
])
def test_a_template_that_fills_memory_is_refused_before_it_does(gpuprov, tmp_path, template):
    host = dict(T4, gpuprov_gpu_model=template)
    code, _, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": host}))
    assert code == 2
    assert "n1: gpuprov_gpu_model: cannot render: the template needs more than 512 MiB of memory" in err


def test_an_inventory_script_is_not_run(gpuprov, tmp_path):
    marker = tmp_path / "PWNED"
    folder = tmp_path / "inv"
    inventory(folder if folder.mkdir() is None else folder, {"n1": T4})
    script = folder / "dynamic.sh"
    script.write_text("#!/bin/sh\ntouch %s\necho '{}'\n" % marker)
    script.chmod(0o755)
    code, _, err = gpuprov("plan", "-i", str(folder))
    assert not marker.exists()
    assert code == 2 and "dynamic.sh" in err


# -- inventories that do not parse ------------------------------------------------------------

@pytest.mark.parametrize("layout", ["inventory", "group_vars", "host_vars", "folder-member"])
def test_a_broken_inventory_file_is_exit_2_naming_it(gpuprov, tmp_path, layout):
    source = inventory(tmp_path / "inv" if (tmp_path / "inv").mkdir() is None else tmp_path, {"n1": T4})
    broken = {"inventory": source,
              "group_vars": str(tmp_path / "inv" / "group_vars" / "all.yml"),
              "host_vars": str(tmp_path / "inv" / "host_vars" / "n1.yml"),
              "folder-member": str(tmp_path / "inv" / "more.ini")}[layout]
    os.makedirs(os.path.dirname(broken), exist_ok=True)
    with open(broken, "w") as handle:
        handle.write("all:\n  hosts:\n    n1: {gpuprov_gpu_model: [T4\n" if layout != "folder-member"
                     else "[gpu\nn1 gpuprov_gpu_count=\n")
    code, out, err = gpuprov("plan", "-i", str(tmp_path / "inv") if layout != "inventory" else source)
    assert code == 2
    assert os.path.basename(broken) in err
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("text, skipped", [
    ("all:\n  hosts:\n    n1: {gpuprov_gpu_model: T4}\nstray: 5\n", "Skipping 'stray'"),
    ("all:\n  hosts:\n    n1: {gpuprov_gpu_model: T4}\n  bogus: {}\n", "Skipping unexpected key (bogus)"),
    ("all:\n  hosts:\n    n1: {gpuprov_gpu_model: T4}\n  children:\n    gpu:\n      model: x\n",
     "Skipping key (model) in group (gpu) as it is not a mapping"),
])
def test_an_inventory_that_parses_only_in_part_is_exit_2(gpuprov, tmp_path, text, skipped):
    path = write(tmp_path / "partial.yml", text)
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2 and out == ""
    assert "inventory %s: %s" % (path, skipped) in err


# -- vault ------------------------------------------------------------------------------------

def _vault(tmp_path, plaintext, name):
    from ansible.parsing.vault import VaultLib, VaultSecret

    secret = VaultSecret(b"correct horse")
    (tmp_path / "vault-pass").write_text("correct horse\n")
    ciphertext = VaultLib([("default", secret)]).encrypt(plaintext.encode(), secret).decode()
    return "%s: !vault |\n%s\n" % (name, textwrap.indent(ciphertext, "  "))


def test_vault_without_a_secret_is_exit_2_naming_the_variable(gpuprov, tmp_path):
    write(tmp_path / "inv" / "host_vars" / "n1.yml", _vault(tmp_path, "T4", "gpuprov_gpu_model"))
    source = write(tmp_path / "inv" / "hosts.yml", "all:\n  hosts:\n    n1:\n")
    code, _, err = gpuprov("plan", "-i", source)
    assert code == 2
    assert "n1: gpuprov_gpu_model: the value is vault-encrypted and no vault secret was given" in err
    code, out, err = gpuprov("plan", "-i", source, "--vault-password-file", str(tmp_path / "vault-pass"),
                             "-o", "json")
    assert code == 0, err
    assert json.loads(out)["nodes"]["n1"]["gpus"][0]["model"] == "T4"


def test_a_vaulted_value_is_never_printed(gpuprov, tmp_path):
    write(tmp_path / "inv" / "host_vars" / "n1.yml",
          _vault(tmp_path, "s3cr3t-model-name", "secret_model") + 'gpuprov_gpu_model: "{{ secret_model }}"\n')
    source = write(tmp_path / "inv" / "hosts.yml", "all:\n  hosts:\n    n1:\n")
    code, out, err = gpuprov("plan", "-i", source, "--vault-password-file", str(tmp_path / "vault-pass"))
    assert code == 2
    assert "gpuprov_gpu_model" in err and "<vaulted>" in err
    assert "s3cr3t" not in err + out


# Every command that reads an inventory, every one that prints results, every one that
# plans or looks GPU models up (the subcommands of baseline each count).
INVENTORY_COMMANDS = [("plan",), ("apply",), ("status",), ("export",), ("baseline", "record"),
                      ("baseline", "start"), ("baseline", "collect"), ("baseline", "stop"), ("top",)]
OUTPUT_COMMANDS = INVENTORY_COMMANDS + [("catalog",), ("fit",), ("diagnose",), ("pool",), ("trial",)]
CATALOG_COMMANDS = [("plan",), ("export",), ("apply",), ("status",), ("fit",), ("catalog",), ("trial",)]


@pytest.mark.parametrize("command", INVENTORY_COMMANDS, ids=" ".join)
def test_every_command_reading_an_inventory_takes_the_vault_options(gpuprov, command):
    code, out, _ = gpuprov(*(command + ("--help",)))
    assert code == 0
    for option in ("--vault-id", "--vault-password-file", "--ask-vault-pass", "-i, --inventory", "-l, --limit"):
        assert option in out, (command, option)


def test_trial_reads_its_inventory_with_the_vault_options_and_one_node():
    """trial converges one canary (--node), so it has no --limit; the rest is shared."""
    from click.testing import CliRunner

    from gpuprov.cli import cli

    out = CliRunner().invoke(cli, ["trial", "--help"]).output
    for option in ("--vault-id", "--vault-password-file", "--ask-vault-pass", "-i, --inventory", "--node HOST"):
        assert option in out, option
    assert "-l, --limit" not in out


@pytest.mark.parametrize("command", OUTPUT_COMMANDS, ids=" ".join)
def test_every_command_that_prints_results_offers_json(gpuprov, command):
    code, out, _ = gpuprov(*(command + ("--help",)))
    assert code == 0
    # click wraps the choices onto the next lines; the option's whole entry is up to the next option.
    entry = out[out.index("-o, --output"):].split("\n  -", 1)[0] if "-o, --output" in out else ""
    assert "json" in entry, command


@pytest.mark.parametrize("command", CATALOG_COMMANDS, ids=" ".join)
def test_every_command_that_looks_models_up_takes_a_catalog_file(gpuprov, command):
    code, out, _ = gpuprov(*(command + ("--help",)))
    assert code == 0
    assert "--catalog FILE" in out, command


# -- typed and bounded ------------------------------------------------------------------------

def test_unknown_gpuprov_variable_has_a_did_you_mean(gpuprov, tmp_path):
    code, _, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": dict(T4, gpuprov_sharng={"strategy": "mps"})}))
    assert code == 2
    assert "n1: gpuprov_sharng: unknown gpuprov variable (did you mean gpuprov_sharing?)" in err


@pytest.mark.parametrize("variables, field", [
    ({"gpuprov_gpu_model": ["T4"]}, "gpuprov_gpu_model: must be a GPU model name"),
    ({"gpuprov_gpu_model": {"a": 1}}, "gpuprov_gpu_model: must be a GPU model name"),
    ({"gpuprov_gpu_count": "8"}, "gpuprov_gpu_count: must be a positive integer"),
    ({"gpuprov_sharing": {"strategy": ["mig"]}}, "gpuprov_sharing.strategy: unknown strategy"),
    ({"gpuprov_sharing": {"strategy": "mig", "mig": {"config": ["all-balanced"]}}, "gpuprov_gpu_model": "A100-80GB"},
     "gpuprov_sharing.mig.config: must be a config name"),
    ({"gpuprov_sharing": {"strategy": "exclusive", 7: "x", None: 1}}, "gpuprov_sharing: unknown key(s)"),
    ({"gpuprov_kubelet": {"topology_manager_policy_options": {"max-allowable-numa-nodes": "9" * 5000}}},
     "max-allowable-numa-nodes: '%s'... is not an integer" % ("9" * 40)),
    ({"gpuprov_mig_config_file": ["a"], "gpuprov_gpu_model": "A100-80GB",
      "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "x"}}}, "gpuprov_mig_config_file: must be a path"),
])
def test_values_of_the_wrong_type_are_exit_2(gpuprov, tmp_path, variables, field):
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": dict(T4, **variables)}))
    assert code == 2, out
    assert "\nn1: " in err and field in err


BOUNDS = [
    ({"gpuprov_gpu_count": 10 ** 12}, "gpuprov_gpu_count: 1000000000000 GPUs on one node; the limit is 64"),
    ({"gpuprov_gpus": [{"model": "T4", "count": 40}, {"model": "T4", "count": 40}], "gpuprov_gpu_model": None},
     "gpuprov_gpus[1].count: 80 GPUs on one node; the limit is 64"),
    ({"gpuprov_sharing": {"strategy": "time-slicing", "replicas": 10 ** 15}},
     "gpuprov_sharing.replicas: 1000000000000000 replicas; the limit is 60 on this node (at most 128 per GPU, "
     "and each replica needs at least 256 MiB"),
    ({"gpuprov_sharing": {"strategy": "time-slicing", "replicas": 129}, "gpuprov_gpu_model": "H100-80GB"},
     "gpuprov_sharing.replicas: 129 replicas; the limit is 128 on this node"),
    ({"gpuprov_gpu_model": "A100-80GB", "gpuprov_sharing": {"strategy": "mig", "mig": {"devices": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 10 ** 12}}]}}},
     "mig-devices.1g.10gb: 1000000000000 instances; a GPU has at most 7"),
    ({"gpuprov_gpu_model": "A100-80GB", "gpuprov_sharing": {"strategy": "mig", "mig": {"devices": [
        {"devices": list(range(65)), "mig-enabled": False}]}}},
     "devices: 65 GPU indices; a node has at most 64 GPUs"),
    ({"gpuprov_gpu_model": "A100-80GB", "gpuprov_sharing": {"strategy": "mig", "mig": {"devices": [
        {"devices": [0, 10 ** 18], "mig-enabled": False}]}}},
     "devices: GPU index 1000000000000000000; a node has at most 64 GPUs (indices 0-63)"),
    ({"gpuprov_kubelet": {"cpu_manager_policy": "static", "reserved_system_cpus": "0-999999999"}},
     "reserved_system_cpus: invalid cpuset '0-999999999': CPU 999999999 is above the largest CPU id "
     "Linux has (8191)"),
    ({"gpuprov_kubelet": {"cpu_manager_policy": "static", "kube_reserved_cpu": "9" * 100000}},
     "kube_reserved_cpu: must be a CPU quantity such as 1, 500m or \"1.5\" (at most 8192 cores)"),
    ({"gpuprov_sharing": {"strategy": "mps", "replicas": 2, "mps": {"provider": "host",
                                                                   "pinned_memory_limit": "900G"}}},
     "pinned_memory_limit: 921600 MiB is more than the 15360 MiB of the node's T4"),
    ({"gpuprov_gpu_model": "T" * 10 ** 6}, "gpuprov_gpu_model: a model name has at most 128 characters"),
    ({"gpuprov_kubelet": {"memory_manager_policy": "Static", "reserved_memory": [{}] * 2000}},
     "gpuprov_kubelet.reserved_memory: must be a list of at most 1024 {numa_node, limits} entries"),
]


@pytest.mark.parametrize("variables, message", BOUNDS)
def test_every_count_has_a_stated_bound_and_costs_nothing_to_refuse(gpuprov, tmp_path, variables, message):
    host = dict(T4, **variables)
    if host["gpuprov_gpu_model"] is None:
        del host["gpuprov_gpu_model"], host["gpuprov_gpu_count"]
    path = inventory(tmp_path, {"n1": host})
    tracemalloc.start()
    try:
        code, _, err = gpuprov("plan", "-i", path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 2
    assert "\nn1: " in err and message in err
    # Refused before anything is built from the count: a range of 10**9 CPUs or a list of
    # 10**12 GPUs would need gigabytes; the whole plan stays within a few tens of MB.
    assert peak < 64 * 1024 * 1024, peak


# -- files read -------------------------------------------------------------------------------

HOSTILE_FILES = {
    "billion-laughs": ("a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                       + "".join("%s: &%s [%s]\n" % (chr(98 + i), chr(98 + i), ", ".join(["*" + chr(97 + i)] * 10))
                                 for i in range(9)), "YAML aliases are expanded"),
    "deep": ("[" * 100000 + "]" * 100000, "nesting deeper than 64 levels"),
    "binary": (b"version: v1\x00\x01\x02", "binary content"),
    "latin1": ("version: v1\nmig-configs: {caf\xe9: []}\n".encode("latin-1"), "not UTF-8"),
    "huge": ("# " + "x" * (5 * 1024 * 1024), "over the limit"),
    "bigint": ("version: " + "9" * 10000, "not valid YAML"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
def test_a_hostile_mig_parted_file_is_exit_2_naming_it(gpuprov, tmp_path, name):
    content, reason = HOSTILE_FILES[name]
    path = tmp_path / ("%s.yaml" % name)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    host = {"gpuprov_gpu_model": "A100-80GB", "gpuprov_mig_config_file": str(path),
            "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "x"}}}
    code, _, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": host}))
    assert code == 2
    assert "n1: gpuprov_mig_config_file: %s" % path in err
    assert reason in err


def test_a_fifo_is_refused_instead_of_read(gpuprov, tmp_path):
    fifo = tmp_path / "mig.yaml"
    os.mkfifo(str(fifo))
    host = {"gpuprov_gpu_model": "A100-80GB", "gpuprov_mig_config_file": str(fifo),
            "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "x"}}}
    code, _, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": host}))
    assert code == 2 and "not a regular file" in err


# -- node names -------------------------------------------------------------------------------

def test_node_name_must_be_a_kubernetes_name_and_unique(gpuprov, tmp_path):
    code, _, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": dict(T4, gpuprov_node_name="Bad_Name")}))
    assert code == 2 and "n1: gpuprov_node_name: gpuprov_node_name 'Bad_Name' is not a valid Kubernetes node name" in err
    code, _, err = gpuprov("plan", "-i", inventory(tmp_path, {"Upper_Host": T4}))
    assert code == 2 and "host name 'Upper_Host' is not a valid Kubernetes node name" in err
    code, _, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": dict(T4, gpuprov_node_name="k8s-a"),
                                                              "n2": dict(T4, gpuprov_node_name="k8s-a")}))
    assert code == 2
    assert "n1: gpuprov_node_name: node name k8s-a is also the node name of n2" in err


def test_node_name_is_used_in_exports(gpuprov, tmp_path):
    path = inventory(tmp_path, {"Upper_Host": dict(T4, gpuprov_node_name="worker-7.example.com")})
    code, out, err = gpuprov("plan", "-i", path, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["nodes"]["Upper_Host"]["node_name"] == "worker-7.example.com"
    code, out, err = gpuprov("export", "-i", path, "device-plugin", "-o", "json")
    assert code == 0, err
    files = dict((f["name"], f["content"]) for f in json.loads(out)["files"])
    labels = yaml.safe_load(files["node-labels.yaml"].split("---")[0].split("\n", 3)[-1])
    assert labels["metadata"]["name"] == "worker-7.example.com"
    assert "kubectl label node worker-7.example.com" in files["label-nodes.sh"]
    assert "Upper_Host" not in files["label-nodes.sh"]


# -- output cannot be forged ------------------------------------------------------------------

def test_control_characters_in_host_names_and_values_are_escaped(gpuprov, tmp_path):
    hostile = "n1\nFAKE line\x1bc"
    path = inventory(tmp_path, {hostile: dict(T4, gpuprov_node_name="ok-node", gpuprov_sharing={
        "strategy": "time-slicing\n\x1b]0;title\x07", "replicas": 2})})
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2
    assert "\x1b" not in err and "\x07" not in err
    assert all(not line.startswith("FAKE") for line in err.splitlines())
    assert "n1\\x0aFAKE line\\x1bc: gpuprov_sharing.strategy" in err


def test_tables_escape_control_characters(gpuprov, tmp_path):
    path = inventory(tmp_path, {"n1\x1bc\rX": dict(T4, gpuprov_node_name="n1")})
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 0, err
    assert "\x1b" not in out and "\r" not in out
    assert "n1\\x1bc\\x0dX" in out


# -- relative paths: the same in the CLI and the node_plan action -----------------------------

MIG_FILE = """
version: v1
mig-configs:
  site:
    - devices: all
      mig-enabled: true
      mig-devices: {%s: %d}
"""


def _two_sites(tmp_path):
    sources = []
    for site, profile, count in (("east", "3g.40gb", 2), ("west", "7g.80gb", 1)):
        folder = tmp_path / site
        write(folder / "mig" / "config.yaml", MIG_FILE % (profile, count))
        sources.append(write(folder / "hosts.yml", """
            all:
              hosts:
                %s-1:
                  gpuprov_gpu_model: A100-80GB
                  gpuprov_mig_config_file: mig/config.yaml
                  gpuprov_sharing: {strategy: mig, mig: {config: site}}
            """ % site))
    return sources


def test_relative_paths_start_from_the_inventory_source_that_defines_the_host(gpuprov, tmp_path, monkeypatch):
    east, west = _two_sites(tmp_path)
    monkeypatch.chdir(tmp_path)  # not the folder of either file
    code, out, err = gpuprov("plan", "-i", east, "-i", west, "-o", "json")
    assert code == 0, err
    nodes = json.loads(out)["nodes"]
    assert [i["profile"] for i in nodes["east-1"]["gpus"][0]["mig"]["instances"]] == ["3g.40gb", "3g.40gb"]
    assert [i["profile"] for i in nodes["west-1"]["gpus"][0]["mig"]["instances"]] == ["7g.80gb"]


def test_node_plan_action_resolves_relative_paths_as_the_cli(gpuprov, tmp_path, monkeypatch):
    """The action gets inventory_dir from Ansible; the CLI must plan each host the same way."""
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory import load_inventory
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner

    east, west = _two_sites(tmp_path)
    monkeypatch.chdir(tmp_path)
    hosts, _ = load_inventory([east, west])
    code, out, err = gpuprov("plan", "-i", east, "-i", west, "-o", "json")
    cli_nodes = json.loads(out)["nodes"]
    for host in hosts:
        # What node_plan does with task_vars: parse_intent(host, gpuprov vars, inventory_dir).
        inventory_dir = os.path.dirname(east if host.host.startswith("east") else west)
        intent, problems = parse_intent(host.host, host.variables, inventory_dir)
        assert not problems
        plan, problems = Planner().plan_node(intent)
        assert plan["gpus"] == cli_nodes[host.host]["gpus"]
        assert host.base_dir == inventory_dir


# -- apply -e is planned --------------------------------------------------------------------

def test_apply_extra_vars_are_part_of_the_printed_and_validated_plan(gpuprov, tmp_path, monkeypatch):
    from gpuprov import cmd_apply

    runs = []
    monkeypatch.setattr(cmd_apply, "run_playbook", lambda *a, **k: runs.append((a, k)) or (0, {"nodes": {}}))
    path = inventory(tmp_path, {"n1": T4})
    code, _, err = gpuprov("apply", "-i", path, "-e", '{"gpuprov_sharing": {"strategy": "time-slicing", '
                                                        '"replicas": 100000}}')
    assert code == 2 and "n1: gpuprov_sharing.replicas: 100000 replicas" in err
    assert runs == []
    code, out, err = gpuprov("apply", "-i", path, "-e", '{"gpuprov_sharing": {"strategy": "time-slicing", '
                                                        '"replicas": 4}}')
    assert "time-slicing x4" in out
    assert len(runs) == 1
    code, _, err = gpuprov("apply", "-i", path, "-e", "gpuprov_hosts=other-host")
    assert code == 2 and "-e gpuprov_hosts: set by gpuprov apply itself" in err
    assert len(runs) == 1


def test_extra_vars_file_is_read_with_the_same_bounds(gpuprov, tmp_path, monkeypatch):
    from gpuprov import cmd_apply

    monkeypatch.setattr(cmd_apply, "run_playbook", lambda *a, **k: pytest.fail("must not run"))
    bomb = tmp_path / "vars.yml"
    bomb.write_text(HOSTILE_FILES["billion-laughs"][0])
    code, _, err = gpuprov("apply", "-i", inventory(tmp_path, {"n1": T4}), "-e", "@%s" % bomb)
    assert code == 2 and "-e @%s: not valid YAML: more than 500000 values once YAML aliases are expanded" % bomb in err


# -- controller files -------------------------------------------------------------------------

def test_summary_file_is_written_only_in_a_private_folder_without_following_links(tmp_path):
    import importlib.util

    # Loaded from its file: the callback is an Ansible plugin, not an importable package module.
    spec = importlib.util.spec_from_file_location("gpuprov_progress_callback", os.path.join(
        REPO, "collections", "ansible_collections", "gpuprov", "gpu", "plugins", "callback", "progress.py"))
    progress = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(progress)
    write_private = progress.write_private

    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    write_private(str(private / "summary.json"), "{}")
    assert (private / "summary.json").read_text() == "{}"
    target = tmp_path / "victim"
    target.write_text("keep")
    os.symlink(str(target), str(private / "link.json"))
    with pytest.raises(OSError):
        write_private(str(private / "link.json"), "{}")
    assert target.read_text() == "keep"
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(ValueError, match="not a private folder"):
        write_private(str(shared / "summary.json"), "{}")


def test_runner_keeps_the_summary_in_a_0700_folder(monkeypatch, tmp_path):
    from gpuprov import runner

    seen = {}

    class FakePopen:
        """ansible-playbook as the runner starts it: writes its summary where it was told."""

        def __init__(self, argv, env=None, stdout=None, start_new_session=False):
            path = env["GPUPROV_SUMMARY_FILE"]
            seen["mode"] = stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)
            with open(path, "w") as handle:
                json.dump({"nodes": {"n1": {"status": "ok"}}}, handle)
            self.returncode = 0

        def __enter__(self):
            return self

        def __exit__(self, *exc_info):
            return False

        def wait(self):
            return self.returncode

        def kill(self):
            pass

    monkeypatch.setattr(runner.subprocess, "Popen", FakePopen)
    monkeypatch.setattr(runner, "ansible_command", lambda name: "/bin/true")
    rc, summary = runner.run_playbook("pb.yml", ["inv"])
    assert seen["mode"] == 0o700
    assert summary == {"nodes": {"n1": {"status": "ok"}}}


@pytest.mark.parametrize("name, expected", [
    ("gpu-01", "gpu-01"),
    ("../../etc/cron.d/x", None),
    ("..", None),
    ("a/b", None),
    ("n1\nx", None),
])
def test_per_host_file_names_stay_in_their_folder(name, expected):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.file_names import safe_file_name

    result = safe_file_name(name)
    if expected:
        assert result == expected
    else:
        assert "/" not in result and not result.startswith(".") and "\n" not in result
        assert os.path.dirname(os.path.join("/out", result + ".json")) == "/out"
    assert safe_file_name("a/b") != safe_file_name("a_b")


# -- fit writes data only ---------------------------------------------------------------------

def test_fit_inventory_never_carries_a_template_or_a_forged_line(gpuprov, tmp_path):
    marker = tmp_path / "PWNED"
    workloads = tmp_path / "workloads.yaml"
    workloads.write_text(yaml.safe_dump({"workloads": [
        {"name": "{{ lookup('pipe', 'touch %s') }}" % marker, "memory": 10, "isolation": "hard"},
        {"name": "x\n        gpuprov_gpu_model: T4 # forged", "memory": 5},
        {"name": "{% raw %}y{% endraw %}", "memory": 5}],
        "pool": {"model": "A100-SXM4-40GB", "count": "unlimited"}}))
    written = tmp_path / "fit.yml"
    code, _, err = gpuprov("fit", str(workloads), "-o", "inventory", "-w", str(written))
    assert code == 0, err
    text = written.read_text()
    assert all(not line.lstrip().startswith("gpuprov_gpu_model: T4") for line in text.splitlines())
    assert text.count("!unsafe") == 2
    code, out, err = gpuprov("plan", "-i", str(written), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["nodes"]["fit-a100-sxm4-40gb-01"]["gpus"][0]["model"] == "A100-SXM4-40GB"
    # Ansible itself, rendering every variable as a playbook would, keeps the names literal.
    from ansible.parsing.dataloader import DataLoader
    from ansible.inventory.manager import InventoryManager
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    manager = InventoryManager(loader=loader, sources=[str(written)])
    host_vars = VariableManager(loader=loader, inventory=manager).get_vars(host=manager.get_host(
        "fit-a100-sxm4-40gb-01"))
    layout = Templar(loader=loader, variables=host_vars).template(host_vars["fit_layout"])
    names = [w for gpu in layout for w in gpu["workloads"]]
    assert any(name.startswith("{{ lookup('pipe'") for name in names)
    assert any(name.startswith("{% raw %}") for name in names)
    assert not marker.exists()


def test_fit_bounds_counts_and_reads_files_with_the_same_caps(gpuprov, tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"workloads": [{"name": "a", "memory": 1, "replicas": 10 ** 12}],
                                    "pool": {"model": "T4", "count": 10 ** 15, "gpus_per_node": 10 ** 9}}))
    code, _, err = gpuprov("fit", str(path))
    assert code == 2
    assert "workload a: replicas: 1000000000000; the limit is 1000 per workload" in err
    assert "pool: count: 1000000000000000 GPUs; the limit is 100000" in err
    path.write_text(HOSTILE_FILES["billion-laughs"][0])
    code, _, err = gpuprov("fit", str(path))
    assert code == 2 and "%s: not valid YAML: more than 500000 values" % path in err


# -- diagnose ---------------------------------------------------------------------------------

def _strict(text):
    def refuse(name):
        raise ValueError("not JSON: %s" % name)
    return json.loads(text, parse_constant=refuse)


def test_diagnose_skips_samples_that_are_not_measurements_and_prints_strict_json(tmp_path):
    import shutil

    from click.testing import CliRunner

    from gpuprov import cmd_diagnose

    snapshot = tmp_path / "snapshot"
    shutil.copytree(os.path.join(REPO, "examples", "snapshot"), str(snapshot))
    csv_path = snapshot / "utilization" / "gpu-a100-01.csv"
    with open(str(csv_path), "a") as handle:
        for row in ("0, NVIDIA A100-SXM4-80GB, 10, 81920, nan", "1, NVIDIA A100-SXM4-80GB, 10, 81920, inf",
                    "2, NVIDIA A100-SXM4-80GB, 10, 81920, -3", "3, NVIDIA A100-SXM4-80GB, 10, 81920, 250",
                    "999999999, NVIDIA A100-SXM4-80GB, 10, 81920, 5", "0, NVIDIA A100-SXM4-80GB, 90000, 81920, 5",
                    "0, NVIDIA A100-SXM4-80GB, 10, 81920, 1e999"):
            handle.write("2026/11/30 09:59:59.000, %s\n" % row)
    result = CliRunner().invoke(cmd_diagnose.diagnose, ["--snapshot", str(snapshot), "-o", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    report = _strict(result.stdout)
    assert any("utilization/gpu-a100-01.csv: 7 sample(s) skipped" in note for note in report["notes"])


@pytest.mark.parametrize("memory", ["nan", "1e999", "-5", "inf"])
def test_diagnose_refuses_memory_that_is_not_nvidia_smi_mib(tmp_path, memory):
    """memory.used/total are read as nvidia-smi prints MiB (digits, optional MiB): anything else
    is no measurement of nvidia-smi's and the file is refused naming the line."""
    import shutil

    from click.testing import CliRunner

    from gpuprov import cmd_diagnose

    snapshot = tmp_path / "snapshot"
    shutil.copytree(os.path.join(REPO, "examples", "snapshot"), str(snapshot))
    csv_path = snapshot / "utilization" / "gpu-a100-01.csv"
    with open(str(csv_path), "a") as handle:
        handle.write("2026/11/30 09:59:59.000, 0, NVIDIA A100-SXM4-80GB, %s, 81920, 5\n" % memory)
    result = CliRunner().invoke(cmd_diagnose.diagnose, ["--snapshot", str(snapshot), "-o", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 2
    assert "utilization/gpu-a100-01.csv: line" in result.stderr and "memory.used: %r is not a number" % memory \
        in result.stderr


@pytest.mark.parametrize("content, reason", [
    (b"\x00\x01binary", "binary content"),
    (b"- just\n- a list\n", "expected a mapping"),
    (b"clusters: {a: 1}\n", "clusters: expected a list of {name, ...}"),
    (("[" * 5000).encode(), "nesting deeper than 64 levels"),
])
def test_diagnose_malformed_kubeconfig_is_exit_2(tmp_path, content, reason):
    pytest.importorskip("kubernetes")
    from click.testing import CliRunner

    from gpuprov import cmd_diagnose

    path = tmp_path / "kubeconfig"
    path.write_bytes(content)
    result = CliRunner().invoke(cmd_diagnose.diagnose, ["--kubeconfig", str(path)], catch_exceptions=False)
    assert result.exit_code == 2
    assert "kubeconfig %s" % path in result.stderr and reason in result.stderr
