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


def call(capsys, files, mode="0644", check_mode=False, diff=False, **args):
    params = dict(args, files=files, mode=mode, _ansible_check_mode=check_mode, _ansible_diff=diff)
    capsys.readouterr()
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            file_set.main()
    return json.loads(capsys.readouterr().out)


def run(capsys, directory, files, **args):
    """FILES (name to content) into DIRECTORY, in the order of their names."""
    entries = [dict(path=os.path.join(str(directory), name), content=files[name]) for name in sorted(files)]
    return call(capsys, entries, **args)


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


@pytest.mark.parametrize("path", ["{d}/../escape", "{d}/./f", "{d}//f", "{d}/f/", "relative/f", "", "/"])
def test_a_path_that_is_not_absolute_and_normal_is_refused_before_any_write(capsys, tmp_path, path):
    (tmp_path / "inside").mkdir()
    entries = [dict(path=str(tmp_path / "inside" / "ok"), content="1\n"),
               dict(path=path.format(d=tmp_path / "inside"), content="x\n")]
    result = call(capsys, entries)
    assert result["failed"] is True and "path is needed" in result["msg"]
    assert os.listdir(str(tmp_path / "inside")) == [] and sorted(os.listdir(str(tmp_path))) == ["inside"]


def test_a_file_given_twice_is_refused(capsys, tmp_path):
    entries = [dict(path=str(tmp_path / "f"), content="1\n"), dict(path=str(tmp_path / "f"), content="2\n")]
    result = call(capsys, entries)
    assert result["failed"] is True and "is given twice" in result["msg"] and not (tmp_path / "f").exists()


def test_a_missing_directory_a_relative_one_and_a_bad_mode_are_named(capsys, tmp_path):
    missing = run(capsys, tmp_path / "no", {"f": "x\n"})
    assert missing["failed"] is True and "directory %s does not exist" % (tmp_path / "no") in missing["msg"]
    relative = run(capsys, "relative", {"f": "x\n"})
    assert relative["failed"] is True and "an absolute path is needed" in relative["msg"]
    bad_file_mode = call(capsys, [dict(path=str(tmp_path / "f"), content="x\n", mode="999")])
    assert bad_file_mode["failed"] is True and "mode of %s '999' is not an octal" % (tmp_path / "f") in bad_file_mode["msg"]
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


def test_directories_and_files_in_several_directories_in_one_call(capsys, tmp_path):
    lib, state, units = tmp_path / "usr/local/lib/x", tmp_path / "var/lib/x", tmp_path / "etc/units"
    units.mkdir(parents=True)
    units.chmod(0o700)
    entries = [dict(path=str(lib / "run.py"), content="#!/usr/bin/python3\n", mode="0755"),
               dict(path=str(state / "state.json"), content="{}\n"),
               dict(path=str(units / "x.service"), content="[Unit]\n")]
    first = call(capsys, entries, directories=[str(lib), str(state), str(units)], directory_mode="0751")
    assert "failed" not in first, first.get("msg")
    assert first["changed_directories"] == [str(lib), str(state), str(units)]
    assert first["changed_files"] == [entry["path"] for entry in entries]
    # Missing parents are made with the same mode, an existing directory is given it.
    for path in (lib, lib.parent, tmp_path / "usr", state, units):
        assert stat.S_ISDIR(os.lstat(str(path)).st_mode) and mode_of(path) == 0o751
    assert mode_of(lib / "run.py") == 0o755 and mode_of(state / "state.json") == 0o644
    second = call(capsys, entries, directories=[str(lib), str(state), str(units)], directory_mode="0751")
    assert second["changed"] is False and second["changed_directories"] == [] and second["changed_files"] == []


