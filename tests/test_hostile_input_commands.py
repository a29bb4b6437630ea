"""Hostile input against the commands and files that came with sharing providers, HAMi, the
user catalog, pool, top and fit -o pods: the same promises as test_hostile_input.py."""
import json
import os

import pytest
import yaml

from test_hostile_input import T4, inventory, write


# -- top reads the inventory offline, as plan does ------------------------------------------------

@pytest.mark.parametrize("variable", ["ansible_host", "ansible_user", "ansible_port"])
def test_top_never_runs_a_lookup_in_a_connection_variable(gpuprov, tmp_path, variable):
    marker = tmp_path / "PWNED"
    host = dict(T4)
    host[variable] = "{{ lookup('pipe', 'touch %s') }}" % marker
    code, out, err = gpuprov("top", "-i", inventory(tmp_path, {"n1": host}), "--once", "-o", "json")
    assert not marker.exists()
    assert code == 2
    assert "n1: %s: lookup 'pipe' is not allowed" % variable in err


def test_top_without_a_vault_secret_names_the_variable(gpuprov, tmp_path):
    # An !vault value with no secret given: exit 2 before any connection is tried.
    path = tmp_path / "inventory.yml"
    path.write_text("all:\n  hosts:\n    n1:\n      ansible_user: !vault |\n"
                    "        $ANSIBLE_VAULT;1.1;AES256\n"
                    "        62313365396662343061393464336163383764373764613633653634306231386433626436623361\n"
                    "        6134333665353966363534333632666535333761666131620a663537646436643839616531643561\n")
    code, out, err = gpuprov("top", "-i", str(path), "--once", "-o", "json")
    assert code == 2
    assert "n1: ansible_user:" in err and "vault" in err


# -- user catalog files: bounded like every input file --------------------------------------------

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    "%s: &%s [%s]\n" % (chr(ord("b") + i), chr(ord("b") + i), ", ".join(["*" + chr(ord("a") + i)] * 10))
    for i in range(8)) + "models: []\n"


@pytest.mark.parametrize("content, reason", [
    (ALIAS_BOMB, "alias"),
    ("[" * 5000, "nesting deeper than"),
    ("\x00\x01\x02binary", "binary"),
    ("models:\n" + "".join("  - {name: M%d, memory: 48Gi, compute_capability: \"8.9\", pci_device_id: \"0x%04X\"}\n"
                           % (i, 0x1000 + i) for i in range(300)), "300 entries; the limit is 256"),
])
@pytest.mark.parametrize("command", [("catalog",), ("plan", "-i", None)])
def test_a_hostile_catalog_file_is_exit_2_naming_it(gpuprov, tmp_path, content, reason, command):
    path = tmp_path / "gpus.yml"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    args = [inventory(tmp_path, {"n1": T4}) if part is None else part for part in command]
    code, out, err = gpuprov(*(args + ["--catalog", str(path)]))
    assert code == 2
    assert str(path) in err and reason in err, err


def test_a_hostile_catalog_file_set_per_host_is_exit_2_naming_it(gpuprov, tmp_path):
    path = tmp_path / "gpus.yml"
    path.write_text(ALIAS_BOMB)
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": dict(T4, gpuprov_catalog_file=str(path))}))
    assert code == 2
    assert "n1: gpuprov_catalog_file:" in err and "alias" in err


# -- sharing providers keep their bounds -------------------------------------------------------------

@pytest.mark.parametrize("sharing, reason", [
    ({"strategy": "mig", "mig": {"config": "all-1g.10gb"}, "time_slicing_replicas": 10 ** 12},
     "gpuprov_sharing.time_slicing_replicas: 1000000000000 replicas; the limit is 128 per device"),
    ({"strategy": "mig", "mig": {"config": "all-1g.10gb"}, "time_slicing_replicas": {"1g.10gb": 10 ** 12}},
     "gpuprov_sharing.time_slicing_replicas.1g.10gb: 1000000000000 replicas; the limit is 128 per device"),
    ({"strategy": "hami", "hami": {"split_count": 10 ** 12}}, "gpuprov_sharing.hami"),
])
def test_provider_counts_are_bounded(gpuprov, tmp_path, sharing, reason):
    host = {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1, "gpuprov_sharing": sharing}
    code, out, err = gpuprov("plan", "-i", inventory(tmp_path, {"n1": host}))
    assert code == 2
    assert "n1: " + reason in err, err


# -- node names reach the HAMi export -----------------------------------------------------------------

