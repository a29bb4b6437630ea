"""The execution environment: `ansible-builder create` accepts the definition offline, and the
collection's meta/execution-environment.yml gives ansible-builder the requirements it needs."""
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gpuprov", "gpu")
BUILDER = os.path.join(os.path.dirname(sys.executable), "ansible-builder")

pytestmark = pytest.mark.skipif(not os.path.exists(BUILDER),
                                reason="ansible-builder is not installed (the dev extra installs it)")


def _galaxy_version():
    with open(os.path.join(COLLECTION, "galaxy.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)["version"]


def _stage(containerfile, name):
    """The lines of one stage (`FROM ... AS name`) of ansible-builder's Containerfile."""
    lines, inside = [], False
    for line in containerfile.splitlines():
        if line.startswith("FROM "):
            inside = line.endswith(" AS " + name)
            continue
        if inside:
            lines.append(line)
    assert lines, "no stage %r in the Containerfile" % name
    return lines


def _run_step(line, mapping, cwd, env, extra_args=()):
    """Run one `RUN` line of the Containerfile here: its argv, with the image's paths mapped
    to folders of the test (and no shell: the lines used here are plain commands)."""
    argv = shlex.split(line[len("RUN "):])
    step_env = dict(env)
    while "=" in argv[0] and not argv[0].startswith("-"):
        key, value = argv.pop(0).split("=", 1)
        step_env[key] = value
    for image_path, here in mapping.items():
        argv = [arg.replace(image_path, here) for arg in argv]
    argv += list(extra_args)
    run = subprocess.run(argv, cwd=cwd, env=step_env, capture_output=True, text=True)
    assert run.returncode == 0, "%s\n%s%s" % (line, run.stdout, run.stderr)
    return run


def test_the_image_installs_gpuprov_from_its_tarball_offline_and_plans(tmp_path):
    """ansible-builder's own galaxy and Python install steps, run here into folders: the
    collection comes from the tarball `ansible-galaxy collection build` makes (no git, no
    Galaxy for gpuprov.gpu), its Python requirements from the image's introspection, and what
    they installed plans the example fleet."""
    version = _galaxy_version()
    bindir = os.path.dirname(sys.executable)
    # The definition as a user has it: requirements.yml beside it and the tarball in dist/.
    ee = tmp_path / "ee"
    ee.mkdir()
    for name in ("execution-environment.yml", "requirements.yml"):
        shutil.copy(os.path.join(ROOT, name), ee / name)
    subprocess.run([os.path.join(bindir, "ansible-galaxy"), "collection", "build", COLLECTION,
                    "--output-path", str(ee / "dist")], check=True, capture_output=True)
    assert (ee / "dist" / ("gpuprov-gpu-%s.tar.gz" % version)).is_file()
    context = tmp_path / "context"
    run = subprocess.run([BUILDER, "create", "-f", str(ee / "execution-environment.yml"),
                          "--context", str(context), "--output-filename", "Containerfile"],
                         cwd=str(tmp_path), capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    containerfile = (context / "Containerfile").read_text()
    assert "quay.io/fedora/fedora:42" in containerfile
    assert "ansible-core>=2.19,<2.22" in containerfile
    assert "git" not in containerfile.split(), "the image needs no git: nothing is cloned"

    share = tmp_path / "usr-share-ansible"
    collections = share / "collections"
    # Galaxy cannot be reached from here: kubernetes.core is put where Galaxy would have
    # installed it, from the copy the `ansible` package ships (its MANIFEST.json makes it an
    # installed collection to ansible-galaxy); gpuprov.gpu comes only from the tarball.
    import ansible_collections.kubernetes.core as kubernetes_core
    shutil.copytree(list(kubernetes_core.__path__)[0], collections / "ansible_collections" / "kubernetes" / "core")
    # An empty configuration: this repository's ansible.cfg (collections_path = ./collections)
    # must not be what finds the collection.
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), HOME=str(tmp_path), PATH=bindir + os.pathsep + os.environ["PATH"])
    env.pop("PYTHONPATH", None)
    # The image's folders, as the Containerfile's COPY lines fill them, here.
    mapping = {"/usr/share/ansible": str(share), "/tmp/src": str(tmp_path / "src"),
               "/output/scripts": str(context / "_build" / "scripts")}
    (tmp_path / "src").mkdir()
    galaxy = [line for line in _stage(containerfile, "galaxy") if line.startswith("RUN") and "ansible-galaxy" in line]
    assert len(galaxy) == 2, galaxy
    for line in galaxy:
        # $ANSIBLE_GALAXY_CLI_*_OPTS are empty build args; --offline: no Galaxy from here.
        line = line.replace(" $ANSIBLE_GALAXY_CLI_ROLE_OPTS", "").replace(" $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS", "")
        _run_step(line, mapping, str(context / "_build"), env,
                  extra_args=("--offline",) if "collection install" in line else ())
    installed = collections / "ansible_collections" / "gpuprov" / "gpu"
    with open(installed / "MANIFEST.json", encoding="utf-8") as f:
        assert json.load(f)["collection_info"]["version"] == version
    assert not (installed / "extensions").exists(), "the tarball leaves out what galaxy.yml's build_ignore names"

    # The builder stage: the image's introspection of what was installed, then pip.
    (introspect,) = [line for line in _stage(containerfile, "builder") if "introspect.py introspect" in line]
    introspect = introspect.replace("$PYCMD", sys.executable) + " " + str(collections)
    _run_step(introspect, mapping, str(context / "_build"), env)
    requirements = (tmp_path / "src" / "requirements.txt").read_text()
    assert "kubernetes>=29" in requirements
    pylib = tmp_path / "pylib"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(pylib), "-r",
                    str(tmp_path / "src" / "requirements.txt")], check=True)
    env["PYTHONPATH"] = str(pylib)

    # What was installed plans the example fleet as the repository's own planner does.
    listed = subprocess.run([os.path.join(bindir, "ansible-galaxy"), "collection", "list", "gpuprov.gpu",
                             "--format", "json"], env=env, capture_output=True, text=True, check=True)
    assert list(json.loads(listed.stdout)) == [str(collections / "ansible_collections")]
    plans = tmp_path / "plans"
    plans.mkdir()
    playbook = tmp_path / "plan.yml"
    playbook.write_text(
        "- hosts: gpu_nodes\n  gather_facts: false\n  connection: local\n  tasks:\n"
        "    - gpuprov.gpu.node_plan: {}\n"
        "    - ansible.builtin.copy:\n        content: \"{{ gpuprov_plan | to_json }}\"\n"
        "        dest: \"%s/{{ inventory_hostname }}.json\"\n        mode: \"0644\"\n"
        "      delegate_to: localhost\n" % plans)
    run = subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", os.path.join(ROOT, "examples", "inventory.yml"),
                          str(playbook), "-e", "ansible_python_interpreter=" + sys.executable],
                         env=env, cwd=str(tmp_path), capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    reference = subprocess.run([os.path.join(bindir, "gpuprov"), "plan", "-i", os.path.join(ROOT, "examples", "inventory.yml"),
                                "-o", "json"], cwd=ROOT, capture_output=True, text=True, check=True)
    expected = json.loads(reference.stdout)["nodes"]
    got = {path.stem: json.loads(path.read_text()) for path in plans.glob("*.json")}
    assert sorted(got) == sorted(expected)
    for name, plan in got.items():
        for key in ("resources", "device_plugin", "mig", "mps", "kubelet", "actions"):
            assert plan[key] == expected[name][key], (name, key)


def test_requirements_name_the_tarball_this_repository_builds():
    with open(os.path.join(ROOT, "requirements.yml"), encoding="utf-8") as f:
        collections = yaml.safe_load(f)["collections"]
    assert {"name": "dist/gpuprov-gpu-%s.tar.gz" % _galaxy_version(), "type": "file"} in collections
    with open(os.path.join(COLLECTION, "galaxy.yml"), encoding="utf-8") as f:
        dependency = yaml.safe_load(f)["dependencies"]["kubernetes.core"]
    assert {"name": "kubernetes.core", "version": dependency} in collections
    assert not any(c.get("type") == "git" for c in collections), "no git source: the project has no public repository"


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