def test_check_mode_reports_the_directories_it_would_create_and_writes_nothing(capsys, tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old").chmod(0o755)
    entries = [dict(path=str(tmp_path / "new/sub/f"), content="x\n"), dict(path=str(tmp_path / "old/g"), content="y\n")]
    result = call(capsys, entries, directories=[str(tmp_path / "new/sub"), str(tmp_path / "old")], check_mode=True)
    assert result["changed"] is True
    assert result["changed_directories"] == [str(tmp_path / "new/sub")]
    assert result["changed_files"] == [entry["path"] for entry in entries]
    assert sorted(os.listdir(str(tmp_path))) == ["old"] and os.listdir(str(tmp_path / "old")) == []


def test_a_file_beside_a_directory_the_run_creates_is_still_read(capsys, tmp_path):
    # tmp_path exists; only tmp_path/new is created: tmp_path/f is compared, not taken as new.
    (tmp_path / "f").write_text("x\n")
    (tmp_path / "f").chmod(0o644)
    entries = [dict(path=str(tmp_path / "f"), content="x\n")]
    result = call(capsys, entries, directories=[str(tmp_path / "new")], check_mode=True)
    assert result["changed_files"] == [] and result["changed_directories"] == [str(tmp_path / "new")]


def test_a_linked_directory_to_create_is_refused_before_any_write(capsys, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "planted").symlink_to(real)
    entries = [dict(path=str(tmp_path / "first"), content="x\n")]
    result = call(capsys, entries, directories=[str(tmp_path / "planted")])
    assert result["failed"] is True and "is a symbolic link; refusing to use it as a directory" in result["msg"]
    assert not (tmp_path / "first").exists()
    # A file where a parent would be is refused too.
    (tmp_path / "file").write_text("")
    result = call(capsys, entries, directories=[str(tmp_path / "file" / "sub")])
    assert result["failed"] is True and "%s is not a directory" % (tmp_path / "file") in result["msg"]
    assert not (tmp_path / "first").exists()


def test_a_backup_keeps_the_old_content_mode_and_time_beside_the_new_file(capsys, tmp_path):
    unit = tmp_path / "x.service"
    unit.write_text("old\n")
    unit.chmod(0o640)
    os.utime(str(unit), (1000000000, 1000000000))
    entries = [dict(path=str(unit), content="new\n", backup=True)]
    result = call(capsys, entries)
    backup = result["backup_files"][str(unit)]
    assert os.path.dirname(backup) == str(tmp_path)
    assert os.path.basename(backup).startswith("x.service.%d." % os.getpid()) and backup.endswith("~")
    with open(backup) as handle:
        assert handle.read() == "old\n"
    assert mode_of(backup) == 0o640 and os.stat(backup).st_mtime == 1000000000
    assert unit.read_text() == "new\n" and mode_of(unit) == 0o644
    # Same content (only the mode differs): no backup, as ansible.builtin.copy does.
    unit.chmod(0o600)
    again = call(capsys, entries)
    assert again["changed_files"] == [str(unit)] and again["backup_files"] == {}
    assert sorted(os.listdir(str(tmp_path))) == sorted(["x.service", os.path.basename(backup)])


def test_a_link_in_a_backed_up_files_place_is_replaced_and_its_target_left_alone(capsys, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("secret\n")
    (tmp_path / "x.service").symlink_to(victim)
    result = call(capsys, [dict(path=str(tmp_path / "x.service"), content="new\n", backup=True)])
    assert result["backup_files"] == {} and victim.read_text() == "secret\n"
    assert sorted(os.listdir(str(tmp_path))) == ["victim", "x.service"]
    assert not (tmp_path / "x.service").is_symlink()


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="folders of root and of another user need root")


@pytest.fixture
def root_tree(tmp_path):
    """tmp_path/node, root's and 0755 (the folders above: /tmp sticky, pytest's root-only)."""
    tmp_path.chmod(0o755)
    node = tmp_path / "node"
    node.mkdir()
    node.chmod(0o755)
    return node


def root_install(capsys, node, check_mode=False):
    return call(capsys, [dict(path=str(node / "lib" / "run.py"), content="print(1)\n", mode="0755"),
                         dict(path=str(node / "etc" / "unit.service"), content="[Unit]\n")],
                directories=[str(node / "lib")], require_root_folders=True, owner="0", group="0",
                check_mode=check_mode)


@needs_root
def test_require_root_folders_writes_when_only_root_can_change_the_folders(capsys, root_tree):
    (root_tree / "etc").mkdir()
    result = root_install(capsys, root_tree)
    assert "failed" not in result, result
    assert result["changed_files"] == [str(root_tree / "lib" / "run.py"), str(root_tree / "etc" / "unit.service")]
    assert root_install(capsys, root_tree)["changed"] is False


@needs_root
@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("hostile", ["file-folder-open", "own-link", "not-root-above"])
def test_require_root_folders_refuses_before_anything_is_written(capsys, root_tree, hostile, check_mode):
    (root_tree / "etc").mkdir()
    if hostile == "file-folder-open":
        (root_tree / "etc").chmod(0o777)   # a file's folder others can write to
        expected = "%s can be written by other users" % (root_tree / "etc")
    elif hostile == "own-link":
        elsewhere = root_tree / "elsewhere"
        elsewhere.mkdir()
        os.symlink(str(elsewhere), str(root_tree / "lib"))
        expected = "%s is a symbolic link" % (root_tree / "lib")
    else:
        os.chown(str(root_tree), 65534, 65534)
        expected = "%s belong(s) to another user than root" % root_tree
    result = root_install(capsys, root_tree, check_mode=check_mode)
    assert result["failed"] is True and expected in result["msg"], result
    assert "only root may be able to change it" in result["msg"]
    assert result["changed"] is False and result["changed_files"] == [] and result["changed_directories"] == []
    assert not (root_tree / "etc" / "unit.service").exists()
    assert not os.path.exists(str(root_tree / "lib" / "run.py"))
