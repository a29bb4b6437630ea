"""Tests of the SSH test fleet (tests/fleet/fleet.py).

The tests marked `fleet` start real sshd processes in private mount namespaces and reach them
with Ansible over SSH, host key checking on. They need root and openssh-server and are
skipped with the reason otherwise. The other tests check what the fleet generates for a node
(specs, NVML state, sysfs tree) and run anywhere.
"""

import base64
import hashlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fleet as fleetlib  # noqa: E402  (tests/fleet is not a package)

from ansible_collections.gpuprov.gpu.plugins.module_utils import cpuset  # noqa: E402

REPO_ROOT = fleetlib.REPO_ROOT
ANSIBLE = shutil.which("ansible", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")


def _fleet_skip_reason():
    if os.geteuid() != 0:
        return "fleet tests need root: every node runs in its own mount namespace (unshare -m, mount --bind)"
    if not os.access(fleetlib.SSHD, os.X_OK):
        return f"fleet tests need {fleetlib.SSHD}: apt-get install openssh-server"
    for tool in ("unshare", "ssh", "ssh-keygen", "mount"):
        if shutil.which(tool) is None:
            return f"fleet tests need `{tool}` on PATH"
    if ANSIBLE is None:
        return "fleet tests need the `ansible` command (pip install ansible-core)"
    return None


FLEET_SKIP = _fleet_skip_reason()


def fleet_test(func):
    """Mark a test as a fleet test and skip it where a fleet cannot run."""
    func = pytest.mark.fleet(func)
    return pytest.mark.skipif(FLEET_SKIP is not None, reason=FLEET_SKIP or "")(func)


def free_first_host(count):
    """First octet of `count` free consecutive 127.0.0.N:2222 addresses.

    Starts at 101 (a fleet started by hand uses 11 and up) and gives every xdist worker its
    own range, so parallel runs do not fight over the same addresses.
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    start = 101 + 20 * int(worker.lstrip("gw") or 0)
    for first in range(start, fleetlib.LAST_HOST_OCTET - count + 2):
        if not any(fleetlib.address_in_use(f"127.0.0.{first + i}", fleetlib.SSH_PORT)
                   for i in range(count)):
            return first
    pytest.skip(f"no {count} free consecutive addresses 127.0.0.N:{fleetlib.SSH_PORT} from .{start}")


class AnsibleRun:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.output = f"{proc.stdout}\n{proc.stderr}"
        try:
            data = json.loads(proc.stdout)
        except ValueError:
            pytest.fail(f"ansible printed no JSON (rc {proc.returncode}):\n{self.output}")
        self.hosts = data["plays"][0]["tasks"][0]["hosts"]
        self.stats = data["stats"]


def ansible(inventory, pattern, module, args=None, env=None):
    """Run an ad-hoc module from the repository root (its ansible.cfg applies) with the JSON
    callback; host key checking is forced on whatever the caller's environment says."""
    cmd = [ANSIBLE, "-i", str(inventory), pattern, "-m", module]
    if args is not None:
        cmd += ["-a", args]
    environ = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
                   ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_HOST_KEY_CHECKING="True")
    environ.update(env or {})
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=environ, capture_output=True, text=True,
                          timeout=600, check=False)
    return AnsibleRun(proc)


def inventory_variant(fleet, directory, known_hosts):
    """A copy of the fleet's inventory that trusts another known_hosts file.

    It gets its own ControlPath directory: a master connection opened with the real
    known_hosts would otherwise carry the new connections and skip host key checks.
    """
    data = yaml.safe_load(fleet.inventory.read_text())
    control_dir = directory / "cp"
    control_dir.mkdir(mode=0o700)
    for host in data["all"]["children"]["gpu_nodes"]["hosts"].values():
        host["ansible_ssh_common_args"] = host["ansible_ssh_common_args"].replace(
            f"UserKnownHostsFile={fleet.known_hosts}", f"UserKnownHostsFile={known_hosts}")
        host["ansible_control_path_dir"] = str(control_dir)
    path = directory / "inventory.yml"
    path.write_text(yaml.safe_dump(data))
    return path


