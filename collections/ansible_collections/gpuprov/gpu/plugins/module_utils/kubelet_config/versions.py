# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""What each kubelet release accepts: policy options by maturity, and the feature gates that
let the kubelet use alpha or beta options.

Sources: kubernetes.io "Control CPU Management Policies on the Node" (static policy options
and their maturity), "Control Topology Management Policies on a node" (policy options), the
feature-gate reference pages, and /work's reference notes (GA releases: full-pcpus-only 1.33,
strict-cpu-reservation 1.35, prefer-closest-numa-nodes 1.32, max-allowable-numa-nodes 1.35,
MemoryManager 1.32). The maturity in 1.34 to 1.37 is read from the option sets in
pkg/kubelet/cm/cpumanager/policy_options.go and pkg/kubelet/cm/topologymanager/policy_options.go
of kubernetes v1.34.4, v1.35.4, v1.36.3 and v1.37.2. Releases marked UNVERIFIED below come
from memory of release notes, not from a source read for this table.

The kubelet refuses an option its release does not know ("unknown option"), and an alpha or
beta option whose gate (``CPUManagerPolicyAlphaOptions``, ``CPUManagerPolicyBetaOptions``,
``TopologyManagerPolicyAlphaOptions``, ``TopologyManagerPolicyBetaOptions``) is off. Beta
gates are on by default, alpha gates off; a GA option needs no gate.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

ALPHA = "alpha"
BETA = "beta"
GA = "GA"

# option -> [(minor release, maturity from that release on)], oldest first
CPU_MANAGER_OPTION_MATURITY = {
    "full-pcpus-only": [(22, ALPHA), (23, BETA), (33, GA)],
    "distribute-cpus-across-numa": [(23, ALPHA), (33, BETA)],  # UNVERIFIED: beta from 1.33 (1.34: beta)
    "align-by-socket": [(25, ALPHA)],
    "distribute-cpus-across-cores": [(31, ALPHA)],
    "strict-cpu-reservation": [(32, ALPHA), (33, BETA), (35, GA)],
    # UNVERIFIED: alpha in 1.32 and 1.33; beta in 1.34 and 1.35, GA from 1.36 (sources).
    "prefer-align-cpus-by-uncorecache": [(32, ALPHA), (34, BETA), (36, GA)],
}
TOPOLOGY_MANAGER_OPTION_MATURITY = {
    "prefer-closest-numa-nodes": [(26, ALPHA), (28, BETA), (32, GA)],
    "max-allowable-numa-nodes": [(31, BETA), (35, GA)],  # UNVERIFIED: beta from 1.31 (1.34: beta)
    # UNVERIFIED: in no release up to 1.37 (unknown there); alpha in 1.38 by its
    # implementation, kubernetes/kubernetes#142226.
    "numa-allocation-strategy": [(38, ALPHA)],
}
OPTION_GATES = {
    "cpuManagerPolicyOptions": {ALPHA: "CPUManagerPolicyAlphaOptions",
                                BETA: "CPUManagerPolicyBetaOptions"},
    "topologyManagerPolicyOptions": {ALPHA: "TopologyManagerPolicyAlphaOptions",
                                     BETA: "TopologyManagerPolicyBetaOptions"},
}
OPTION_MATURITY = {
    "cpuManagerPolicyOptions": CPU_MANAGER_OPTION_MATURITY,
    "topologyManagerPolicyOptions": TOPOLOGY_MANAGER_OPTION_MATURITY,
}
# memoryManagerPolicy Static: the MemoryManager gate, alpha 1.21, beta 1.22, GA 1.32.
MEMORY_MANAGER_MATURITY = [(21, ALPHA), (22, BETA), (32, GA)]
# --config-dir: alpha 1.28 (behind an environment variable), beta 1.30, GA 1.35 (KEP-3983).
CONFIG_DIR_MIN_MINOR = 30

_VERSION_RE = re.compile(r"v?(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?:\.[0-9]+)?(?:[-+][0-9A-Za-z.+-]*)?\Z", re.ASCII)


def parse_kubelet_version(text):
    """``"v1.31.2"``, ``"1.31"`` or ``"Kubernetes v1.31.2"`` -> ``(1, 31)``.

    :raises ValueError: for anything else.
    """
    value = str(text).strip()
    if value.startswith("Kubernetes "):
        value = value[len("Kubernetes "):]
    match = _VERSION_RE.match(value)
    if not match:
        raise ValueError("%r is not a kubelet version such as 1.31 or v1.31.2" % (text,))
    return int(match.group("major")), int(match.group("minor"))


def maturity_at(history, minor):
    """The maturity in release 1.``minor``, or None before the option existed."""
    current = None
    for since, maturity in history:
        if minor >= since:
            current = maturity
    return current


def _gate_on(config, gate, maturity):
    gates = config.get("featureGates")
    value = gates.get(gate) if isinstance(gates, dict) else None
    if value is None:
        return maturity == BETA  # beta gates default to on, alpha gates to off
    return value is True


def version_errors(config, version):
    """Options in ``config`` (the effective config) that kubelet ``version`` refuses.

    :arg version: ``(major, minor)``.
    :returns: one ``FIELD: reason`` line per refused option.
    """
    major, minor = version
    if major != 1:
        return ["kubelet_version: %d.%d is not a Kubernetes 1.x release" % version]
    shown = "1.%d" % minor
    errors = []
    for map_key, table in sorted(OPTION_MATURITY.items()):
        options = config.get(map_key)
        if not isinstance(options, dict):
            continue
        for name in sorted(options):
            if name not in table:
                continue
            field = "%s.%s" % (map_key, name)
            maturity = maturity_at(table[name], minor)
            first = table[name][0][0]
            if maturity is None:
                errors.append("%s: needs kubelet 1.%d or newer; this kubelet is %s"
                              % (field, first, shown))
            elif maturity != GA:
                gate = OPTION_GATES[map_key][maturity]
                if not _gate_on(config, gate, maturity):
                    errors.append("%s: is %s in kubelet %s and needs featureGates %s: true"
                                  % (field, maturity, shown, gate))
    if config.get("memoryManagerPolicy") == "Static":
        maturity = maturity_at(MEMORY_MANAGER_MATURITY, minor)
        if maturity is None:
            errors.append("memoryManagerPolicy: Static needs kubelet 1.21 or newer; this "
                          "kubelet is %s" % shown)
        elif maturity != GA and not _gate_on(config, "MemoryManager", maturity):
            errors.append("memoryManagerPolicy: Static is %s in kubelet %s and needs "
                          "featureGates MemoryManager: true" % (maturity, shown))
    return errors


def config_dir_error(version):
    """Why kubelet ``version`` cannot use gpuprov's drop-in, or None."""
    if version[0] == 1 and version[1] < CONFIG_DIR_MIN_MINOR:
        return ("config_dir: kubelet 1.%d does not read --config-dir drop-ins by default (beta "
                "and on from 1.%d); edit the main config instead"
                % (version[1], CONFIG_DIR_MIN_MINOR))
    return None
