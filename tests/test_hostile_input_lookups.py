"""An untrusted inventory reads nothing of the machine that plans it: lookup('file') stays in
the inventory's folders, lookup('env') reads only the variables the user allows, files the
inventory names are held to the same folders, and no message shows a looked-up value."""
import os

import pytest
import yaml

from test_hostile_input import T4

SECRET = "s3cr3t-of-the-runner"


def _layout(tmp_path, host):
    """An inventory in tmp_path/repo/inventory/ and a secret file beside the repository."""
    outside = tmp_path / "home"
    outside.mkdir()
    (outside / "token").write_text(SECRET)
    folder = tmp_path / "repo" / "inventory"
    folder.mkdir(parents=True)
    path = folder / "hosts.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"n1": host}}}))
    return str(path), folder, outside


def _model_from_file(name):
    return dict(T4, gpuprov_gpu_model="{{ lookup('file', '%s') }}" % name)


@pytest.mark.parametrize("how", ["absolute", "dot-dot", "link", "proc-environ", "search-path"])
def test_file_lookup_outside_the_inventory_folder_is_refused(gpuprov, tmp_path, monkeypatch, how):
    monkeypatch.setenv("GPUPROV_TEST_SECRET", SECRET)
    path, folder, outside = _layout(tmp_path, T4)
    if how == "absolute":
        host = _model_from_file(str(outside / "token"))
    elif how == "dot-dot":
        host = _model_from_file(os.path.join(str(folder), "..", "..", "home", "token"))
    elif how == "link":
        os.symlink(str(outside / "token"), str(folder / "model.txt"))
        host = _model_from_file(str(folder / "model.txt"))
    elif how == "proc-environ":
        host = _model_from_file("/proc/self/environ")
    else:  # the inventory moves Ansible's search path out of its folder
        host = dict(_model_from_file("token"), ansible_search_path=[str(outside)])
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n1": host}}}))
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2, out
    assert "n1: gpuprov_gpu_model: lookup 'file' of" in err and "outside the inventory's folder" in err, err
    assert SECRET not in out + err
    assert "Traceback" not in err


def test_file_lookup_of_a_hidden_file_or_a_fifo_is_refused(gpuprov, tmp_path):
    path, folder, _ = _layout(tmp_path, T4)
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("[http]\n\textraheader = AUTHORIZATION: basic %s\n" % SECRET)
    os.mkfifo(str(folder / "pipe"))
    hosts = {"n1": _model_from_file(str(folder / ".git" / "config")), "n2": _model_from_file(str(folder / "pipe"))}
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2
    assert "n1: gpuprov_gpu_model: lookup 'file' of" in err and "hidden file or folder" in err, err
    assert "n2: gpuprov_gpu_model: lookup 'file' of" in err and "not a regular file" in err, err
    assert SECRET not in out + err


def test_a_refused_lookup_is_refused_even_when_the_template_ignores_errors(gpuprov, tmp_path):
    path, folder, outside = _layout(tmp_path, T4)
    host = dict(T4, gpuprov_gpu_model="{{ lookup('file', '%s', errors='ignore') or 'T4' }}" % (outside / "token"))
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n1": host}}}))
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2, out
    assert "n1: gpuprov_gpu_model: lookup 'file' of" in err


def test_file_lookup_inside_the_inventory_folder_still_renders(gpuprov, tmp_path):
    path, folder, _ = _layout(tmp_path, T4)
    (folder / "files").mkdir()
    (folder / "files" / "model.txt").write_text("T4\n")
    host = dict(T4, gpuprov_gpu_model="{{ lookup('file', '%s') }}" % (folder / "files" / "model.txt"))
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n1": host}}}))
    code, out, err = gpuprov("plan", "-i", path, "-o", "json")
    assert code == 0, err


