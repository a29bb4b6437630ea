#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run every test: pytest (collection units, CLI, SSH fleet),
# the MIG transition and fleet benchmark checks, ansible-test sanity, ansible-lint, every molecule
# scenario, the packaging checks (antsibull-changelog lint, ansible-builder create,
# ansible-galaxy collection verify of a pip-installed copy), the collection docs build and the same units, a plan and
# sanity on Python 3.12 with ansible-core 2.21. Exits non-zero if any stage fails; prints a
# summary of the stages at the end.
#
# Usage: scripts/test.sh [--fast]     (--fast skips sanity, lint, molecule and Python 3.12)
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

fast=0
[ "${1:-}" = "--fast" ] && fast=1

GPUPROV_SETUP_PEERS=0 scripts/setup.sh || { echo "setup failed"; exit 1; }
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

# The failing tests' one-line reasons, repeated under the summary: CI logs are often read from
# the end, far below a long stage's tracebacks.
failures=$(mktemp)
trap 'rm -f "$failures"' EXIT

# PYTEST_PYTHON: the interpreter (default: this venv's python).
run_pytest() {
    local rc
    "${PYTEST_PYTHON:-python}" -m pytest -p no:cacheprovider -n 2 -q -rfE "$@" \
        | tee >(grep -E '^(FAILED|ERROR) ' >>"$failures")
    rc=${PIPESTATUS[0]}
    # pytest exits 5 when it collected no test: that is a broken suite, not a pass.
    if [ $rc = 5 ]; then echo "pytest collected no tests"; return 1; fi
    return $rc
}

run_sanity() {
    (cd collections/ansible_collections/gpuprov/gpu && ansible-test sanity --venv --python 3.11 --color no)
}

COLLECTION=collections/ansible_collections/gpuprov/gpu

run_lint() {
    # .ansible-lint: the production profile, offline, over roles, playbooks and molecule scenarios.
    ansible-lint
}

