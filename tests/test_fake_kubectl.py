# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fake kubectl: Node Ready and configz follow the fake kubelet, errors as kubectl's."""

import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KUBECTL = os.path.join(REPO, "tests", "fakes", "bin", "kubectl")


def kubectl(env, *argv):
    proc = subprocess.run([sys.executable, KUBECTL] + list(argv), env=env, capture_output=True,
                          text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def test_ready_and_configz_follow_the_running_kubelet(tmp_path):
    status = tmp_path / "status.json"
    systemd = tmp_path / "systemd.json"
    nodes = tmp_path / "nodes.json"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    nodes.write_text(json.dumps({"gpu-01": {"status": str(status), "unit": "kubelet.service"}}))
    status.write_text(json.dumps({"healthy": True, "effective_config": {
        "kind": "KubeletConfiguration", "cpuManagerPolicy": "static"}}))
    systemd.write_text(json.dumps({"units": {"kubelet.service": {"active": True}}}))
    env = dict(os.environ, GPUPROV_FAKE_KUBECTL_NODES=str(nodes),
               GPUPROV_FAKE_SYSTEMD_STATE=str(systemd))
    base = ["--kubeconfig", str(kubeconfig)]

    rc, out, _err = kubectl(env, *base, "get", "node", "gpu-01", "-o", "json")
    assert rc == 0
    assert json.loads(out)["status"]["conditions"][0]["status"] == "True"
    rc, out, _err = kubectl(env, *base, "get", "--raw", "/api/v1/nodes/gpu-01/proxy/configz")
    assert rc == 0
    assert json.loads(out)["kubeletconfig"]["cpuManagerPolicy"] == "static"

    # A crash-looping kubelet: NotReady, and the proxy cannot reach it.
    status.write_text(json.dumps({"healthy": False, "error": "could not restore state"}))
    rc, out, _err = kubectl(env, *base, "get", "node", "gpu-01", "-o", "json")
    assert json.loads(out)["status"]["conditions"][0]["status"] == "False"
    rc, _out, err = kubectl(env, *base, "get", "--raw", "/api/v1/nodes/gpu-01/proxy/configz")
    assert rc == 1 and err.startswith("Error from server (ServiceUnavailable)")

    rc, _out, err = kubectl(env, *base, "get", "node", "gpu-02", "-o", "json")
    assert (rc, err) == (1, 'Error from server (NotFound): nodes "gpu-02" not found\n')
    rc, _out, err = kubectl(env, "--kubeconfig", str(tmp_path / "nope"), "get", "node", "gpu-01",
                            "-o", "json")
    assert (rc, err) == (1, "error: stat %s: no such file or directory\n" % (tmp_path / "nope"))