def sshd_processes_of(fleet):
    """Live processes whose command line names one of the fleet's sshd_config files."""
    configs = {str(node.sshd_config) for node in fleet.nodes}
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and fleetlib.pid_alive(int(entry)):
            words = " ".join(fleetlib._cmdline(int(entry))).split()
            if configs & set(words):
                found.append(int(entry))
    return found


@pytest.fixture(scope="module")
def running_fleet(tmp_path_factory):
    """Three nodes (default GPU mixes) for the tests of this module; always torn down."""
    if FLEET_SKIP:
        pytest.skip(FLEET_SKIP)
    fleet = fleetlib.Fleet.create(tmp_path_factory.mktemp("fleet"), fleetlib.default_node_specs(3),
                                  first_host=free_first_host(3))
    fleet.up()
    try:
        yield fleet
    finally:
        fleet.down()


# ------------------------------------------------------------------------- without a fleet


def test_default_specs_give_every_node_its_own_gpu_mix():
    specs = fleetlib.default_node_specs(len(fleetlib.DEFAULT_MIXES) ** 2)

    mixes = [tuple((g.model, g.count) for g in spec.gpus) for spec in specs]
    assert len(set(mixes)) == len(mixes)
    assert [spec.name for spec in specs[:3]] == ["gpu01", "gpu02", "gpu03"]
    assert [mix[0] for mix in mixes[:len(fleetlib.DEFAULT_MIXES)]] == list(fleetlib.DEFAULT_MIXES)
    # Every default model is a catalog key the fake NVML can build a state for.
    for model, _count in fleetlib.DEFAULT_MIXES:
        assert fleetlib.resolve_model(model, "test") == model


def test_spec_file_resolves_aliases_and_fills_defaults(tmp_path):
    spec_file = tmp_path / "nodes.yml"
    spec_file.write_text(yaml.safe_dump({"nodes": [
        {"name": "big", "gpus": [{"model": "A100-SXM4-80GB", "count": 8}],
         "numa_nodes": 2, "cpus_per_numa": 24},
        {"name": "small", "gpus": [{"model": "Tesla T4", "count": 1}]},
    ]}))

    big, small = fleetlib.parse_nodes_arg(str(spec_file))

    assert big.gpus == (fleetlib.GpuGroup("A100-80GB", 8),)
    assert (big.numa_nodes, big.cpus_per_numa, big.threads_per_core) == (2, 24, 2)
    assert small.gpus == (fleetlib.GpuGroup("T4", 1),)
    assert (small.numa_nodes, small.cpus_per_numa) == fleetlib.default_topology(1)


@pytest.mark.parametrize("nodes, message", [
    ([{"name": "n1", "gpus": [{"model": "A100-SXM9", "count": 1}]}],
     "nodes[0] (n1).gpus[0].model: unknown GPU model 'A100-SXM9'"),
    ([{"name": "n1", "gpus": [{"model": "T4", "count": 0}]}],
     "nodes[0] (n1).gpus[0].count must be an integer >= 1, got 0"),
    ([{"name": "n1", "gpus": []}, {"name": "n1", "gpus": []}],
     "node name 'n1' appears more than once"),
    ([{"name": "Node_1", "gpus": []}], "nodes[0].name must be a lower-case host name"),
    ([{"name": "n1", "gpus": [], "sockets": 2}], "nodes[0]: unknown field(s) sockets"),
    ([{"name": "n1", "gpus": [], "cpus_per_numa": 7}],
     "nodes[0] (n1).cpus_per_numa (7) must be a multiple of threads_per_core (2)"),
])
def test_spec_file_errors_name_the_node_and_field(tmp_path, nodes, message):
    spec_file = tmp_path / "nodes.yml"
    spec_file.write_text(yaml.safe_dump(nodes))

    with pytest.raises(fleetlib.FleetError) as excinfo:
        fleetlib.parse_nodes_arg(str(spec_file))

    assert message in str(excinfo.value)
    assert str(spec_file) in str(excinfo.value)


