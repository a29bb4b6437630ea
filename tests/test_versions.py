"""One version number (galaxy.yml's) and one supported ansible-core range, stated consistently."""
import json
import os
import re
import tomllib
from importlib.metadata import PackageNotFoundError, version

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gpuprov", "gpu")


def load_yaml(*parts):
    with open(os.path.join(*parts), encoding="utf-8") as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


@pytest.fixture(scope="module")
def galaxy():
    return load_yaml(COLLECTION, "galaxy.yml")


def requirement(reqs, name):
    (req,) = [Requirement(r) for r in reqs if Requirement(r).name == name]
    return req


def test_version_is_written_once(pyproject, galaxy):
    assert "version" not in pyproject and "version" in pyproject["dynamic"]
    with open(os.path.join(ROOT, "gpuprov", "__init__.py"), encoding="utf-8") as f:
        assert not re.search(r"__version__\s*=\s*['\"]\d+\.\d", f.read()), "gpuprov.__version__ is a literal"
    Version(galaxy["version"])  # a valid version


def test_installed_metadata_carries_galaxy_version(galaxy):
    try:
        installed = version("gpuprov")
    except PackageNotFoundError:
        pytest.skip("gpuprov is not installed (scripts/setup.sh installs it)")
    import gpuprov
    assert installed == galaxy["version"] == gpuprov.__version__


def test_changelog_releases_are_not_ahead_of_galaxy_version(galaxy):
    releases = load_yaml(COLLECTION, "changelogs", "changelog.yaml")["releases"]
    assert releases, "changelog.yaml has no release"
    assert max(Version(v) for v in releases) <= Version(galaxy["version"])


def test_requires_ansible_floor_is_the_pyproject_floor(pyproject):
    core = requirement(pyproject["dependencies"], "ansible-core").specifier
    requires = SpecifierSet(load_yaml(COLLECTION, "meta", "runtime.yml")["requires_ansible"])
    floor = lambda spec: min(Version(s.version) for s in spec if s.operator == ">=")  # noqa: E731
    assert floor(requires) == floor(core) == Version("2.19")
    for supported in ("2.19.0", "2.20.3", "2.21.5"):
        assert supported in core and supported in requires
    assert "2.18.9" not in core and "2.22.0" not in core


def test_ansible_package_extras_follow_the_core_range(pyproject):
    # The `ansible` package N ships ansible-core 2.(N+7): 12 -> 2.19, 13 -> 2.20, 14 -> 2.21
    # (https://docs.ansible.com/ansible/latest/reference_appendices/release_and_maintenance.html).
    core = requirement(pyproject["dependencies"], "ansible-core").specifier
    for extra, reqs in pyproject["optional-dependencies"].items():
        names = [Requirement(r).name for r in reqs]
        if "ansible" not in names:
            continue
        spec = requirement(reqs, "ansible").specifier
        majors = [n for n in range(8, 20) if "%d.0.0" % n in spec]
        assert majors, extra
        assert all("2.%d.0" % (n + 7) in core for n in majors), (extra, majors)
        assert "2.%d.0" % (max(majors) + 7) == "2.21.0", (extra, majors)


def test_installed_kubernetes_core_is_in_the_declared_range(galaxy):
    spec = SpecifierSet(galaxy["dependencies"]["kubernetes.core"])
    try:
        import ansible_collections.kubernetes.core as kc
    except ImportError:
        pytest.skip("kubernetes.core is not installed (the `ansible` package brings it)")
    with open(os.path.join(list(kc.__path__)[0], "MANIFEST.json"), encoding="utf-8") as f:
        assert json.load(f)["collection_info"]["version"] in spec


def test_no_links_to_a_home_the_project_does_not_have(galaxy):
    # The collection has no public repository: galaxy.yml and the READMEs point nowhere
    # rather than at a made-up address (requirements.yml: tests/test_execution_environment.py).
    for key in ("documentation", "homepage", "issues", "repository"):
        assert key not in galaxy, key
    for readme in (os.path.join(ROOT, "README.md"), os.path.join(COLLECTION, "README.md")):
        with open(readme, encoding="utf-8") as f:
            assert "github.com/gpuprov" not in f.read(), readme