def test_hami_export_names_nodes_by_gpuprov_node_name(gpuprov, tmp_path):
    host = {"gpuprov_gpu_model": "L20", "gpuprov_gpu_count": 2, "gpuprov_node_name": "worker-7.example",
            "gpuprov_sharing": {"strategy": "hami"}}
    code, out, err = gpuprov("export", "-i", inventory(tmp_path, {"Gpu_L20_01": host}), "hami", "-o", "json")
    assert code == 0, err
    files = dict((f["name"], f["content"]) for f in json.loads(out)["files"])
    labels = list(yaml.safe_load_all(files["hami-node-labels.yaml"]))
    assert [d["metadata"]["name"] for d in labels] == ["worker-7.example"]
    configmap = yaml.safe_load(files["hami-device-plugin-configmap.yaml"])
    assert [e["name"] for e in json.loads(configmap["data"]["config.json"])["nodeconfig"]] == ["worker-7.example"]
    assert "Gpu_L20_01" not in files["hami-install.sh"]


# -- pool --snapshot reads with the safe loader ---------------------------------------------------------

@pytest.mark.parametrize("content, reason", [
    (b"[" * 100000, "nesting deeper than"),
    (b'{"items": [NaN]}', "NaN"),
    (b"\xff\xfe not utf-8", "UTF-8"),
])
def test_pool_snapshot_files_are_bounded(gpuprov, tmp_path, content, reason):
    snapshot = tmp_path / "snap"
    snapshot.mkdir()
    (snapshot / "nodes.json").write_bytes(content)
    (snapshot / "pods.json").write_text('{"items": []}')
    code, out, err = gpuprov("pool", "--snapshot", str(snapshot), "-o", "json")
    assert code == 2
    assert "nodes.json" in err and reason in err, err


# -- fit -o pods: names cannot forge YAML ----------------------------------------------------------------

def test_fit_pods_comments_cannot_carry_yaml_of_a_workload_name(gpuprov, tmp_path):
    name = "evil\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: x}\n# "
    path = write(tmp_path / "workloads.yaml", "")
    with open(path, "w") as handle:
        yaml.safe_dump({"workloads": [{"name": name, "memory": 8}],
                        "pool": [{"model": "A100-80GB", "count": 1}]}, handle)
    code, out, err = gpuprov("fit", path, "-o", "pods")
    assert code == 0, err
    documents = [d for d in yaml.safe_load_all(out) if d is not None]
    assert [d["kind"] for d in documents] == ["Deployment"]
    assert all(line.startswith("#") or not line.startswith(("apiVersion: v1", "kind: Secret"))
               for line in out.splitlines())
    assert "evil\\x0a---" in out  # the name is still there, escaped, in the comment


def test_fit_pods_values_go_through_the_dumper(gpuprov, tmp_path):
    path = tmp_path / "workloads.yaml"
    image = "registry.example/app:1 # not a comment"
    path.write_text(yaml.safe_dump({"workloads": [{"name": "app", "memory": 8, "image": image.replace(" ", "")}],
                                    "pool": [{"model": "A100-80GB", "count": 1}]}))
    code, out, err = gpuprov("fit", str(path), "-o", "pods")
    assert code == 0, err
    (deployment,) = [d for d in yaml.safe_load_all(out) if d]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image.replace(" ", "")


def test_fit_pods_refuses_a_workload_asking_for_more_gpus_than_a_node_has(gpuprov, tmp_path):
    path = tmp_path / "workloads.yaml"
    path.write_text(yaml.safe_dump({"workloads": [{"name": "big", "memory": 8, "gpus": 10 ** 9}],
                                    "pool": [{"model": "A100-80GB", "count": 8}]}))
    code, out, err = gpuprov("fit", str(path), "-o", "pods")
    assert code == 2
    assert "workload big: gpus: must be an integer from 1 to 64" in err, err


def test_no_file_written_by_export_is_named_from_input(gpuprov, tmp_path):
    """export --output-dir writes fixed file names only (the host names are data inside)."""
    host = dict(T4, gpuprov_sharing={"strategy": "time-slicing", "replicas": 2})
    out_dir = tmp_path / "out"
    code, out, err = gpuprov("export", "-i", inventory(tmp_path, {"../../escape": host}), "device-plugin",
                             "--output-dir", str(out_dir))
    # The host name is no valid node name: refused before anything is written.
    assert code == 2 and not out_dir.exists()
    assert os.listdir(str(tmp_path)) == ["inventory.yml"]
