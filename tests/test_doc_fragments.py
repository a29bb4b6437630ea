"""What the node modules share is written once, in plugins/doc_fragments, and ansible-doc
shows it in each module's documentation.

Ansible has no fragments for return values (ansible/utils/plugin_docs.py, add_fragments, merges
only DOCUMENTATION sections), so the per-GPU return fields stay in each module's RETURN; the
last test keeps the fields they share described alike.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_MODULES = ("gpu_facts", "mig_mode", "mig_layout", "mps_daemon")


@pytest.fixture(scope="module")
def docs():
    # ansible.cfg in the repository points ansible-doc at this checkout's collection.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    names = ["gpuprov.gpu." + m for m in NODE_MODULES]
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "-j"] + names,
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    return {name.rsplit(".", 1)[1]: value for name, value in json.loads(out).items()}


def test_every_node_module_gets_platform_and_nvml_requirement(docs):
    for name in NODE_MODULES:
        doc = docs[name]["doc"]
        platform = doc["attributes"]["platform"]
        assert (platform["support"], platform["platforms"]) == ("full", "posix"), name
        assert any("nvidia-ml-py" in r for r in doc["requirements"]), name
        # The module's own attributes survive the merge.
        assert "check_mode" in doc["attributes"] and "diff_mode" in doc["attributes"], name


def test_mig_modules_share_the_gpus_option(docs):
    mode = docs["mig_mode"]["doc"]["options"]["gpus"]
    layout = docs["mig_layout"]["doc"]["options"]["gpus"]
    assert mode["default"] == ["all"]
    assert "default" not in layout  # gpus and devices exclude each other in mig_layout
    assert mode["description"] == layout["description"][:len(mode["description"])]
    assert any("skips GPUs without MIG support" in line for line in mode["description"])
    for option in (mode, layout):
        assert (option["type"], option["elements"]) == ("list", "str")


def test_per_gpu_return_fields_are_described_alike(docs):
    rows = {name: docs[name]["return"]["gpus"]["contains"] for name in ("mig_mode", "mig_layout", "mps_daemon")}
    for field, type_ in (("index", "int"), ("name", "str")):
        assert {rows[m][field]["type"] for m in rows} == {type_}, field
    assert rows["mig_mode"]["pci_bus_id"] == rows["mig_layout"]["pci_bus_id"]
