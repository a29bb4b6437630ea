"""The kubelet code the peers rebuild (tests/peers/cmd/peers/kubelet_*.go) is still the code of
the pinned release.

cmd/kubelet/app keeps its start-up steps in unexported functions, and the container manager's
reservation sum is a method of an unexported type; kubelet_loader.go and kubelet_checkpoint.go
rebuild them from the exported parts they call, statement for statement. Each function's source
in the module cache is hashed here: a new k8s.io/kubernetes in go.mod that changes one of them
fails this test, and the rebuild is read again against the new text (then its hash here is
updated). The sequence in which NewKubeletCommand, run(), NewContainerManager and
containerManagerImpl.Start call those steps is hashed too.
"""
import hashlib
import re

import pytest

from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import peer_binary
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import module_file

pytestmark = pytest.mark.peers

MIRRORED = {
    ("cmd/kubelet/app/server.go", "loadConfigFile"): "45c09416fb4851c5",
    ("cmd/kubelet/app/server.go", "mergeKubeletConfigurations"): "49b43fef90a685c5",
    ("cmd/kubelet/app/server.go", "loadDropinConfigFileIntoJSON"): "394b1392cca8f1ad",
    ("cmd/kubelet/app/server.go", "newFlagSetWithGlobals"): "90670b3ebeca9d98",
    ("cmd/kubelet/app/server.go", "newFakeFlagSet"): "9422dc604b7fa405",
    ("cmd/kubelet/app/server.go", "kubeletConfigFlagPrecedence"): "4a63c43137fa41ec",
    ("cmd/kubelet/app/server.go", "convertToVersionedKubeletConfig"): "e888326b30cc2d78",
    ("cmd/kubelet/app/server.go", "getReservedCPUs"): "69a3d80efe420789",
    ("cmd/kubelet/app/server.go", "parseResourceList"): "01a42d25c9baff09",
    ("pkg/kubelet/cm/node_container_manager_linux.go", "GetNodeAllocatableReservation"): "7a71eea609bdacef",
    ("pkg/kubelet/cm/helpers.go", "hardEvictionReservation"): "b2bd6aee0844b154",
    # The callers: the order of the steps and the reserved-CPU rewrite live in these.
    ("cmd/kubelet/app/server.go", "NewKubeletCommand"): "a94417886306a279",
    ("cmd/kubelet/app/server.go", "run"): "860ae6023c03613a",
    ("pkg/kubelet/cm/container_manager_linux.go", "NewContainerManager"): "254bda8bd3e92225",
    ("pkg/kubelet/cm/container_manager_linux.go", "Start"): "496a4ca817956563",
}


def function_text(path, name):
    with open(module_file("k8s.io/kubernetes", path)) as handle:
        text = handle.read()
    match = re.search(r"^func (\([^)]*\) )?%s\(.*?^}\n" % re.escape(name), text, re.S | re.M)
    assert match, "%s has no func %s" % (path, name)
    return match.group(0)


def test_the_rebuilt_kubelet_functions_are_those_of_the_pinned_release():
    peer_binary()  # skips, or fails in CI, when the peers are not built
    changed = []
    for (path, name), digest in sorted(MIRRORED.items()):
        actual = hashlib.sha256(function_text(path, name).encode()).hexdigest()[:16]
        if actual != digest:
            changed.append("%s %s: %s (was %s)" % (path, name, actual, digest))
    assert not changed, ("the kubelet's start-up code changed; read tests/peers/cmd/peers/"
                         "kubelet_*.go against it, then update MIRRORED: %s" % "; ".join(changed))
