#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test: pytest (collection units, CLI, SSH fleet),
# the MIG transition benchmark check, ansible-test sanity, ansible-lint, and every molecule
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

# Another team's repository (examples/consumer-repo) as that team has it: copied out of this
# tree, gpuprov pip-installed (not editable) into a fresh venv with molecule, no setting that
# points Ansible at this repository, then its own `molecule test` on a fake GPU node.
run_consumer_repo() {
    local work rc python
    # The base interpreter, not this venv's (and resolved before HOME changes: pyenv's shims
    # look under HOME).
    python=$("$(command -v python3.11 || command -v python3)" -c 'import os, sys; print(os.path.join(sys.base_prefix, "bin", "python3"))')
    work=$(mktemp -d)
    cp -r examples/consumer-repo "$work/consumer-repo"
    # A stale build/ would put files removed from the source into the wheel (as in setup.sh).
    rm -rf build
    (
        unset ANSIBLE_COLLECTIONS_PATH ANSIBLE_COLLECTIONS_PATHS ANSIBLE_CONFIG VIRTUAL_ENV PYTHONPATH
        export HOME="$work/home" PATH="$work/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        mkdir -p "$HOME"
        "$python" -m venv "$work/venv" \
            && python -m pip install --quiet "$REPO[cluster]" "molecule>=25" \
            && cd "$work/consumer-repo" \
            && molecule test
    )
    rc=$?
    rm -rf "$work"
    return $rc
}

# Two processes: the CLI tests load Ansible's collection finder, which must not take over the
# import of the collection's own test packages.
stage "pytest: collection unit tests" run_pytest collections/ansible_collections/gpuprov/gpu/tests/unit
stage "pytest: CLI, roles, SSH fleet" run_pytest tests
stage "bench/mig_transitions (check)" python bench/mig_transitions.py
if [ $fast = 0 ]; then
    stage "ansible-test sanity" run_sanity
    stage "ansible-lint (production)" run_lint
    stage "molecule" run_molecule
    stage "consumer repo: pip install + molecule" run_consumer_repo
fi

echo
echo "==> summary"
printf '  %s\n' "${results[@]}"
exit $failed