def test_nvml_state_has_fleet_unique_stable_uuids():
    gpus = (fleetlib.GpuGroup("H100-80GB", 4),)

    first = fleetlib.initial_nvml_state("gpu01", gpus, numa_nodes=2)
    again = fleetlib.initial_nvml_state("gpu01", gpus, numa_nodes=2)
    other = fleetlib.initial_nvml_state("gpu02", gpus, numa_nodes=2)

    uuids = [gpu["uuid"] for gpu in first["gpus"]]
    assert uuids == [gpu["uuid"] for gpu in again["gpus"]]
    assert not set(uuids) & {gpu["uuid"] for gpu in other["gpus"]}
    assert len(set(uuids)) == 4
    assert [gpu["numa_node"] for gpu in first["gpus"]] == [0, 0, 1, 1]
    assert first["driver_version"] == fleetlib.DRIVER_VERSION
    assert all(gpu["model"] == "H100-80GB" and not gpu["mig_current"] and not gpu["processes"]
               for gpu in first["gpus"])


def test_fake_sysfs_reads_back_through_the_project_readers(tmp_path):
    spec = fleetlib.NodeSpec("gpu01", (fleetlib.GpuGroup("A100-SXM4-40GB", 4),), numa_nodes=2,
                             cpus_per_numa=16, threads_per_core=2, memory_gib_per_numa=64)
    state = fleetlib.initial_nvml_state(spec.name, spec.gpus, spec.numa_nodes)

    fleetlib.write_fake_sysfs(tmp_path, spec, state["gpus"])

    nodes = cpuset.read_numa_node_cpus(str(tmp_path))
    assert cpuset.format_cpuset(nodes[0]) == "0-7,16-23"
    assert cpuset.format_cpuset(nodes[1]) == "8-15,24-31"
    assert cpuset.read_thread_siblings(str(tmp_path), [0, 9]) == {0: [0, 16], 9: [9, 25]}
    assert cpuset.read_numa_node_memory(str(tmp_path)) == {0: 64 << 30, 1: 64 << 30}
    last_gpu = state["gpus"][3]
    pci = tmp_path / "bus" / "pci" / "devices" / fleetlib.sysfs_pci_name(last_gpu["pci_bus_id"])
    assert (pci / "numa_node").read_text() == "1\n"
    assert (pci / "local_cpulist").read_text() == "8-15,24-31\n"


def test_prerequisite_errors_say_what_to_do(monkeypatch):
    monkeypatch.setattr(fleetlib.os, "geteuid", lambda: 1000)
    with pytest.raises(fleetlib.FleetError, match="must run as root"):
        fleetlib.check_prerequisites()

    monkeypatch.setattr(fleetlib.os, "geteuid", lambda: 0)
    monkeypatch.setattr(fleetlib, "SSHD", "/nonexistent/sbin/sshd")
    with pytest.raises(fleetlib.FleetError, match="apt-get install openssh-server"):
        fleetlib.check_prerequisites()


# ------------------------------------------------------------------------------ with a fleet


@fleet_test
def test_ping_every_node_with_host_key_checking(running_fleet):
    run = ansible(running_fleet.inventory, "all", "ansible.builtin.ping")

    assert run.rc == 0, run.output
    assert {name: result.get("ping") for name, result in run.hosts.items()} == {
        node.name: "pong" for node in running_fleet.nodes}
    inventory = yaml.safe_load(running_fleet.inventory.read_text())
    for host in inventory["all"]["children"]["gpu_nodes"]["hosts"].values():
        assert "StrictHostKeyChecking=yes" in host["ansible_ssh_common_args"]
        assert host["ansible_python_interpreter"] == sys.executable


