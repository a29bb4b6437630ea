# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The file_set module end to end: arguments in, JSON out, files on a real filesystem."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpuprov.gpu.plugins.modules import file_set


def run(capsys, directory, files, mode="0644", check_mode=False, diff=False, **args):
    params = dict(args, directory=str(directory), files=files, mode=mode, _ansible_check_mode=check_mode, _ansible_diff=diff)
    capsys.readouterr()
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            file_set.main()
    return json.loads(capsys.readouterr().out)


def mode_of(path):
    return stat.S_IMODE(os.lstat(str(path)).st_mode)


def test_writes_every_file_then_changes_nothing(capsys, tmp_path):
    files = {"a.py": "A = 1\n", "b.py": "B = 'ü'\n"}
    first = run(capsys, tmp_path, files)
    assert first["changed"] is True and "failed" not in first
    assert first["changed_files"] == [str(tmp_path / "a.py"), str(tmp_path / "b.py")]
    assert (tmp_path / "a.py").read_text() == "A = 1\n" and mode_of(tmp_path / "a.py") == 0o644
    assert (tmp_path / "b.py").read_bytes() == "B = 'ü'\n".encode("utf-8")
    second = run(capsys, tmp_path, files)
    assert second["changed"] is False and second["changed_files"] == []
    # No temporary file is left beside the files.
    assert sorted(os.listdir(str(tmp_path))) == ["a.py", "b.py"]
    assert mode_of(tmp_path / "a.py") == 0o644
    third = run(capsys, tmp_path, files, mode="0755")
    assert third["changed_files"] == first["changed_files"] and mode_of(tmp_path / "b.py") == 0o755


def test_only_a_file_whose_content_or_mode_differs_is_written(capsys, tmp_path):
    same, other, loose = tmp_path / "same", tmp_path / "other", tmp_path / "loose"
    same.write_text("x\n")
    other.write_text("old\n")
    loose.write_text("y\n")
    for path in (same, other):
        path.chmod(0o644)
    loose.chmod(0o666)
    inode = os.stat(str(same)).st_ino
    result = run(capsys, tmp_path, {"same": "x\n", "other": "new\n", "loose": "y\n"})
    assert result["changed_files"] == [str(loose), str(other)]
    assert os.stat(str(same)).st_ino == inode
    assert other.read_text() == "new\n" and mode_of(loose) == 0o644


def test_check_mode_reports_and_writes_nothing_with_a_diff(capsys, tmp_path):
    target = tmp_path / "f"
    target.write_text("old\n")
    result = run(capsys, tmp_path, {"f": "new\n", "g": "g\n"}, check_mode=True, diff=True)
    assert result["changed"] is True and result["changed_files"] == [str(target), str(tmp_path / "g")]
    assert target.read_text() == "old\n" and not (tmp_path / "g").exists()
    assert result["diff"][0] == {"before_header": str(target), "after_header": str(target),
                                 "before": "old\n", "after": "new\n"}
    assert result["diff"][1]["before"] == ""


def test_check_mode_of_a_directory_a_run_would_create_reports_every_file(capsys, tmp_path):
    result = run(capsys, tmp_path / "new", {"b": "2\n", "a": "1\n"}, check_mode=True)
    assert result["changed"] is True and result["changed_files"] == [str(tmp_path / "new" / "a"), str(tmp_path / "new" / "b")]
    assert not (tmp_path / "new").exists()
    # Outside check mode the directory must be there.
    assert "does not exist" in run(capsys, tmp_path / "new", {"a": "1\n"})["msg"]


