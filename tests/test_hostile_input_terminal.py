"""Nothing any command prints can drive a terminal or reorder a line.

Names that set the window title (OSC), reset the terminal (ESC c), carry a C1 control (CSI
U+009B), a bidi override or isolate (U+202E, U+2066), a zero-width character or a newline
are fed to every command, on its results, footers, warnings and errors: what comes out
shows each of them as an escape, and no line starts where a name put a newline.
"""
import json
import os
import re
import shutil

import pytest
import yaml

from test_hostile_input import T4, inventory, write
from testlib import REPO

HOSTILE = ["\x1b]0;PWNED\x07", "\x1bc", "\x9b2J", "\u202eevil", "\u2066x\u2069", "zero\u200bwidth",
           "\rFORGED-CR", "\nFORGED-LINE", "\ufeffbom", "\u2028sep"]
NAME = "n" + "".join(HOSTILE)
# What must never reach a terminal: C0 but newline, DEL, C1, bidi controls, zero-width, separators.
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\u2028\u2029\ufeff]")


def assert_clean(out, err, where):
    for stream, text in (("stdout", out), ("stderr", err)):
        found = RAW.search(text)
        assert found is None, "%s: %s has %r at %d: %r" % (where, stream, found.group(0), found.start(),
                                                           text[max(found.start() - 60, 0):found.start() + 20])
        forged = [line for line in text.splitlines() if line.startswith("FORGED")]
        assert not forged, "%s: %s: a name started a line: %r" % (where, stream, forged)
    assert "Traceback" not in err, where


@pytest.fixture
def hostile_inventory(tmp_path):
    """GPU nodes named hostilely (with valid node names), a skipped host, a warning."""
    hosts = {
        NAME: dict(T4, gpuprov_node_name="ok-1", gpuprov_sharing={"strategy": "time-slicing", "replicas": 2}),
        NAME + "-2": dict(T4, gpuprov_node_name="ok-2", gpuprov_sharing={"strategy": "time-slicing", "replicas": 2}),
        "cp" + "".join(HOSTILE): {"ansible_host": "10.0.0.1"},
        "mig" + HOSTILE[0]: {"gpuprov_gpu_model": "A100-80GB", "gpuprov_node_name": "ok-3",
                             "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-1g.10gb"},
                                                 "time_slicing_replicas": 2}},
    }
    return inventory(tmp_path, hosts)


@pytest.mark.parametrize("output", ["table", "json", "yaml"])
def test_plan_output_footers_and_warnings(gpuprov, hostile_inventory, output):
    code, out, err = gpuprov("plan", "-i", hostile_inventory, "-o", output)
    assert code == 0, err
    assert_clean(out, err, "plan -o %s" % output)
    if output == "table":
        assert "Skipped (no gpuprov_ variables): cp\\x1b]0;PWNED\\x07" in out, out


@pytest.mark.parametrize("kind", ["device-plugin", "mig-parted", "helm-values"])
@pytest.mark.parametrize("output", [None, "json"])
def test_export_output(gpuprov, hostile_inventory, kind, output):
    code, out, err = gpuprov(*(["export", "-i", hostile_inventory, kind] + (["-o", output] if output else [])))
    assert code == 0, err
    assert_clean(out, err, "export %s" % kind)


def test_export_hami_output(gpuprov, tmp_path):
    host = {"gpuprov_gpu_model": "L20", "gpuprov_gpu_count": 2, "gpuprov_node_name": "ok-1",
            "gpuprov_sharing": {"strategy": "hami"}}
    code, out, err = gpuprov("export", "-i", inventory(tmp_path, {NAME: host}), "hami")
    assert code == 0, err
    assert_clean(out, err, "export hami")


@pytest.mark.parametrize("command", [("plan",), ("export", "device-plugin"), ("status",), ("apply", "--check")])
def test_errors_of_commands_that_read_an_inventory(gpuprov, tmp_path, command):
    hosts = {NAME: dict(T4, gpuprov_gpu_model="model" + "".join(HOSTILE), gpuprov_sharng=1)}
    code, out, err = gpuprov(*([command[0], "-i", inventory(tmp_path, hosts)] + list(command[1:])))
    assert code == 2
    assert_clean(out, err, " ".join(command))
    assert "n\\x1b]0;PWNED\\x07" in err


@pytest.mark.parametrize("command", ["apply", "status"])
def test_limit_that_matches_nothing_is_printed_escaped(gpuprov, tmp_path, command):
    code, out, err = gpuprov(command, "-i", inventory(tmp_path, {"n1": T4}), "-l", "x" + "".join(HOSTILE))
    assert code == 2
    assert_clean(out, err, command + " -l")


@pytest.mark.parametrize("args", [
    ("plan", "-i", "missing" + "".join(HOSTILE)),
    ("plan", "-i", "x", "-o", "bad" + "".join(HOSTILE)),
    ("catalog", "model" + "".join(HOSTILE)),
    ("fit", "missing" + "".join(HOSTILE)),
    ("diagnose", "--snapshot", "missing" + "".join(HOSTILE)),
    ("pool", "--snapshot", "missing" + "".join(HOSTILE)),
    ("bogus" + "".join(HOSTILE),),
])
def test_usage_and_argument_errors(gpuprov, args):
    code, out, err = gpuprov(*args)
    assert code == 2
    assert_clean(out, err, " ".join(args[:1]))


