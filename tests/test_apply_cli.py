"""`gpuprov apply` options as they reach the playbook (the runs themselves: tests/fleet)."""
import os

# Imported here, before the CLI fixture installs Ansible's collection finder: a test module
# collected earlier may have imported part of the collection through sys.path, and the finder
# then refuses to add the rest of that package (as in tests/test_cluster.py's imports).
from gpuprov import planning  # noqa: F401

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(REPO, "examples", "inventory.yml")


def test_apply_passes_the_cap_to_the_playbook(gpuprov, monkeypatch):
    from gpuprov import cmd_apply

    seen = {}

    def fake_run(playbook, inventories, **kwargs):
        seen.update(kwargs["extra_vars"])
        return 0, {"nodes": {}}

    monkeypatch.setattr(cmd_apply, "run_playbook", fake_run)
    gpuprov("apply", "-i", EXAMPLES, "-q", "--wave-max-nodes", "3")
    assert seen["gpuprov_wave_max_nodes"] == 3 and seen["gpuprov_waves"] == [1, "10%", "100%"]
    seen.clear()
    gpuprov("apply", "-i", EXAMPLES, "-q")
    assert seen["gpuprov_wave_max_nodes"] == 5
    code, _out, err = gpuprov("apply", "-i", EXAMPLES, "-q", "--wave-max-nodes", "-1")
    assert code == 2 and "--wave-max-nodes" in err


def test_a_limited_apply_runs_the_cluster_side_on_the_controller(gpuprov, tmp_path):
    """`apply -l NODE` runs the cluster play too: it runs on the implicit localhost, which a
    limit that does not name it would skip (the node would keep its old config label)."""
    import yaml

    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {
        name: {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1, "ansible_connection": "local"}
        for name in ("gpu-a", "gpu-b")}}}))
    marker = tmp_path / "cluster-side-ran"
    playbook = tmp_path / "site.yml"
    playbook.write_text(yaml.safe_dump([
        {"name": "Nodes", "hosts": "{{ gpuprov_hosts }}", "gather_facts": False,
         "tasks": [{"name": "Node", "ansible.builtin.debug": {"msg": "{{ inventory_hostname }}"}}]},
        {"name": "Cluster side", "hosts": "localhost", "gather_facts": False,
         "tasks": [{"name": "Mark", "ansible.builtin.copy": {"dest": str(marker), "content": "{{ gpuprov_hosts }}"}}]},
    ], sort_keys=False))
    code, out, err = gpuprov("apply", "-i", str(inventory), "-l", "gpu-a", "-q", "--playbook", str(playbook))
    assert code == 0, out + err
    assert marker.read_text() == "gpu-a"
    assert "gpu-b" not in out
