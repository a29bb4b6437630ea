"""The Go peer harness itself: it builds, and carries the versions go.mod pins."""
import re

import pytest

from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import run_peer
from testlib import REPO

pytestmark = pytest.mark.peers


def pinned_requirements():
    with open(REPO + "/tests/peers/go.mod", encoding="utf-8") as handle:
        text = handle.read()
    pins = dict(re.findall(r"^\s+(\S+) (v\S+)$", text, re.M))
    replaces = dict(re.findall(r"^\s+(\S+) => \S+ (v\S+)$", text, re.M))
    return pins, replaces


def test_binary_reports_the_pinned_versions():
    pins, replaces = pinned_requirements()
    result = run_peer("versions")
    assert result.returncode == 0, result
    versions = result.data
    for module in ("github.com/NVIDIA/k8s-device-plugin", "github.com/NVIDIA/mig-parted",
                   "github.com/NVIDIA/go-nvml", "k8s.io/kubernetes"):
        assert versions[module] == pins[module], module
    # The staging modules come in at the release's own v0.x, by replace.
    minor = pins["k8s.io/kubernetes"].split(".", 1)[1]
    for module in ("k8s.io/api", "k8s.io/apimachinery", "k8s.io/kubelet"):
        assert versions[module] == replaces[module] == "v0." + minor, module


def test_usage_errors_exit_2():
    with pytest.raises(AssertionError, match="exit 2"):
        run_peer("no-such-subcommand")


def test_helm_reports_the_pinned_release():
    """helm is stamped as its release builds are (build.py version_ldflags): kubernetes.core
    reads `helm version` (module_utils/helm.py get_helm_version) to gate options on it."""
    import subprocess

    from helm_repo import helm_binary
    from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import pinned_version
    pinned = pinned_version("helm.sh/helm/v3")
    out = subprocess.run([helm_binary(), "version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith('version.BuildInfo{Version:"%s",' % pinned), out
    assert pinned == "v3.21.4"  # the approved release (not v3.22.0)