@fleet_test
def test_each_node_has_its_own_kubelet_dir(running_fleet):
    first, second, _third = running_fleet.nodes
    marker = "/var/lib/kubelet/fleet-test-marker"

    written = ansible(running_fleet.inventory, first.name, "ansible.builtin.copy",
                      f"content={first.name} dest={marker} mode=0644")
    seen = ansible(running_fleet.inventory, "all", "ansible.builtin.stat", f"path={marker}")

    assert written.rc == 0 and written.hosts[first.name]["changed"], written.output
    exists = {name: result["stat"]["exists"] for name, result in seen.hosts.items()}
    assert exists == {node.name: node is first for node in running_fleet.nodes}
    assert first.private_path(marker).read_text() == first.name
    assert not second.private_path(marker).exists()
    assert not Path(marker).exists()  # the host's own directory is untouched
    config = ansible(running_fleet.inventory, "all", "ansible.builtin.slurp",
                     "src=/var/lib/kubelet/config.yaml")
    assert all(b"kind: KubeletConfiguration" in base64.b64decode(r["content"])
               for r in config.hosts.values()), config.output


@fleet_test
@pytest.mark.parametrize("pipelining", ["True", "False"])
def test_setenv_reaches_the_modules_ansible_runs(running_fleet, pipelining):
    run = ansible(running_fleet.inventory, "all", "ansible.builtin.command", "env",
                  env={"ANSIBLE_PIPELINING": pipelining})

    assert run.rc == 0, run.output
    for node in running_fleet.nodes:
        env = dict(line.split("=", 1) for line in run.hosts[node.name]["stdout_lines"] if "=" in line)
        expected = fleetlib.node_environment(node.name)
        for key in ("PYTHONPATH", "GPUPROV_FAKE_NVML_STATE", "GPUPROV_FAKE_MPS_STATE",
                    "GPUPROV_FAKE_SYSTEMD_STATE", "GPUPROV_FAKE_CALL_LOG", "GPUPROV_SYSFS_ROOT",
                    "GPUPROV_FLEET_NODE"):
            assert env.get(key) == expected[key], (node.name, key)
        # The fake tools come before every system directory (a shell rc file may prepend
        # its own directories, but nothing may push the fakes behind /usr/bin).
        path = env["PATH"].split(":")
        assert path.index(str(fleetlib.FAKES_BIN)) < path.index("/usr/bin")


@fleet_test
def test_python_on_a_node_sees_its_own_fake_gpus(running_fleet):
    code = ("import pynvml; pynvml.nvmlInit(); "
            "print(pynvml.__file__, pynvml.nvmlDeviceGetCount(), "
            "pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0)))")
    run = ansible(running_fleet.inventory, "all", "ansible.builtin.command",
                  f"{sys.executable} -c \"{code}\"")

    assert run.rc == 0, run.output
    for node in running_fleet.nodes:
        module_file, count, first_uuid = run.hosts[node.name]["stdout"].split()
        assert module_file == str(fleetlib.FAKE_PYNVML)
        assert int(count) == node.spec.gpu_count
        assert first_uuid == fleetlib.gpu_uuid(node.name, 0)


@fleet_test
@pytest.mark.skipif(not (fleetlib.FAKES_BIN / "systemctl").is_file(),
                    reason="needs the fake systemctl in roles/fake_gpu_node/files/bin")
def test_each_node_runs_a_kubelet_in_its_own_fake_systemd(running_fleet):
    first = running_fleet.nodes[0]

    stopped = ansible(running_fleet.inventory, first.name, "ansible.builtin.command",
                      "systemctl stop kubelet.service")
    states = ansible(running_fleet.inventory, "all", "ansible.builtin.command",
                     "systemctl is-active kubelet.service")
    ansible(running_fleet.inventory, first.name, "ansible.builtin.command",
            "systemctl start kubelet.service")

    assert stopped.rc == 0, stopped.output
    assert {name: result["stdout"] for name, result in states.hosts.items()} == {
        node.name: "inactive" if node is first else "active" for node in running_fleet.nodes}


