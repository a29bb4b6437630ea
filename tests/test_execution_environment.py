"""The execution environment: `ansible-builder create` accepts the definition offline, and the
collection's meta/execution-environment.yml gives ansible-builder the requirements it needs."""
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gpuprov", "gpu")
BUILDER = os.path.join(os.path.dirname(sys.executable), "ansible-builder")

pytestmark = pytest.mark.skipif(not os.path.exists(BUILDER),
                                reason="ansible-builder is not installed (the dev extra installs it)")


def test_ansible_builder_create_accepts_the_definition(tmp_path):
    context = tmp_path / "context"
    run = subprocess.run([BUILDER, "create", "-f", os.path.join(ROOT, "execution-environment.yml"),
                          "--context", str(context), "--output-filename", "Containerfile"],
                         cwd=str(tmp_path), capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    containerfile = (context / "Containerfile").read_text()
    assert "quay.io/fedora/fedora:42" in containerfile
    assert "ansible-core>=2.19,<2.22" in containerfile
    # The galaxy requirements go into the context unchanged, and they name gpuprov.gpu.
    with open(os.path.join(ROOT, "requirements.yml"), encoding="utf-8") as f:
        ours = yaml.safe_load(f)
    assert yaml.safe_load((context / "_build" / "requirements.yml").read_text()) == ours
    assert any("collections/ansible_collections/gpuprov/gpu" in c["name"] for c in ours["collections"])


def test_ansible_builder_create_rejects_a_broken_definition(tmp_path):
    # The check above can fail: a definition outside ansible-builder's schema is refused.
    broken = tmp_path / "ee.yml"
    broken.write_text("version: 3\ndependencies:\n  galaxy: requirements.yml\n  pythn: x.txt\n")
    run = subprocess.run([BUILDER, "create", "-f", str(broken), "--context", str(tmp_path / "c")],
                         cwd=str(tmp_path), capture_output=True, text=True)
    assert run.returncode != 0
    assert "pythn" in run.stdout + run.stderr


def test_collection_metadata_gives_kubernetes_and_helm(tmp_path):
    # What ansible-builder runs inside the image after it installs the collections.
    run = subprocess.run([BUILDER, "introspect", os.path.join(ROOT, "collections")],
                         cwd=str(tmp_path), capture_output=True, text=True, check=True)
    data = yaml.safe_load(run.stdout.split("---", 1)[1])
    # Each line is "REQUIREMENT  # from collection NAMESPACE.NAME".
    python = {tuple(part.strip() for part in line.split("# from collection")) for line in data["python"]}
    system = {tuple(part.strip() for part in line.split("# from collection")) for line in data["system"]}
    assert python == {("kubernetes>=29", "gpuprov.gpu")}
    assert system == {("helm", "gpuprov.gpu")}
    # The same floor as the Python package, so the image is no older than what is tested.
    with open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8") as f:
        assert '"kubernetes>=29"' in f.read()
