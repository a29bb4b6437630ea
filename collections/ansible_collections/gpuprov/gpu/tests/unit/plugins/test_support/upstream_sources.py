# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Files of the upstream Go modules the peer harness pins, read where Go keeps them (the module
cache), at the versions its go.mod names: NVIDIA's own flag declarations and chart values,
mig-parted's shipped config-default.yaml. The tests read them in place; nothing is copied into
the project.

Without Go, the harness (GPUPROV_PEERS_DIR, see peerlib.py) or the module in the cache the
tests skip, unless GPUPROV_REQUIRE_PEERS=1 (as for peers).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import subprocess

import yaml

from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import peers_dir, unavailable

DEVICE_PLUGIN = "github.com/NVIDIA/k8s-device-plugin"
MIG_PARTED = "github.com/NVIDIA/mig-parted"


def go_mod():
    return os.path.join(peers_dir(), "go.mod")


def pinned_version(module):
    path = go_mod()
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    match = re.search(r"^\s+%s (v\S+)" % re.escape(module), text, re.M)
    if match is None:
        raise AssertionError("%s is not required by %s" % (module, path))
    return match.group(1)


def module_cache():
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        unavailable("no `go` to locate the Go module cache")
    return subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()


def module_file(module, path):
    """The path of ``path`` inside ``module`` at its pinned version."""
    # The module cache escapes upper-case letters as !lower (golang.org/x/mod/module).
    escaped = re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)
    full = os.path.join(module_cache(), "%s@%s" % (escaped, pinned_version(module)), path)
    if not os.path.isfile(full):
        unavailable("%s is not in the Go module cache (build tests/peers first)" % full)
    return full


def device_plugin_chart_values():
    """NVIDIA's nvidia-device-plugin chart values (deployments/helm/nvidia-device-plugin/values.yaml),
    parsed, at the k8s-device-plugin version the harness pins."""
    with open(module_file(DEVICE_PLUGIN, "deployments/helm/nvidia-device-plugin/values.yaml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)