@fleet_test
def test_a_command_on_a_node_starts_from_a_plain_hosts_shell_files(running_fleet):
    """What Ansible sends a node runs through bash, which reads root's ~/.bashrc: the node has
    a plain host's, so nothing of this machine's (pyenv's init and shims, for one) runs in
    every task or comes before the fake tools; the host's own file is left as it is."""
    node = running_fleet.nodes[0]
    host_bashrc = Path(pwd.getpwuid(0).pw_dir, ".bashrc")
    before = host_bashrc.read_bytes() if host_bashrc.is_file() else None

    proc = subprocess.run(["ssh", "-F", str(running_fleet.ssh_config), "-o", "ControlMaster=no",
                           node.name, "echo $PATH; cat ~/.bashrc 2>/dev/null | sha256sum"],
                          capture_output=True, text=True, timeout=120, check=False)

    assert proc.returncode == 0, proc.stderr
    path_line, digest_line = proc.stdout.strip().splitlines()
    assert path_line == fleetlib.node_environment(node.name)["PATH"]
    plain = Path(fleetlib.PLAIN_HOME_FILES[".bashrc"])
    expected = plain.read_bytes() if plain.is_file() else b""
    if before is not None:
        assert digest_line.split()[0] == hashlib.sha256(expected).hexdigest()
        assert host_bashrc.read_bytes() == before


@fleet_test
def test_login_shell_keeps_the_fake_tools_on_path(running_fleet):
    node = running_fleet.nodes[0]

    proc = subprocess.run(["ssh", "-F", str(running_fleet.ssh_config), "-o", "ControlMaster=no",
                           node.name, "sh -lc 'echo $PATH'"],
                          capture_output=True, text=True, timeout=120, check=False)

    assert proc.returncode == 0, proc.stderr
    path = proc.stdout.strip().split(":")
    assert path.index(str(fleetlib.FAKES_BIN)) < path.index("/usr/bin")


@fleet_test
@pytest.mark.parametrize("entry", ["other node's key", "no entry"])
def test_a_wrong_known_hosts_entry_fails_the_connection(running_fleet, tmp_path, entry):
    first, second, _third = running_fleet.nodes
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(
        f"[{first.address}]:{running_fleet.port} {running_fleet._node_public_key(second)}\n"
        if entry == "other node's key" else "")
    inventory = inventory_variant(running_fleet, tmp_path, known_hosts)

    rejected = ansible(inventory, first.name, "ansible.builtin.ping")
    accepted = ansible(running_fleet.inventory, first.name, "ansible.builtin.ping")

    assert rejected.hosts[first.name].get("unreachable") is True, rejected.output
    assert "Host key verification failed" in rejected.hosts[first.name]["msg"]
    assert accepted.rc == 0 and accepted.hosts[first.name]["ping"] == "pong", accepted.output


@fleet_test
def test_killed_node_is_unreachable_until_started_again(running_fleet):
    victim = running_fleet.nodes[1]
    others = [node.name for node in running_fleet.nodes if node is not victim]
    marker = "/etc/gpuprov/fleet-test-state"
    wrote = ansible(running_fleet.inventory, victim.name, "ansible.builtin.copy",
                    f"content=before-crash dest={marker} mode=0644")
    assert wrote.rc == 0, wrote.output
    namespace = running_fleet.node_namespace(victim.name)

    killed = running_fleet.kill_node(victim.name)
    down = ansible(running_fleet.inventory, "all", "ansible.builtin.ping")

    assert killed >= 2  # the listener and the session Ansible's ControlPersist keeps open
    assert fleetlib.processes_in_namespace(namespace) == []
    assert {row["name"]: row["state"] for row in running_fleet.status()}[victim.name] == "stopped"
    assert down.rc == 4, down.output  # ansible's exit status for unreachable hosts
    assert down.hosts[victim.name].get("unreachable") is True
    assert all(down.stats[name]["ok"] == 1 for name in others)

    running_fleet.start_node(victim.name)
    back = ansible(running_fleet.inventory, "all", "ansible.builtin.ping")
    state = ansible(running_fleet.inventory, victim.name, "ansible.builtin.slurp", f"src={marker}")

    assert back.rc == 0, back.output
    assert base64.b64decode(state.hosts[victim.name]["content"]) == b"before-crash"


