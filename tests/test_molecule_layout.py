"""Molecule scenarios live where collection tooling looks: extensions/molecule/ in the collection.

molecule 25+ switches to collection mode when the folder it runs in has a galaxy.yml and then
takes scenarios from extensions/molecule/*/molecule.yml (molecule/util.py,
get_effective_molecule_glob); scripts/test.sh runs each one from the collection root.
"""
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gpuprov", "gpu")
SCENARIOS = os.path.join(COLLECTION, "extensions", "molecule")
MOLECULE = os.path.join(os.path.dirname(sys.executable), "molecule")


def scenario_names():
    return sorted(d for d in os.listdir(SCENARIOS) if os.path.isfile(os.path.join(SCENARIOS, d, "molecule.yml")))


def test_scenarios_moved_out_of_the_repository_root():
    assert not os.path.exists(os.path.join(ROOT, "molecule"))
    assert {"fleet", "gpu_mig", "gpu_mps", "kubelet_topology"} <= set(scenario_names())


@pytest.mark.skipif(not os.path.exists(MOLECULE), reason="molecule is not installed (the dev extra installs it)")
def test_molecule_finds_every_scenario_from_the_collection_root():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOLECULE_", "ANSIBLE_"))}
    out = subprocess.run([MOLECULE, "list", "-f", "plain"], cwd=COLLECTION, env=env,
                         capture_output=True, text=True, check=True).stdout
    listed = {line.split()[3] for line in out.splitlines() if len(line.split()) >= 4}
    assert listed == set(scenario_names())


@pytest.mark.parametrize("name", scenario_names())
def test_scenario_uses_this_checkout_and_no_prerun(name):
    with open(os.path.join(SCENARIOS, name, "molecule.yml"), encoding="utf-8") as f:
        config = yaml.safe_load(f)
    # prerun would install the collection into the shared ~/.ansible and fetch from Galaxy.
    assert config["prerun"] is False
    env = config["ansible"]["env"]
    here = os.path.join(COLLECTION, "x")  # what ${MOLECULE_PROJECT_DIRECTORY} stands for, plus one
    repo = os.path.normpath(os.path.join(os.path.dirname(here),
                                         env["GPUPROV_REPO_DIR"].replace("${MOLECULE_PROJECT_DIRECTORY}/", "")))
    collections = [os.path.normpath(os.path.join(os.path.dirname(here), path.replace("${MOLECULE_PROJECT_DIRECTORY}/", "")))
                   for path in env["ANSIBLE_COLLECTIONS_PATH"].split(":")]
    assert repo == ROOT
    # This checkout's collection, after at most the repository's stub kubernetes.core (a scenario
    # that talks to the fake cluster); never an installed copy.
    assert collections[-1] == os.path.join(ROOT, "collections")
    assert set(collections[:-1]) <= {os.path.join(ROOT, "tests", "stubs")}, collections
    for key, value in env.items():
        if "/tests/" in value:
            path = value.split(":")[0].replace("${MOLECULE_PROJECT_DIRECTORY}", COLLECTION)
            assert os.path.isdir(os.path.normpath(path)), (key, value)
