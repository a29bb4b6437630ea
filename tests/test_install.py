"""After `pip install .`, Ansible finds the collection from any folder with no path setting."""
import json
import os
import subprocess
import sys
import sysconfig

import pytest

SITE = sysconfig.get_paths()["purelib"]
INSTALLED = os.path.join(SITE, "ansible_collections", "gpuprov", "gpu", "MANIFEST.json")


@pytest.mark.skipif(not os.path.exists(INSTALLED),
                    reason="gpuprov is not pip-installed in this environment (scripts/setup.sh installs it)")
def test_ansible_doc_finds_installed_collection_from_any_folder(tmp_path):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env["HOME"] = str(tmp_path)  # no ~/.ansible.cfg, no user collections
    ansible_doc = os.path.join(os.path.dirname(sys.executable), "ansible-doc")
    out = subprocess.run([ansible_doc, "-l", "gpuprov.gpu", "-j"], cwd=str(tmp_path), env=env,
                         capture_output=True, text=True, check=True).stdout
    modules = json.loads(out)
    for name in ("gpu_facts", "mig_mode", "mig_layout", "kubelet_config", "mps_daemon", "node_plan"):
        assert "gpuprov.gpu." + name in modules, sorted(modules)
    doc = subprocess.run([ansible_doc, "gpuprov.gpu.mig_layout"], cwd=str(tmp_path), env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "Minimal" in doc or "kept" in doc
    # The roles travel with it too.
    assert os.path.isdir(os.path.join(SITE, "ansible_collections", "gpuprov", "gpu", "roles", "gpu_mig", "tasks"))


@pytest.mark.skipif(not os.path.exists(INSTALLED),
                    reason="gpuprov is not pip-installed in this environment (scripts/setup.sh installs it)")
def test_ansible_galaxy_verify_accepts_the_installed_collection(tmp_path):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env["HOME"] = str(tmp_path)
    galaxy = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")
    run = subprocess.run([galaxy, "collection", "verify", "--offline", "gpuprov.gpu"], cwd=str(tmp_path), env=env,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert os.path.join(SITE, "ansible_collections", "gpuprov", "gpu") in run.stdout
    assert "Successfully verified" in run.stdout
