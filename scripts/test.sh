#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test: pytest (collection units, CLI, SSH fleet),
# the MIG transition and fleet benchmark checks, ansible-test sanity, ansible-lint, and every molecule
# scenario. Exits non-zero if any stage fails; prints a summary of the stages at the end.
#
# Usage: scripts/test.sh [--fast]     (--fast skips sanity and molecule)
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

fast=0
[ "${1:-}" = "--fast" ] && fast=1

scripts/setup.sh || { echo "setup failed"; exit 1; }
# shellcheck disable=SC1091
. .venv/bin/activate

declare -a results=()
failed=0
stage() {
    local name=$1; shift
    echo
    echo "==> $name"
    local started=$SECONDS
    "$@"
    local rc=$?
    results+=("$(printf '%-34s %s (%ds)' "$name" "$([ $rc = 0 ] && echo ok || echo "FAILED rc=$rc")" $((SECONDS - started)))")
    [ $rc = 0 ] || failed=1
    return 0
}

run_pytest() {
    python -m pytest -p no:cacheprovider -n 2 -q "$@"
    local rc=$?
    # pytest exits 5 when it collected no test: that is a broken suite, not a pass.
    if [ $rc = 5 ]; then echo "pytest collected no tests"; return 1; fi
    return $rc
}

run_sanity() {
    (cd collections/ansible_collections/gpuprov/gpu && ansible-test sanity --venv --python 3.11 --color no)
}

run_lint() {
    ansible-lint --profile production --offline roles/ playbooks/ molecule/
}

run_molecule() {
    local rc=0 scenario
    for scenario in molecule/*/molecule.yml; do
        scenario=$(basename "$(dirname "$scenario")")
        echo "--- molecule test -s $scenario"
        # A private ephemeral folder per run: molecule otherwise shares one per scenario name.
        MOLECULE_EPHEMERAL_DIRECTORY=$(mktemp -d) molecule test -s "$scenario" \
            || { echo "molecule scenario $scenario FAILED"; rc=1; }
    done
    return $rc
}

# Two processes: the CLI tests load Ansible's collection finder, which must not take over the
# import of the collection's own test packages.
stage "pytest: collection unit tests" run_pytest collections/ansible_collections/gpuprov/gpu/tests/unit
stage "pytest: CLI, roles, SSH fleet" run_pytest tests
stage "bench/mig_transitions (check)" python bench/mig_transitions.py
# Two SSH nodes: converge, then the idempotent re-run and `gpuprov status` against a ping,
# with the bench's targets (ratios, tasks per node); the full sizes run by hand.
stage "bench/fleet (check, 2 nodes)" python bench/fleet.py --sizes 2 --forks 4 --repeat 1
if [ $fast = 0 ]; then
    stage "ansible-test sanity" run_sanity
    stage "ansible-lint (production)" run_lint
    stage "molecule" run_molecule
fi

echo
echo "==> summary"
printf '  %s\n' "${results[@]}"
exit $failed
