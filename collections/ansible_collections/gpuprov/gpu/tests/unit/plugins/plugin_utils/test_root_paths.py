# -*- coding: utf-8 -*-
"""The folders of code root runs: the stat(1) command and the rule both roles apply to its output."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.root_paths import (
    path_ancestors,
    root_path_problems,
    stat_argv,
)

OWN = ["/etc/gpuprov", "/usr/local/libexec/gpuprov"]


def entry(item, mode="0755", uid=0, kind="directory"):
    return json.dumps({"item": item, "uid": uid, "mode": mode, "type": kind})


def result(*lines, **kwargs):
    return {"stdout_lines": list(lines), "stderr_lines": kwargs.get("stderr", [])}


def healthy():
    return [entry(path) for path in ["/", "/etc", "/etc/gpuprov", "/usr", "/usr/local", "/usr/local/libexec",
                                     "/usr/local/libexec/gpuprov"]]


def test_root_owned_folders_writable_by_root_only_pass():
    assert root_path_problems(result(*healthy()), OWN) == []


def test_missing_folders_are_not_problems():
    missing = "stat: cannot statx '/usr/local/libexec/gpuprov': No such file or directory"
    assert root_path_problems(result(*healthy()[:-1], stderr=[missing]), OWN) == []


@pytest.mark.parametrize("mode", ["0775", "0757", "0777", "0735", "0753"])
def test_an_own_directory_others_can_write_to_is_refused(mode):
    lines = healthy()
    lines[2] = entry("/etc/gpuprov", mode)
    assert root_path_problems(result(*lines), OWN) == ["/etc/gpuprov can be written by other users"]


@pytest.mark.parametrize("mode", ["1777", "3777", "5777", "7777"])
def test_a_sticky_own_directory_is_still_refused(mode):
    lines = healthy()
    lines[2] = entry("/etc/gpuprov", mode)
    assert root_path_problems(result(*lines), OWN) == ["/etc/gpuprov can be written by other users"]


def test_a_sticky_folder_above_is_allowed_and_a_plain_open_one_is_not():
    lines = healthy()
    lines[1] = entry("/etc", "1777")
    assert root_path_problems(result(*lines), OWN) == []
    lines[1] = entry("/etc", "0777")
    assert root_path_problems(result(*lines), OWN) == ["/etc can be written by other users"]


@pytest.mark.parametrize("mode", ["0750", "0705", "0711", "0555", "4755", "2755"])
def test_modes_without_group_or_other_write_pass(mode):
    lines = healthy()
    lines[2] = entry("/etc/gpuprov", mode)
    assert root_path_problems(result(*lines), OWN) == []


def test_every_kind_of_problem_is_named_in_one_list():
    lines = healthy()
    lines[0] = entry("/", "0777")
    lines[3] = entry("/usr", uid=1000)
    lines[6] = entry("/usr/local/libexec/gpuprov", "0777", kind="symbolic link")
    unread = "stat: cannot statx '/etc/gpuprov/x': Not a directory"
    assert root_path_problems(result(*lines, stderr=[unread]), OWN) == [
        "stat(1) could not read every folder: %s" % unread,
        "/usr belong(s) to another user than root",
        "/ can be written by other users",
        "/usr/local/libexec/gpuprov is a symbolic link",
    ]


def test_a_link_above_the_own_directories_is_judged_by_its_owner_only():
    # /var/run -> /run on most hosts: a root-owned link (mode 0777, as links are) is fine.
    lines = [entry("/"), entry("/var"), entry("/var/run", "0777", kind="symbolic link")]
    assert root_path_problems(result(*lines), ["/var/run/gpuprov"]) == []
    lines[2] = entry("/var/run", "0777", uid=1000, kind="symbolic link")
    assert root_path_problems(result(*lines), ["/var/run/gpuprov"]) == ["/var/run belong(s) to another user than root"]


def test_a_path_named_twice_is_reported_once():
    lines = healthy()
    lines[2] = entry("/etc/gpuprov", "0777")
    assert root_path_problems(result(*lines), OWN + ["/etc/gpuprov"]) == ["/etc/gpuprov can be written by other users"]


@pytest.mark.parametrize("line", ["not json", json.dumps({"item": "/", "uid": 0, "mode": "755", "type": "directory"}),
                                  json.dumps({"item": "/", "uid": 0, "mode": "0755\n", "type": "directory"}),
                                  json.dumps(["/"])])
def test_output_that_is_not_stats_format_is_an_error(line):
    with pytest.raises(AnsibleFilterError, match="root_path_problems"):
        root_path_problems(result(line), OWN)


def test_something_else_than_a_registered_result_is_an_error():
    with pytest.raises(AnsibleFilterError, match="registered result"):
        root_path_problems(["/etc"], OWN)


def test_the_argv_reads_every_folder_once_after_the_end_of_options():
    assert stat_argv(["/etc/gpuprov", "/etc/gpuprov/x"])[3:] == ["--", "/", "/etc", "/etc/gpuprov", "/etc/gpuprov/x"]
    assert path_ancestors("/run/nvidia-mps") == ["/", "/run", "/run/nvidia-mps"]
    for bad in ("etc/gpuprov", "/etc/../tmp"):
        with pytest.raises(AnsibleFilterError):
            stat_argv([bad])


@pytest.mark.skipif(shutil.which("stat") is None, reason="GNU stat(1) is not installed")
def test_real_stat_output_is_read(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    os.chmod(str(own), 0o777)
    proc = subprocess.run(stat_argv([str(own), str(tmp_path / "absent")]), capture_output=True, text=True,
                          env=dict(os.environ, LC_ALL="C"), check=False)
    assert proc.returncode == 1, proc.stderr
    registered = {"stdout_lines": proc.stdout.splitlines(), "stderr_lines": proc.stderr.splitlines()}
    problems = root_path_problems(registered, [str(own), str(tmp_path / "absent")])
    assert "%s can be written by other users" % own in problems[-1]
    assert not any("could not read" in problem for problem in problems)