def test_ansible_warnings_are_escaped(gpuprov, tmp_path):
    # A group and a host with one name makes Ansible warn, naming them.
    path = tmp_path / "inventory.yml"
    other = {"other": dict(T4, gpuprov_node_name="ok-2")}
    path.write_text(yaml.safe_dump({"all": {"hosts": {NAME: dict(T4, gpuprov_node_name="ok-1")},
                                            "children": {NAME: {"hosts": other}}}}))
    code, out, err = gpuprov("plan", "-i", str(path))
    assert_clean(out, err, "plan with an Ansible warning")


@pytest.mark.parametrize("output", [None, "json"])
def test_catalog_with_a_hostile_user_model(gpuprov, tmp_path, output):
    path = write(tmp_path / "gpus.yml", yaml.safe_dump({"models": [{
        "name": "Lab-GPU", "memory": "48Gi", "compute_capability": "8.9", "pci_device_id": "0x2b85",
        "description": "desc" + "".join(HOSTILE)}]}))
    for args in (["catalog"], ["catalog", "Lab-GPU"]):
        code, out, err = gpuprov(*(args + ["--catalog", path] + (["-o", output] if output else [])))
        assert code == 0, err
        assert_clean(out, err, " ".join(args))


@pytest.mark.parametrize("output", [None, "json", "pods", "inventory"])
def test_fit_with_hostile_workload_names(gpuprov, tmp_path, output):
    path = tmp_path / "workloads.yaml"
    path.write_text(yaml.safe_dump({"workloads": [{"name": "w" + "".join(HOSTILE), "memory": 8},
                                                  {"name": "v" + "".join(HOSTILE), "memory": 500}],
                                    "pool": [{"model": "A100-80GB", "count": 2}]}))
    code, out, err = gpuprov(*(["fit", str(path)] + (["-o", output] if output else [])))
    assert_clean(out, err, "fit -o %s" % output)


def _hostile_snapshot(tmp_path):
    snapshot = tmp_path / "snapshot"
    shutil.copytree(os.path.join(REPO, "examples", "snapshot"), str(snapshot))
    for name in ("nodes.json", "pods.json"):
        data = json.loads((snapshot / name).read_text())
        for item in data["items"]:
            item["metadata"]["name"] = item["metadata"]["name"] + "".join(HOSTILE)
            if name == "pods.json":
                item["metadata"]["namespace"] = "ns" + HOSTILE[0]
        (snapshot / name).write_text(json.dumps(data))
    return str(snapshot)


@pytest.mark.parametrize("output", [None, "json"])
@pytest.mark.parametrize("command", ["diagnose", "pool"])
def test_snapshot_commands_with_hostile_names(gpuprov, tmp_path, command, output):
    snapshot = _hostile_snapshot(tmp_path)
    code, out, err = gpuprov(*([command, "--snapshot", snapshot] + (["-o", output] if output else [])))
    assert code in (0, 1, 2), err
    assert_clean(out, err, "%s --snapshot -o %s" % (command, output))



def test_every_command_prints_through_the_one_escaping_function():
    """No command writes to the terminal but through gpuprov.render.echo (which escapes).
    (top's node script runs on the node and writes JSON to the SSH channel.)"""
    found = []
    for folder, _, files in os.walk(os.path.join(REPO, "gpuprov")):
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py") or path.endswith(os.path.join("gpuprov", "render.py")) \
                    or path.endswith(os.path.join("top", "node_script.py")):
                continue
            with open(path, encoding="utf-8") as handle:
                for number, line in enumerate(handle, 1):
                    if re.search(r"click\.echo\(|click\.secho\(|\bprint\(|sys\.std(out|err)\.write", line):
                        found.append("%s:%d: %s" % (os.path.relpath(path, REPO), number, line.strip()))
    assert not found, found


def test_the_escaping_function_covers_every_invisible_or_acting_character():
    """Every code point of the categories that do not show as themselves (Cc, Cf, Cs, Zl, Zp),
    by the running Python's Unicode tables, comes out as an escape; printable text stays."""
    import sys
    import unicodedata

    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.terminal_text import UNSAFE_CATEGORIES, escape, visible

    acting = [chr(n) for n in range(sys.maxunicode + 1) if unicodedata.category(chr(n)) in UNSAFE_CATEGORIES]
    assert len(acting) > 2000  # C0, C1, DEL, the surrogates, bidi and zero-width format characters
    for char in acting:
        shown = escape("a" + char + "b")
        assert char not in shown and shown.startswith("a\\") and shown.endswith("b"), (hex(ord(char)), shown)
        if char != "\n":
            assert char not in visible(char)
    assert visible("line one\nline two") == "line one\nline two"
    assert escape("caf\u00e9 \u4e2d\u6587 GPU-\u00b5s") == "caf\u00e9 \u4e2d\u6587 GPU-\u00b5s"
