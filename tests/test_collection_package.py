"""The wheel ships the collection as `ansible-galaxy collection build` would.

collection_build.py chooses the files and writes MANIFEST.json / FILES.json; these tests hold
it to a real `ansible-galaxy collection build` of the same folder, and check that
`ansible-galaxy collection verify --offline` accepts a pip-installed copy (and rejects one
that was changed after install).
"""
import glob
import json
import os
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gpuprov", "gpu")
BIN = os.path.dirname(sys.executable)
sys.path.insert(0, ROOT)
import collection_build  # noqa: E402


def clean_env(home):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["HOME"] = str(home)  # no ~/.ansible.cfg, no user collections
    return env


@pytest.fixture(scope="module")
def galaxy_tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp("galaxy")
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(out)],
                   cwd=COLLECTION, env=clean_env(out), check=True, capture_output=True, text=True)
    (tarball,) = glob.glob(str(out / "gpuprov-gpu-*.tar.gz"))
    return tarball


def by_name(entries):
    return {e["name"]: e for e in entries}


def test_file_selection_and_checksums_match_ansible_galaxy_build(galaxy_tarball):
    galaxy = collection_build.read_galaxy(COLLECTION)
    ours = collection_build.select_entries(COLLECTION, galaxy)
    with tarfile.open(galaxy_tarball) as tar:
        theirs = json.load(tar.extractfile("FILES.json"))
        members = {m.name for m in tar.getmembers() if m.isfile()}
    assert theirs["format"] == collection_build.MANIFEST_FORMAT
    assert by_name(ours) == by_name(theirs["files"])
    assert members - {"MANIFEST.json", "FILES.json"} == {e["name"] for e in ours if e["ftype"] == "file"}
    assert "galaxy.yml" not in members


def test_manifest_matches_ansible_galaxy_build(galaxy_tarball):
    galaxy = collection_build.read_galaxy(COLLECTION)
    with tarfile.open(galaxy_tarball) as tar:
        theirs = json.load(tar.extractfile("MANIFEST.json"))
        files_json = tar.extractfile("FILES.json").read()
    entries = json.loads(files_json)["files"]
    manifest_json, our_files_json = collection_build.manifests(galaxy, entries)
    assert json.loads(manifest_json) == theirs
    assert our_files_json == files_json  # same serialisation, so the same checksum


def test_build_ignore_leaves_files_out(tmp_path):
    coll = tmp_path / "ansible_collections" / "ns" / "c"
    (coll / "plugins" / "modules").mkdir(parents=True)
    (coll / "plugins" / "modules" / "m.py").write_text("x = 1\n")
    (coll / "tests" / "output").mkdir(parents=True)
    (coll / "tests" / "output" / "junk.txt").write_text("junk\n")
    (coll / "notes.tmp").write_text("tmp\n")
    (coll / "ns-c-1.0.0.tar.gz").write_text("old build\n")
    (coll / "galaxy.yml").write_text("namespace: ns\nname: c\nversion: 1.0.0\nbuild_ignore: ['*.tmp']\n")
    names = {e["name"] for e in collection_build.select_entries(str(coll), collection_build.read_galaxy(str(coll)))}
    assert names == {".", "plugins", "plugins/modules", "plugins/modules/m.py", "tests"}
    pycache = {e["name"] for e in collection_build.bytecode_dirs(
        collection_build.select_entries(str(coll), collection_build.read_galaxy(str(coll))))}
    assert pycache == {"plugins/modules/__pycache__"}


def test_pip_installed_collection_passes_verify_and_a_changed_file_fails(tmp_path):
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), ROOT],
                   check=True, capture_output=True, text=True)
    (wheel,) = glob.glob(str(wheels / "gpuprov-*.whl"))
    prefix = "ansible_collections/gpuprov/gpu/"
    with zipfile.ZipFile(wheel) as z:
        shipped = {n[len(prefix):] for n in z.namelist() if n.startswith(prefix)}
        files = json.loads(z.read(prefix + "FILES.json"))["files"]
    assert shipped == {e["name"] for e in files if e["ftype"] == "file"} | {"MANIFEST.json", "FILES.json"}
    assert "galaxy.yml" not in shipped
    # The CLI package, subpackages included, ships beside the collection.
    cli_sources = {os.path.relpath(os.path.join(d, f), ROOT).replace(os.sep, "/")
                   for d, _dirs, files in os.walk(os.path.join(ROOT, "gpuprov")) for f in files if f.endswith(".py")}
    with zipfile.ZipFile(wheel) as z:
        assert cli_sources <= set(z.namelist()), sorted(cli_sources - set(z.namelist()))

    # A regular install: pip byte-compiles the .py files into __pycache__ folders.
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), wheel],
                   check=True, capture_output=True, text=True)
    installed = target / "ansible_collections" / "gpuprov" / "gpu"
    assert list(installed.glob("plugins/modules/__pycache__/*.pyc")), "pip did not byte-compile"

    def verify():
        return subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "verify", "--offline",
                               "gpuprov.gpu", "-p", str(target)],
                              cwd=str(tmp_path), env=clean_env(tmp_path), capture_output=True, text=True)

    ok = verify()
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Successfully verified" in ok.stdout

    module = installed / "plugins" / "modules" / "mig_mode.py"
    module.write_text(module.read_text() + "\n# changed after install\n")
    changed = verify()
    assert changed.returncode != 0
    assert "plugins/modules/mig_mode.py" in changed.stdout
