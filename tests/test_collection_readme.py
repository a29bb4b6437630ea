"""The collection's README is its Galaxy page: it names every module, role, playbook and plugin."""
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTION = os.path.join(ROOT, "collections", "ansible_collections", "gpuprov", "gpu")


def names(folder, ext):
    path = os.path.join(COLLECTION, folder)
    return sorted(f[: -len(ext)] for f in os.listdir(path) if f.endswith(ext) and not f.startswith("_"))


def test_readme_names_all_content():
    with open(os.path.join(COLLECTION, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    roles = sorted(d for d in os.listdir(os.path.join(COLLECTION, "roles")) if not d.startswith("."))
    content = (names("plugins/modules", ".py") + roles + names("playbooks", ".yml")
               + names("plugins/filter", ".py") + names("plugins/callback", ".py"))
    missing = [n for n in content if "`gpuprov.gpu.%s`" % n not in readme]
    assert not missing, missing


def test_readme_examples_are_valid_yaml():
    with open(os.path.join(COLLECTION, "README.md"), encoding="utf-8") as f:
        blocks = f.read().split("```yaml\n")[1:]
    assert blocks
    for block in blocks:
        yaml.safe_load(block.split("```", 1)[0])
