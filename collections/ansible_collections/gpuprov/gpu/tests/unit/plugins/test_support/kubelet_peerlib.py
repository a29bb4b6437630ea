# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""A fake kubelet node on disk for the kubelet peers (tests/peers: kubelet-config,
kubelet-checkpoint): its sysfs, its machine as the kubelet's managers see it, its config
files, and gpuprov's plan for it.

The machine description comes from the fake kubelet's own reading of the sysfs tree
(`fake-kubelet machine`, roles/fake_gpu_node/files/bin, found through GPUPROV_FAKES_DIR), so
the tests and the fake nodes hand the kubelet the same machine.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib.machinery
import importlib.util
import json
import os

import pytest

from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.fakes_dir import fakes_dir
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import run_peer

FAKES = fakes_dir(os.path.join("bin", "fake-kubelet"))
FAKE_KUBELET = os.path.join(FAKES, "bin", "fake-kubelet") if FAKES is not None else None
KUBEADM_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils", "fixtures",
                               "kubelet-config-kubeadm.yaml")
CONFIG_HEAD = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


def fake_kubelet_module():
    """roles/fake_gpu_node/files/bin/fake-kubelet as a module (it has no .py suffix)."""
    if FAKE_KUBELET is None:
        pytest.skip("the fake kubelet is not at hand (GPUPROV_FAKES_DIR names the fakes folder)")
    loader = importlib.machinery.SourceFileLoader("fake_kubelet", FAKE_KUBELET)
    spec = importlib.util.spec_from_loader("fake_kubelet", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def write(path, text):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), "w") as handle:
        handle.write(text)
    return str(path)


def build_sysfs(root, numa_nodes=2, cores_per_node=4, node_memory_kb=64 * 1024 * 1024):
    """A sysfs tree like the molecule scenarios' fake node: cores numbered node by node, the
    second thread of core c is CPU c + total cores."""
    total = numa_nodes * cores_per_node
    base = os.path.join(str(root), "devices", "system")
    write(os.path.join(base, "cpu", "online"), "0-%d\n" % (2 * total - 1))
    for core in range(total):
        for cpu in (core, core + total):
            write(os.path.join(base, "cpu", "cpu%d" % cpu, "topology", "thread_siblings_list"),
                  "%d,%d\n" % (core, core + total))
    for node in range(numa_nodes):
        first = node * cores_per_node
        last = first + cores_per_node - 1
        write(os.path.join(base, "node", "node%d" % node, "cpulist"),
              "%d-%d,%d-%d\n" % (first, last, first + total, last + total))
        write(os.path.join(base, "node", "node%d" % node, "meminfo"),
              "Node %d MemTotal:       %d kB\n" % (node, node_memory_kb))
        write(os.path.join(base, "node", "node%d" % node, "distance"),
              " ".join("10" if other == node else "20" for other in range(numa_nodes)) + "\n")
    return str(root)


class KubeletFiles(object):
    """The kubelet's files under ``tmp_path``: config, drop-in directory, state directory,
    sysfs and the machine JSON the peers take."""

    def __init__(self, tmp_path, main_text=None, numa_nodes=2, cores_per_node=4):
        self.root = str(tmp_path)
        self.config = os.path.join(self.root, "config.yaml")
        self.config_dir = os.path.join(self.root, "config.d")
        self.state_dir = os.path.join(self.root, "state")
        os.makedirs(self.config_dir, exist_ok=True)
        os.makedirs(self.state_dir, exist_ok=True)
        self.sysfs = build_sysfs(os.path.join(self.root, "sys"), numa_nodes, cores_per_node)
        self.machine = write(os.path.join(self.root, "machine.json"),
                             json.dumps(fake_kubelet_module().machine_info(self.sysfs)))
        write(self.config, kubeadm_config() if main_text is None else main_text)

    def drop_in(self, name, text):
        return write(os.path.join(self.config_dir, name), CONFIG_HEAD + text)

    def kubelet_config(self, *flags, config_dir=True):
        """What the kubelet runs with (/configz), or its refusal."""
        args = ["--config", self.config, "--machine", self.machine]
        if config_dir:
            args += ["--config-dir", self.config_dir]
        return run_peer("kubelet-config", *(args + list(flags)))

    def kubelet_start(self, *flags, config_dir=True):
        """Whether the kubelet starts on the checkpoints in the state directory."""
        args = ["--config", self.config, "--machine", self.machine, "--state-dir", self.state_dir]
        if config_dir:
            args += ["--config-dir", self.config_dir]
        return run_peer("kubelet-checkpoint", *(args + list(flags)))


def kubeadm_config():
    with open(KUBEADM_FIXTURE) as handle:
        return handle.read()


def configz(result):
    """The kubeletconfig object of a kubelet-config answer."""
    assert result.returncode == 0, result
    return result.data["kubeletconfig"]
