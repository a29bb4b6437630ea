"""The repository's layout rules, checked on the files as they are.

- Commands depend on a library (gpuprov/planning.py, gpuprov/diagnose/, ...), never on each
  other: no gpuprov/cmd_*.py imports another.
- One file spells the Kubernetes DNS-1123 name pattern: plugin_utils/kubernetes_names.py.
- One test tree per code tree: the collection's unit tests under its tests/unit, the CLI's,
  the roles' and the fleet's under tests/; no test file name in both, no twin conftest.py, no
  conftest.py registering a marker pyproject.toml declares, and no collection unit test that
  imports from the repository's tests/ folder (shared helpers live in the collection's
  tests/unit/plugins/test_support/).
- No dead code: vulture at 80% confidence, with tests/vulture_whitelist.py, reports nothing.
- Product code cites upstream (repository, file, version), never notes kept outside the
  repository.
"""
import ast
import itertools
import os
import re
import subprocess
import sys
import tomllib

import pytest

from testlib import REPO

COLLECTION = os.path.join(REPO, "collections", "ansible_collections", "gpuprov", "gpu")
COLLECTION_UNIT = os.path.join(COLLECTION, "tests", "unit")
TESTS = os.path.join(REPO, "tests")
PLUGINS = os.path.join(COLLECTION, "plugins")
CLI = os.path.join(REPO, "gpuprov")
KUBERNETES_NAMES = os.path.join(PLUGINS, "plugin_utils", "kubernetes_names.py")
VULTURE_WHITELIST = os.path.join(TESTS, "vulture_whitelist.py")
# Folders that hold no project source: tools' own trees and outputs.
NOT_SOURCE = {".git", ".venv", ".venv312", "__pycache__", "build", "dist", "output", ".pytest_cache",
              ".tox", "node_modules"}


def _files(top, suffixes=(".py",)):
    """Files under ``top`` (links to folders are not followed) whose names end in ``suffixes``."""
    for folder, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d not in NOT_SOURCE and not d.endswith(".egg-info"))
        for name in sorted(names):
            if suffixes is None or name.endswith(suffixes):
                yield os.path.join(folder, name)


def _rel(path):
    return os.path.relpath(path, REPO)


def _tree(path):
    with open(path, encoding="utf-8") as handle:
        return ast.parse(handle.read(), path)