def test_a_link_in_a_files_place_is_replaced_never_written_through(capsys, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    link = tmp_path / "code.py"
    link.symlink_to(victim)
    result = run(capsys, tmp_path, {"code.py": "code\n"})
    assert result["changed"] is True
    assert victim.read_text() == "keep\n"
    assert not link.is_symlink() and link.read_text() == "code\n"


def test_a_linked_directory_is_refused(capsys, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "planted").symlink_to(real)
    result = run(capsys, tmp_path / "planted", {"x.py": "x\n"})
    assert result["failed"] is True and result["changed"] is False
    assert "%s is not a directory (a symbolic link or a file)" % (tmp_path / "planted") in result["msg"]
    assert os.listdir(str(real)) == []


@pytest.mark.parametrize("what", ["directory", "fifo"])
def test_something_other_than_a_file_in_its_place_is_refused_before_any_write(capsys, tmp_path, what):
    place = tmp_path / "place"
    if what == "directory":
        place.mkdir()
    else:
        os.mkfifo(str(place))
    # "before" sorts first: it would be written first, were the refusal not made up front.
    result = run(capsys, tmp_path, {"before": "b\n", "place": "x\n"})
    assert result["failed"] is True and "is not a regular file; refusing to replace it" in result["msg"]
    assert not (tmp_path / "before").exists()


@pytest.mark.parametrize("name", ["../escape", "sub/f", "..", ".", ""])
def test_a_name_that_is_not_a_plain_file_name_is_refused(capsys, tmp_path, name):
    (tmp_path / "inside").mkdir()
    result = run(capsys, tmp_path / "inside", {"ok": "1\n", name: "x\n"})
    assert result["failed"] is True and "a plain file name is needed, not a path" in result["msg"]
    assert os.listdir(str(tmp_path / "inside")) == [] and sorted(os.listdir(str(tmp_path))) == ["inside"]


def test_a_missing_directory_a_relative_one_and_a_bad_mode_are_named(capsys, tmp_path):
    missing = run(capsys, tmp_path / "no", {"f": "x\n"})
    assert missing["failed"] is True and "directory %s does not exist" % (tmp_path / "no") in missing["msg"]
    relative = run(capsys, "relative", {"f": "x\n"})
    assert relative["failed"] is True and "an absolute path is needed" in relative["msg"]
    bad = run(capsys, tmp_path, {"f": "x\n"}, mode="rw-r--r--")
    assert bad["failed"] is True and "mode 'rw-r--r--' is not an octal permission" in bad["msg"]
    assert not (tmp_path / "f").exists()


def test_an_unknown_owner_is_refused_before_any_write(capsys, tmp_path):
    result = run(capsys, tmp_path, {"f": "x\n"}, owner="no-such-user-gpuprov")
    assert result["failed"] is True and "no such user on this node" in result["msg"]
    assert not (tmp_path / "f").exists()


def test_owner_and_group_by_number_are_set_and_compared(capsys, tmp_path):
    uid, gid = os.getuid(), os.getgid()
    first = run(capsys, tmp_path, {"f": "x\n"}, owner=str(uid), group=str(gid))
    assert first["changed"] is True
    info = os.stat(str(tmp_path / "f"))
    assert (info.st_uid, info.st_gid) == (uid, gid)
    assert run(capsys, tmp_path, {"f": "x\n"}, owner=str(uid), group=str(gid))["changed"] is False


def test_a_failed_write_leaves_that_file_as_it_was_and_names_what_was_written(capsys, tmp_path, monkeypatch):
    first, second = tmp_path / "first", tmp_path / "second"
    second.write_text("old\n")
    real_rename = os.rename

    def failing_rename(src, dst, **kwargs):
        if dst == "second":
            raise OSError(28, "No space left on device")
        return real_rename(src, dst, **kwargs)

    monkeypatch.setattr(file_set.os, "rename", failing_rename)
    result = run(capsys, tmp_path, {"first": "1\n", "second": "new\n"})
    assert result["failed"] is True and result["changed"] is True and result["changed_files"] == [str(first)]
    assert "No space left on device" in result["msg"]
    assert second.read_text() == "old\n" and first.read_text() == "1\n"
    assert sorted(os.listdir(str(tmp_path))) == ["first", "second"]