run_molecule() {
    # Collection mode: run from the collection root, where molecule takes the scenarios from
    # extensions/molecule/.
    local rc=0 scenario
    for scenario in "$COLLECTION"/extensions/molecule/*/molecule.yml; do
        scenario=$(basename "$(dirname "$scenario")")
        echo "--- molecule test -s $scenario"
        # A private ephemeral folder per run: molecule otherwise shares one per scenario name.
        (cd "$COLLECTION" && MOLECULE_EPHEMERAL_DIRECTORY=$(mktemp -d) molecule test -s "$scenario") \
            || { echo "molecule scenario $scenario FAILED"; rc=1; }
    done
    return $rc
}

run_changelog_lint() {
    (cd "$COLLECTION" && antsibull-changelog lint)
}

run_builder_create() {
    # Writes the image's build context, with the collection tarball it installs from (dist/);
    # no container engine and no network needed. tests/test_execution_environment.py runs the
    # image's galaxy and Python install steps from such a context.
    local context rc
    context=$(mktemp -d)
    ansible-galaxy collection build "$COLLECTION" --force --output-path dist >/dev/null \
        && ansible-builder create -f execution-environment.yml --context "$context" --output-filename Containerfile \
        && test -f "$context/_build/dist/gpuprov-gpu-$(python -c 'import yaml; print(yaml.safe_load(open("'"$COLLECTION"'/galaxy.yml"))["version"])').tar.gz" \
        && ansible-builder introspect collections
    rc=$?
    rm -rf "$context"
    return $rc
}

run_docs_build() {
    local out rc
    out=$(mktemp -d)
    scripts/build_docs.sh "$out/html"
    rc=$?
    rm -rf "$out"
    return $rc
}

run_galaxy_verify() {
    # The wheel as users get it, installed (byte-compiled) into an empty folder with an empty
    # HOME, then checked against its own MANIFEST.json / FILES.json. The Galaxy tarball is
    # built from the same selection (collection_build.py; tests/test_collection_package.py).
    local work rc
    work=$(mktemp -d)
    python -m pip wheel --no-deps -q -w "$work/wheels" . \
        && python -m pip install --no-deps -q --target "$work/site" "$work"/wheels/gpuprov-*.whl \
        && (cd "$work" && env -u ANSIBLE_CONFIG -u ANSIBLE_COLLECTIONS_PATH HOME="$work" \
                ansible-galaxy collection verify --offline gpuprov.gpu -p "$work/site") \
        && (cd "$COLLECTION" && ansible-galaxy collection build --output-path "$work/galaxy")
    rc=$?
    rm -rf "$work"
    return $rc
}

# Python 3.12 with ansible-core 2.21 (what current controllers run): its own venv, the
# collection's unit tests, a plan of the example fleet, and ansible-test sanity.
run_py312() {
    local py venv=.venv312 site pipv cache="$HOME/.ansible/test/cache"
    py=${PYTHON312:-$(ls -d "$(pyenv root 2>/dev/null)"/versions/3.12.*/bin/python3.12 2>/dev/null | tail -1)}
    [ -n "$py" ] && [ -x "$py" ] || py=$(command -v python3.12) \
        || { echo "no Python 3.12 (set PYTHON312 or install it with pyenv)"; return 1; }
    echo "using $py ($("$py" --version))"
    [ -x "$venv/bin/python" ] || "$py" -m venv "$venv" || return 1
    "$venv/bin/python" -m pip install --quiet --upgrade pip \
        && "$venv/bin/python" -m pip install --quiet . "ansible-core>=2.21,<2.22" pytest pytest-xdist jsonschema \
        || return 1
    local version
    version=$("$venv/bin/ansible" --version) || return 1
    echo "${version%%$'\n'*}"
    [[ $version == *"core 2.21."* ]] || { echo "ansible-core 2.21 not installed"; return 1; }
    # ansible-test fetches get-pip for its own pip version; seed that cache as setup.sh does.
    site=$("$venv/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')
    pipv=$(grep -o "pip='[0-9.]*'" "$site/_internal/python_requirements.py" | head -1 | tr -dc '0-9.')
    [ -f "$cache/get_pip_${pipv//./_}.py" ] || cp "$cache/get_pip_24_2.py" "$cache/get_pip_${pipv//./_}.py" || return 1
    local rc=0
    echo "--- collection unit tests"
    PYTEST_PYTHON="$venv/bin/python" run_pytest "$COLLECTION/tests/unit" || rc=1
    echo "--- gpuprov plan -i examples/inventory.yml"
    "$venv/bin/gpuprov" plan -i examples/inventory.yml >/dev/null || rc=1
    echo "--- ansible-test sanity (2.21, Python 3.12)"
    (cd "$COLLECTION" && PATH="$REPO/$venv/bin:$PATH" ansible-test sanity --venv --python 3.12 --color no) || rc=1
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

# The peers must answer in CI: a peer test never passes by being skipped.
export GPUPROV_REQUIRE_PEERS=1

# Two processes: the CLI tests load Ansible's collection finder, which must not take over the
# import of the collection's own test packages.
stage "Go peers: build (tests/peers)" python tests/peers/build.py
stage "pytest: collection unit tests" run_pytest collections/ansible_collections/gpuprov/gpu/tests/unit
stage "pytest: CLI, roles, SSH fleet" run_pytest tests
stage "bench/mig_transitions (check)" python bench/mig_transitions.py
# plan against ansible-inventory --list, time and peak memory, at a size CI runs in seconds
# (the bench's targets for that size); 2,000 and 10,000 nodes run by hand.
stage "bench/plan_scale (check, 1,000 nodes)" python bench/plan_scale.py --sizes 1000 --repeat 5
# Two SSH nodes: converge, then the idempotent re-run and `gpuprov status` against a ping.
# Enforced here: the runs complete, the re-run changes nothing, every node is in sync and an
# in-sync node costs one task; the timed ratios are printed against their targets but enforced
# only from 4 nodes (bench/fleet.py --sizes 4,16,24, by hand): at 2 nodes they are noise. The
# commit under test is its own baseline, so the side-by-side fleets and one interleaved round
# on one fleet (--interleave) run too: both trees must find the nodes as planned.
stage "bench/fleet (check, 2 nodes)" python bench/fleet.py --sizes 2 --forks 4 --repeat 2 --baseline-ref HEAD \
    --interleave 1
stage "antsibull-changelog lint" run_changelog_lint
stage "ansible-builder create" run_builder_create
stage "collection docs (antsibull-docs)" run_docs_build
stage "ansible-galaxy collection verify" run_galaxy_verify
if [ $fast = 0 ]; then
    stage "ansible-test sanity" run_sanity
    stage "ansible-lint (production)" run_lint
    stage "molecule" run_molecule
    stage "consumer repo: pip install + molecule" run_consumer_repo
    stage "Python 3.12 + ansible-core 2.21" run_py312
fi

echo
echo "==> summary"
printf '  %s\n' "${results[@]}"
if [ -s "$failures" ]; then
    echo "  failing tests:"
    sed 's/^/    /' "$failures"
fi
exit $failed
