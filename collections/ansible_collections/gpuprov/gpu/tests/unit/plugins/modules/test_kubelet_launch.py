# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""kubelet_launch: the config files and flags the kubelet really runs with, per layer."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.launch import (
    kubespray_advice,
    read_launch,
)
from ansible_collections.gpuprov.gpu.plugins.modules import kubelet_launch

# The files kubeadm installs (kubernetes.io "Configuring each kubelet in your cluster using
# kubeadm", kubelet-integration.md): the packaged unit and kubeadm's drop-in.
KUBELET_UNIT = """[Unit]
Description=kubelet: The Kubernetes Node Agent

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
"""
KUBEADM_DROP_IN = """[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
"""
KUBEADM_FLAGS = ('KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/'
                 'containerd.sock --pod-infra-container-image=registry.k8s.io/pause:3.10"\n')
# Kubespray's unit and environment file (roles/kubernetes/node/templates/kubelet.service.j2,
# kubelet.env.v1beta1.j2), trimmed to what matters here.
KUBESPRAY_UNIT = """[Service]
EnvironmentFile=-/etc/kubernetes/kubelet.env
ExecStart=/usr/local/bin/kubelet \\
\t\t$KUBE_LOGTOSTDERR \\
\t\t$KUBE_LOG_LEVEL \\
\t\t$KUBELET_API_SERVER \\
\t\t$KUBELET_ADDRESS \\
\t\t$KUBELET_PORT \\
\t\t$KUBELET_HOSTNAME \\
\t\t$KUBELET_ARGS \\
\t\t$DOCKER_SOCKET \\
\t\t$KUBELET_NETWORK_PLUGIN \\
\t\t$KUBELET_VOLUME_PLUGIN \\
\t\t$KUBELET_CLOUDPROVIDER
Restart=always
RestartSec=10s
"""
KUBESPRAY_ENV = """KUBE_LOGTOSTDERR="--logtostderr=true"
KUBE_LOG_LEVEL="--v=2"
KUBELET_ADDRESS="--node-ip=10.0.0.5"
KUBELET_HOSTNAME="--hostname-override=gpu-01"
KUBELET_ARGS="--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \\
--config=/etc/kubernetes/kubelet-config.yaml \\
--kubeconfig=/etc/kubernetes/kubelet.conf \\
--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock \\
--runtime-cgroups=/system.slice/containerd.service"
"""


def write(root, path, text):
    full = os.path.join(str(root), path.lstrip("/"))
    if not os.path.isdir(os.path.dirname(full)):
        os.makedirs(os.path.dirname(full))
    with open(full, "w") as handle:
        handle.write(text)
    return full


@pytest.fixture
def kubeadm_root(tmp_path):
    write(tmp_path, "/lib/systemd/system/kubelet.service", KUBELET_UNIT)
    write(tmp_path, "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", KUBEADM_DROP_IN)
    write(tmp_path, "/var/lib/kubelet/kubeadm-flags.env", KUBEADM_FLAGS)
    return tmp_path


def run(capsys, **params):
    params.setdefault("read_version", False)
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            kubelet_launch.main()
    return json.loads(capsys.readouterr().out)


def test_kubeadm_node(capsys, kubeadm_root):
    result = run(capsys, root=str(kubeadm_root), managed_keys=["cpuManagerPolicy"])
    assert result["found"] is True
    assert result["manager"] == "kubeadm"
    assert result["config"] == str(kubeadm_root / "var/lib/kubelet/config.yaml")
    assert result["config_dir"] is None
    flags = dict((f["flag"], f) for f in result["flags"])
    drop_in = str(kubeadm_root / "usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf")
    assert flags["--config"]["layer"] == drop_in
    assert flags["--container-runtime-endpoint"]["layer"] == str(
        kubeadm_root / "var/lib/kubelet/kubeadm-flags.env")


def test_a_flag_overriding_a_managed_key_fails_naming_its_file(capsys, kubeadm_root):
    write(kubeadm_root, "/etc/default/kubelet",
          'KUBELET_EXTRA_ARGS="--cpu-manager-policy=none --kube-reserved=memory=1Gi"\n')
    result = run(capsys, root=str(kubeadm_root),
                 managed_keys=["cpuManagerPolicy", "kubeReserved.cpu", "topologyManagerPolicy"])
    assert result["failed"] is True
    # --kube-reserved names memory only, yet it replaces the config file's whole kubeReserved
    # map (the kubelet's own flag parsing; module_utils/test_kubelet_peer_gaps.py).
    layer = kubeadm_root / "etc/default/kubelet"
    assert result["conflicts"] == [
        "%s: --cpu-manager-policy=none overrides cpuManagerPolicy, which gpuprov manages in "
        "the kubelet config (flags win over the config file); remove the flag there" % layer,
        "%s: --kube-reserved=memory=1Gi replaces the whole kubeReserved map, so the kubelet "
        "runs without the kubeReserved.cpu gpuprov writes, which gpuprov manages in the kubelet "
        "config (flags win over the config file); remove the flag there" % layer]


def test_an_etc_drop_in_hides_the_packaged_one_and_config_dir_is_found(capsys, kubeadm_root):
    write(kubeadm_root, "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
          KUBEADM_DROP_IN.replace("--config=/var/lib/kubelet/config.yaml",
                                  "--config=/var/lib/kubelet/config.yaml "
                                  "--config-dir=/etc/kubernetes/kubelet.conf.d"))
    result = run(capsys, root=str(kubeadm_root))
    assert result["config_dir"] == str(kubeadm_root / "etc/kubernetes/kubelet.conf.d")


def test_kubespray_node(tmp_path):
    write(tmp_path, "/etc/systemd/system/kubelet.service", KUBESPRAY_UNIT)
    write(tmp_path, "/etc/kubernetes/kubelet.env",
          KUBESPRAY_ENV.replace("\\\n", " "))
    launch = read_launch("kubelet.service", root=str(tmp_path))
    assert launch["manager"] == "kubespray"
    assert launch["binary"] == "/usr/local/bin/kubelet"
    assert launch["config"] == str(tmp_path / "etc/kubernetes/kubelet-config.yaml")
    assert {"flag": "--v", "value": "2", "layer": str(tmp_path / "etc/kubernetes/kubelet.env")} \
        in launch["flags"]


def test_no_unit_is_reported_not_guessed(capsys, tmp_path):
    result = run(capsys, root=str(tmp_path))
    assert result["found"] is False
    assert result["config"] is None and result["manager"] == "unknown"


def test_kubespray_advice_names_its_variables():
    assert kubespray_advice({"cpuManagerPolicy": "static", "topologyManagerScope": "pod",
                             "reservedSystemCPUs": "0,4", "kubeReserved.cpu": "1",
                             "cpuManagerPolicyOptions": {"full-pcpus-only": "true"}}) == [
        'kubelet_cpu_manager_policy: "static"',
        'kube_cpu_reserved (with kube_reserved: true): "1"',
        'kubelet_topology_manager_scope: "pod"',
        'kubelet_node_config_extra_args: {cpuManagerPolicyOptions: {full-pcpus-only: "true"}, '
        'reservedSystemCPUs: "0,4"}']


def test_the_version_is_asked_of_the_units_binary(capsys, kubeadm_root):
    binary = write(kubeadm_root, "/usr/bin/kubelet", "#!/bin/sh\necho Kubernetes v1.31.4\n")
    os.chmod(binary, 0o755)
    result = run(capsys, root=str(kubeadm_root), read_version=True)
    assert result["kubelet_version"] == "v1.31.4"
