"""Rollout waves: no wave larger than gpuprov_wave_max_nodes, so a large fleet is never drained
90% at once in its last wave. site.yml's and kubelet.yml's batches as ansible-playbook runs them;
the wave sizes themselves (resolution as Ansible's serial does, then the cap): the collection's
tests/unit/plugins/plugin_utils/test_node_rollout.py; the CLI option: tests/test_apply_cli.py."""
import json
import os
import re
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _batches(tmp_path, hosts, variables, playbook="site.yml", play="Converge GPU nodes"):
    """Run PLAYBOOK over `hosts` local non-GPU hosts; ansible-playbook announces the play once
    per batch."""
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": dict(
        ("node%02d" % i, {"ansible_connection": "local", "ansible_python_interpreter": sys.executable})
        for i in range(hosts))}}))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory),
                           os.path.join(REPO, "playbooks", playbook), "-e", json.dumps(variables)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return len(re.findall(r"^PLAY \[%s\]" % re.escape(play), proc.stdout, re.M))


def test_site_waves_never_exceed_the_cap(tmp_path):
    # 12 nodes, waves 1, 10%, 100%: uncapped 1, 1, 10 (3 batches, the last drains 10 at once);
    # capped at 4: 1, 1, 4, 4, 2.
    assert _batches(tmp_path, 12, {"gpuprov_wave_max_nodes": 0}) == 3
    assert _batches(tmp_path, 12, {"gpuprov_wave_max_nodes": 4}) == 5
    assert _batches(tmp_path, 12, {}) == 4  # default cap 5: 1, 1, 5, 5


def test_kubelet_waves_never_exceed_the_cap(tmp_path):
    """The kubelet playbook drains each node before its kubelet restarts: its waves are capped
    as site.yml's."""
    kubelet = {"playbook": "kubelet.yml", "play": "Converge kubelet CPU and topology managers on GPU nodes"}
    assert _batches(tmp_path, 12, {"gpuprov_wave_max_nodes": 4}, **kubelet) == 5
    assert _batches(tmp_path, 12, {}, **kubelet) == 4
