"""The fake kubectl (roles/fake_gpu_node/files/bin/kubectl, still used where no API server runs:
the kubelet_topology_dropin scenario, the fleet's stub cluster) held against the real kubectl
through a real API server (tests/controlplane.py) whose node proxy reaches the same fake
kubelet's HTTPS API (fake-kubelet serve --api-port-file): the same calls, the same answers."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from testlib import FAKES

pytestmark = pytest.mark.control_plane

NODE = "gpu-kubelet-01"
FAKE_KUBECTL = os.path.join(FAKES, "bin", "kubectl")
FAKE_KUBELET = os.path.join(FAKES, "bin", "fake-kubelet")
REAL_KUBECTL = shutil.which("kubectl", path="/usr/local/bin:/usr/bin:/bin")


def machine_address():
    """An IPv4 address of this machine that is not a loopback one (the node proxy refuses those)."""
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True).stdout
    for line in out.splitlines():
        words = line.split()
        if "inet" in words:
            return words[words.index("inet") + 1].split("/")[0]
    return None


@pytest.fixture
def kubelet(cluster, tmp_path):
    """A fake kubelet serving healthz and its API, registered as a Node of the control plane."""
    if REAL_KUBECTL is None:
        pytest.fail("no kubectl on this machine (scripts/setup.sh installs Debian's kubernetes-client)")
    address = machine_address()
    if address is None:
        pytest.fail("this machine has no IPv4 address other than loopback ones; the node proxy refuses those")
    paths = dict((name, str(tmp_path / name)) for name in (
        "status.json", "systemd.json", "nodes.json", "healthz.port", "api.port", "pid", "calls.jsonl"))
    with open(paths["status.json"], "w") as handle:
        json.dump({"healthy": True, "effective_config": {"kind": "KubeletConfiguration",
                                                         "cpuManagerPolicy": "static",
                                                         "topologyManagerPolicy": "single-numa-node"}}, handle)
    with open(paths["systemd.json"], "w") as handle:
        json.dump({"units": {"kubelet.service": {"active": True}}}, handle)
    with open(paths["nodes.json"], "w") as handle:
        json.dump({NODE: {"status": paths["status.json"], "unit": "kubelet.service"}}, handle)
    env = dict(os.environ, GPUPROV_FAKE_SYSTEMD_STATE=paths["systemd.json"], GPUPROV_FAKE_CALL_LOG=paths["calls.jsonl"],
               GPUPROV_FAKE_KUBECTL_NODES=paths["nodes.json"])
    subprocess.run([sys.executable, FAKE_KUBELET, "serve", "--daemonize", "--status", paths["status.json"],
                    "--port-file", paths["healthz.port"], "--pid-file", paths["pid"],
                    "--api-port-file", paths["api.port"], "--cert-dir", str(tmp_path / "pki")], env=env, check=True)
    try:
        cluster.add_node(NODE, address=address, kubelet_port_file=paths["api.port"])
        yield env, paths
    finally:
        subprocess.run([sys.executable, FAKE_KUBELET, "stop", "--pid-file", paths["pid"]], env=env, check=False)


def both(cluster, env, *argv):
    """(real, fake): each kubectl's (rc, stdout, stderr) for the same arguments."""
    args = ["--kubeconfig", cluster.kubeconfig] + list(argv)
    real = subprocess.run([REAL_KUBECTL] + args, capture_output=True, text=True, timeout=60)
    fake = subprocess.run([sys.executable, FAKE_KUBECTL] + args, env=env, capture_output=True, text=True, timeout=60)
    return (real.returncode, real.stdout, real.stderr), (fake.returncode, fake.stdout, fake.stderr)


def test_configz_through_the_node_proxy_is_the_running_kubelets_in_both(cluster, kubelet):
    env, _paths = kubelet
    real, fake = both(cluster, env, "get", "--raw", "/api/v1/nodes/%s/proxy/configz" % NODE)
    assert real[0] == fake[0] == 0, (real, fake)
    assert json.loads(real[1]) == json.loads(fake[1])
    assert json.loads(real[1])["kubeletconfig"]["cpuManagerPolicy"] == "static"


def test_a_kubelet_that_is_down_is_an_error_from_the_proxy_in_both(cluster, kubelet):
    env, paths = kubelet
    with open(paths["systemd.json"], "w") as handle:
        json.dump({"units": {"kubelet.service": {"active": False}}}, handle)
    real, fake = both(cluster, env, "get", "--raw", "/api/v1/nodes/%s/proxy/configz" % NODE)
    assert real[0] == fake[0] == 1, (real, fake)
    # The real proxy's wording depends on how the connection failed (closed here, refused on a
    # real node); both are the API server's error, which is all gpuprov reads.
    assert real[2].startswith("Error from server") and fake[2].startswith("Error from server"), (real, fake)


def test_a_ready_node_is_ready_in_both(cluster, kubelet):
    env, _paths = kubelet
    real, fake = both(cluster, env, "get", "node", NODE, "-o", "json")
    assert real[0] == fake[0] == 0, (real, fake)

    def ready(text):
        return [c["status"] for c in json.loads(text)["status"]["conditions"] if c["type"] == "Ready"]

    assert ready(real[1]) == ready(fake[1]) == ["True"]


def test_an_unknown_node_is_not_found_in_the_same_words(cluster, kubelet):
    env, _paths = kubelet
    real, fake = both(cluster, env, "get", "node", "gpu-nowhere", "-o", "json")
    assert real[0] == fake[0] == 1
    assert real[2] == fake[2] == 'Error from server (NotFound): nodes "gpu-nowhere" not found\n'
    real, fake = both(cluster, env, "get", "--raw", "/api/v1/nodes/gpu-nowhere/proxy/configz")
    assert real[0] == fake[0] == 1
    assert real[2] == fake[2] == 'Error from server (NotFound): nodes "gpu-nowhere" not found\n'


def test_a_stopped_kubelet_the_fake_calls_not_ready_at_once_the_real_after_its_lease(cluster, kubelet):
    """The one difference: a real Node stays Ready until the node lifecycle controller sees
    no Lease renewal for its --node-monitor-grace-period (kubernetes
    pkg/controller/nodelifecycle; tens of seconds by default, the exact v1.37.2 default
    UNVERIFIED here); the fake kubectl reports NotReady as soon as
    the kubelet unit stops. The fake is the stricter one: what waits for Ready on it waits on a
    real cluster too."""
    env, paths = kubelet
    with open(paths["systemd.json"], "w") as handle:
        json.dump({"units": {"kubelet.service": {"active": False}}}, handle)
    real, fake = both(cluster, env, "get", "node", NODE, "-o", "json")

    def ready(text):
        return [c["status"] for c in json.loads(text)["status"]["conditions"] if c["type"] == "Ready"]

    assert (ready(real[1]), ready(fake[1])) == (["True"], ["False"])