def test_env_lookup_reads_only_allowed_variables(gpuprov, tmp_path, monkeypatch):
    monkeypatch.setenv("CI_DEPLOY_TOKEN", SECRET)
    monkeypatch.setenv("GPUPROV_MODEL", "T4")
    path, folder, _ = _layout(tmp_path, T4)
    hosts = {"n1": dict(T4, gpuprov_gpu_model="{{ lookup('env', 'CI_DEPLOY_TOKEN') }}"),
             "n2": dict(T4, gpuprov_gpu_model="{{ lookup('ansible.builtin.env', 'GPUPROV_MODEL') }}")}
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2
    assert "n1: gpuprov_gpu_model: lookup 'env' of 'CI_DEPLOY_TOKEN' is not allowed while planning" in err, err
    assert "n2:" not in err
    assert SECRET not in out + err
    # Named by the user, it is read (and still never printed in a message).
    code, out, err = gpuprov("plan", "-i", path, "--allow-env", "CI_DEPLOY_TOKEN")
    assert code == 2
    assert "n1: gpuprov_gpu_model:" in err and "lookup('env', 'CI_DEPLOY_TOKEN')" in err, err
    assert SECRET not in out + err


@pytest.mark.parametrize("template, refused", [
    ("{{ '$CI_DEPLOY_TOKEN' | expandvars }}", "filter 'expandvars' is not allowed while planning"),
    ("{{ '${CI_DEPLOY_TOKEN}' | ansible.builtin.expandvars }}", "filter 'ansible.builtin.expandvars' is not allowed"),
    ("{{ '~' | expanduser }}", "filter 'expanduser' is not allowed while planning"),
    ("{{ 'home/token' | realpath }}", "filter 'realpath' is not allowed while planning"),
    ("{{ 'T4' if 'OUTSIDE' is exists else 'A100-80GB' }}", "test 'exists' is not allowed while planning"),
    ("{{ 'T4' if 'OUTSIDE' is ansible.builtin.file else 'A100-80GB' }}", "test 'ansible.builtin.file' is not allowed"),
])
def test_filters_and_tests_that_read_the_machine_are_refused(gpuprov, tmp_path, monkeypatch, template, refused):
    monkeypatch.setenv("CI_DEPLOY_TOKEN", SECRET)
    path, folder, outside = _layout(tmp_path, T4)
    host = dict(T4, gpuprov_gpu_model=template.replace("OUTSIDE", str(outside / "token")))
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n1": host}}}))
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2, out
    assert "n1: gpuprov_gpu_model: " + refused in err, err
    assert SECRET not in out + err


@pytest.mark.parametrize("statement", ["{% include 'token' %}", "{% extends 'token' %}",
                                       "{% import 'token' as t %}T4", "{% from 'token' import x %}T4"])
def test_jinja_includes_read_only_the_inventory_folder(gpuprov, tmp_path, monkeypatch, statement):
    # Jinja reads these through a loader on Ansible's basedir: the working folder.
    path, folder, outside = _layout(tmp_path, T4)
    monkeypatch.chdir(str(outside))
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n1": dict(T4, gpuprov_gpu_model=statement)}}}))
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2, out
    assert "n1: gpuprov_gpu_model: template 'token' (include, import or extends): outside the inventory's folder" in err, err
    assert SECRET not in out + err


@pytest.mark.parametrize("template", [
    "{{ lookup('file', 'MODEL') }}",
    "{{ lookup('file', 'MODEL') | upper }}",
    "{{ 'prefix-' ~ lookup('file', 'MODEL') }}",
])
def test_a_looked_up_value_is_never_printed_in_an_error(gpuprov, tmp_path, template):
    path, folder, _ = _layout(tmp_path, T4)
    (folder / "model.txt").write_text(SECRET)
    host = dict(T4, gpuprov_gpu_model=template.replace("MODEL", str(folder / "model.txt")))
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n1": host}}}))
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2
    assert "n1: gpuprov_gpu_model:" in err
    assert "lookup('file', '%s')" % (folder / "model.txt") in err, err
    assert SECRET not in err and SECRET.upper() not in err, err


@pytest.mark.parametrize("variable", ["gpuprov_catalog_file", "gpuprov_mig_config_file"])
def test_files_named_by_the_inventory_stay_in_its_folder(gpuprov, tmp_path, variable):
    path, folder, outside = _layout(tmp_path, T4)
    (outside / "config.yaml").write_text("version: v1\n%s: [\n" % SECRET)
    host = {"gpuprov_gpu_model": "A100-80GB", variable: str(outside / "config.yaml"),
            "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}}
    (folder / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n1": host}}}))
    code, out, err = gpuprov("plan", "-i", path)
    assert code == 2
    assert "n1: %s:" % variable in err and "outside the inventory's folder" in err, err
    assert SECRET not in out + err
