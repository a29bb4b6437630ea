#!/usr/bin/env bash
# The main job on the bundled example fleet, end to end, on simulated nodes:
#   set up -> bring up one SSH-reachable simulated node per GPU node of examples/inventory.yml
#   (fake GPUs, kubelet, systemd) -> gpuprov plan -> gpuprov apply --check --diff (dry run)
#   -> gpuprov apply (converge) -> gpuprov apply again (nothing to do) -> tear the fleet down.
# Needs root (private mount namespaces) and openssh-server (setup.sh installs it).
# Usage: scripts/demo.sh [--keep]      (--keep leaves the fleet running in .fleet/demo)
set -euo pipefail
cd "$(dirname "$0")/.."
keep=0
[ "${1:-}" = "--keep" ] && keep=1

scripts/setup.sh
# shellcheck disable=SC1091
. .venv/bin/activate
FLEET=.fleet/demo
INVENTORY=examples/inventory.yml

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "gpuprov plan -i $INVENTORY"
gpuprov plan -i "$INVENTORY"

step "Simulated nodes with the GPUs the inventory declares"
mkdir -p "$FLEET"
gpuprov plan -i "$INVENTORY" -o json | python -c '
import json, sys, yaml
nodes = []
for host, plan in json.load(sys.stdin)["nodes"].items():
    gpus = []
    for gpu in plan["gpus"]:
        if gpus and gpus[-1]["model"] == gpu["model"]:
            gpus[-1]["count"] += 1
        else:
            gpus.append({"model": gpu["model"], "count": 1})
    nodes.append({"name": host, "gpus": gpus})
yaml.safe_dump({"nodes": nodes}, open(sys.argv[1], "w"))
' "$FLEET/nodes.yml"
python tests/fleet/fleet.py down --dir "$FLEET" --clean >/dev/null 2>&1 || true
python tests/fleet/fleet.py up --dir "$FLEET" --nodes "$FLEET/nodes.yml"
if [ $keep = 0 ]; then
    trap 'step "Tearing the fleet down"; python tests/fleet/fleet.py down --dir "$FLEET" --clean' EXIT
fi
CONNECTION="$FLEET/connection.yml"

step "gpuprov apply --check --diff   (dry run: nothing changes)"
gpuprov apply -q -i "$INVENTORY" -i "$CONNECTION" --check --diff

step "gpuprov apply   (canary node first, then 10%, then the rest)"
gpuprov apply -q -i "$INVENTORY" -i "$CONNECTION"

step "gpuprov apply again   (every node already converged: nothing changes, nothing is drained)"
gpuprov apply -q -i "$INVENTORY" -i "$CONNECTION"

if gpuprov status --help >/dev/null 2>&1; then
    step "gpuprov status   (live state against the plan)"
    gpuprov status -i "$INVENTORY" -i "$CONNECTION"
fi