@fleet_test
def test_down_stops_every_process_of_the_fleet(tmp_path):
    fleet = fleetlib.Fleet.create(tmp_path / "fleet", fleetlib.default_node_specs(2),
                                  first_host=free_first_host(2))
    fleet.up()
    try:
        ping = ansible(fleet.inventory, "all", "ansible.builtin.ping")
        namespaces = [fleet.node_namespace(node.name) for node in fleet.nodes]
        sessions = [len(fleetlib.processes_in_namespace(ns)) for ns in namespaces]
    finally:
        fleet.down()

    assert ping.rc == 0, ping.output
    assert len(set(namespaces)) == 2 and fleetlib.mount_namespace(os.getpid()) not in namespaces
    assert all(count >= 2 for count in sessions)  # listener + open session per node
    assert [fleetlib.processes_in_namespace(ns) for ns in namespaces] == [[], []]
    assert sshd_processes_of(fleet) == []
    assert not any(node.pid_file.exists() for node in fleet.nodes)
    assert {row["state"] for row in fleet.status()} == {"stopped"}
    after = ansible(fleet.inventory, "all", "ansible.builtin.ping")
    assert after.rc == 4 and all(r.get("unreachable") for r in after.hosts.values()), after.output

    fleet.down(clean=True)
    assert not fleet.directory.exists()


@fleet_test
def test_address_in_use_stops_the_nodes_already_started(tmp_path):
    first_host = free_first_host(2)
    fleet = fleetlib.Fleet.create(tmp_path / "fleet", fleetlib.default_node_specs(2),
                                  first_host=first_host)
    squatter = socket.socket()
    squatter.bind((fleet.nodes[1].address, fleetlib.SSH_PORT))
    squatter.listen()
    try:
        with pytest.raises(fleetlib.FleetError) as excinfo:
            fleet.up()
    finally:
        squatter.close()
        fleet.down()

    message = str(excinfo.value)
    assert f"{fleet.nodes[1].address}:{fleetlib.SSH_PORT} is already in use" in message
    assert "stopped the 1 node(s) already started" in message
    assert sshd_processes_of(fleet) == []


@fleet_test
def test_cli_lifecycle(tmp_path):
    spec_file = tmp_path / "nodes.json"
    spec_file.write_text(json.dumps([
        {"name": "edge-t4", "gpus": [{"model": "T4", "count": 1}], "numa_nodes": 1,
         "cpus_per_numa": 8},
        {"name": "mixed", "gpus": [{"model": "H100-80GB", "count": 2}, {"model": "L40S", "count": 1}],
         "numa_nodes": 2, "cpus_per_numa": 16},
    ]))
    directory = tmp_path / "fleet"

    def cli(*args):
        return subprocess.run([sys.executable, str(Path(fleetlib.__file__)), *args, "--dir", str(directory)],
                              capture_output=True, text=True, timeout=300, check=False)

    up = cli("up", "--nodes", str(spec_file), "--first-host", str(free_first_host(2)))
    try:
        again = cli("up")
        inventory = cli("inventory")
        inventory_text = (directory / "inventory.yml").read_text()
        killed = cli("kill-node", "mixed")
        status = cli("status")
    finally:
        down = cli("down", "--clean")

    assert up.returncode == 0, up.stderr
    progress = [line.split()[1] for line in up.stdout.splitlines() if line.startswith("[")]
    assert progress == ["edge-t4", "mixed"]
    assert again.returncode == 1 and "is already up" in again.stderr
    assert inventory.stdout.strip() == str(directory / "inventory.yml")
    hosts = yaml.safe_load(inventory_text)["all"]["children"]["gpu_nodes"]["hosts"]
    assert hosts["mixed"]["gpuprov_gpus"] == [{"model": "H100-80GB", "count": 2},
                                              {"model": "L40S", "count": 1}]
    assert killed.returncode == 0 and killed.stdout.startswith("mixed: killed")
    states = {line.split()[0]: line.split()[2] for line in status.stdout.splitlines()[1:3]}
    assert states == {"edge-t4": "running", "mixed": "stopped"}
    assert down.returncode == 0, down.stderr
    assert not directory.exists()