def _imports(path):
    """(line, module, names) of every import in a file, function-level ones too; a relative
    import's module starts with its dots."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, "." * node.level + (node.module or ""), tuple(a.name for a in node.names)


def test_no_command_imports_another_command():
    offenders = []
    for path in sorted(_files(CLI)):
        if os.path.dirname(path) != CLI or not os.path.basename(path).startswith("cmd_"):
            continue
        for line, module, names in _imports(path):
            if module.startswith(("gpuprov.cmd_", ".cmd_")):
                offenders.append("%s:%d imports %s" % (_rel(path), line, module))
            elif module in ("gpuprov", ".") and any(n.startswith("cmd_") for n in names):
                offenders.append("%s:%d imports %s from %s" % (_rel(path), line, ", ".join(names), module))
    assert not offenders, (
        "a gpuprov/cmd_*.py module imports another command; move what they share into a library "
        "module (gpuprov/planning.py, gpuprov/plan_table.py, gpuprov/diagnose/...):\n  " + "\n  ".join(offenders))


# The heart of the DNS-1123 label pattern, however its character class is written:
# [-a-z0-9]*[a-z0-9], [a-z0-9-]*[a-z0-9], [a-z0-9\-]*[a-z0-9].
DNS_LABEL_CORE = re.compile(r"\[(?:-a-z0-9|a-z0-9-|a-z0-9\\-)\]\*\[a-z0-9\]")


def test_one_file_spells_the_kubernetes_name_pattern():
    spelled = []
    for path in itertools.chain(_files(CLI), _files(PLUGINS)):
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if DNS_LABEL_CORE.search(line):
                    spelled.append("%s:%d: %s" % (_rel(path), number, line.strip()))
    others = [s for s in spelled if not s.startswith(_rel(KUBERNETES_NAMES) + ":")]
    assert not others, (
        "the Kubernetes DNS-1123 name pattern is spelled outside %s; use its NODE_NAME_RE or "
        "DNS_SUBDOMAIN:\n  %s" % (_rel(KUBERNETES_NAMES), "\n  ".join(others)))
    assert spelled, "%s no longer spells the DNS-1123 pattern; update this test" % _rel(KUBERNETES_NAMES)


def _test_files(top):
    return dict((os.path.basename(p), p) for p in _files(top) if os.path.basename(p).startswith("test_"))


def test_no_test_file_name_in_both_test_trees():
    repo_tests, unit_tests = _test_files(TESTS), _test_files(COLLECTION_UNIT)
    both = sorted(set(repo_tests) & set(unit_tests))
    assert not both, (
        "test file names in both tests/ and the collection's tests/unit (rename or merge them, so a "
        "name says which tree and which code it tests):\n  " + "\n  ".join(
            "%s and %s" % (_rel(repo_tests[n]), _rel(unit_tests[n])) for n in both))


def _conftests():
    return [p for p in _files(REPO) if os.path.basename(p) == "conftest.py"]


def test_no_two_conftest_files_are_the_same():
    contents = {}
    for path in _conftests():
        with open(path, "rb") as handle:
            contents.setdefault(handle.read(), []).append(_rel(path))
    twins = [paths for paths in contents.values() if len(paths) > 1]
    assert not twins, (
        "byte-identical conftest.py files; keep one, in the folder above all the tests that use it:\n  "
        + "\n  ".join(", ".join(paths) for paths in twins))


def test_no_conftest_registers_a_marker_pyproject_declares():
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as handle:
        declared = set(m.split(":", 1)[0].strip()
                       for m in tomllib.load(handle)["tool"]["pytest"]["ini_options"]["markers"])
    registered = re.compile(r"""addinivalue_line\(\s*["']markers["']\s*,\s*["'](\w+)""")
    again = []
    for path in _conftests():
        with open(path, encoding="utf-8") as handle:
            again.extend("%s: %s" % (_rel(path), name) for name in registered.findall(handle.read())
                         if name in declared)
    assert not again, ("conftest.py registers markers pyproject.toml already declares (delete the "
                       "registration):\n  " + "\n  ".join(again))


def _repository_test_modules():
    """Top-level module names the repository's tests/ folder provides (testlib, controlplane, ...)."""
    names = set()
    for entry in os.listdir(TESTS):
        path = os.path.join(TESTS, entry)
        if entry.endswith(".py"):
            names.add(entry[:-3])
        elif os.path.isdir(path) and entry not in NOT_SOURCE:
            names.add(entry)
    return names


def _extends_sys_path_with_tests(node):
    """A sys.path.insert/append whose argument names a tests folder."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append") and ast.unparse(node.func.value) == "sys.path"):
        return False
    return any(isinstance(c, ast.Constant) and isinstance(c.value, str) and re.search(r"(^|/)tests(/|$)", c.value)
               for arg in node.args for c in ast.walk(arg))


def test_collection_unit_tests_import_nothing_from_the_repository_tests_folder():
    theirs = _repository_test_modules()
    offenders = []
    for path in _files(COLLECTION_UNIT):
        for line, module, _names in _imports(path):
            if not module.startswith(".") and module.split(".")[0] in theirs:
                offenders.append("%s:%d imports %s (tests/)" % (_rel(path), line, module))
        offenders.extend("%s:%d puts a tests folder on sys.path" % (_rel(path), node.lineno)
                         for node in ast.walk(_tree(path)) if _extends_sys_path_with_tests(node))
    assert not offenders, (
        "the collection's unit tests must run from the collection alone: move shared helpers to its "
        "tests/unit/plugins/test_support/ (the repository's tests/ may import them from there):\n  "
        + "\n  ".join(offenders))


def test_vulture_finds_no_dead_code():
    pytest.importorskip("vulture", reason="vulture is not installed here; it is a dev extra (pip install .[dev])")
    proc = subprocess.run([sys.executable, "-m", "vulture", "--min-confidence", "80", CLI, PLUGINS,
                           os.path.join(REPO, "bench"), VULTURE_WHITELIST],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and not proc.stdout.strip(), (
        "vulture reports unused code: delete it, or, where Ansible, click or Python call it by "
        "convention, add it to tests/vulture_whitelist.py with the reason:\n" + proc.stdout + proc.stderr)


# A citation of notes kept beside the repository, not in it: ../shared, a reference/ folder
# (not a URL path such as kubernetes.io/docs/reference/), or the notes' file names.
OUTSIDE_NOTES = re.compile(r"\.\./shared|(?<![\w/.-])reference/|\b(?:hami|dcgm|kubernetes|mig|ansible)\.md\b")


def test_product_code_cites_no_notes_outside_the_repository():
    product = itertools.chain(
        _files(CLI), _files(PLUGINS),
        _files(os.path.join(COLLECTION, "roles"), None), _files(os.path.join(COLLECTION, "playbooks"), None))
    citations = []
    for path in product:
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.readlines()
        except UnicodeDecodeError:
            continue  # not text
        citations.extend("%s:%d: %s" % (_rel(path), number, line.strip())
                         for number, line in enumerate(lines, 1) if OUTSIDE_NOTES.search(line))
    assert not citations, (
        "product code cites notes outside the repository; cite the upstream repository, file and "
        "version instead:\n  " + "\n  ".join(citations))
