# -*- coding: utf-8 -*-
"""Root writes a file only through folders and links that no other user could have planted."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils import path_trust
from ansible_collections.gpuprov.gpu.plugins.module_utils.path_trust import planted_path_problem, root_folder_problems

OTHER_UID = 65534  # nobody
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")


@pytest.fixture
def base(tmp_path):
    folder = tmp_path / "base"
    folder.mkdir(mode=0o755)
    os.chmod(str(folder), 0o755)
    return folder


def test_plain_folders_and_a_missing_file_pass(base):
    (base / "kubelet").mkdir(mode=0o755)
    assert planted_path_problem(str(base / "kubelet" / "config.yaml")) is None
    assert planted_path_problem(str(base / "not-yet" / "config.yaml")) is None


def test_a_link_of_this_user_is_followed_and_its_target_folder_checked(base):
    (base / "real").mkdir(mode=0o755)
    (base / "kubelet").mkdir(mode=0o755)
    os.symlink(str(base / "real" / "config.yaml"), str(base / "kubelet" / "config.yaml"))
    assert planted_path_problem(str(base / "kubelet" / "config.yaml")) is None
    os.chmod(str(base / "real"), 0o777)  # the link leads into a folder anyone can write to
    problem = planted_path_problem(str(base / "kubelet" / "config.yaml"))
    assert problem == "%s can be written by other users (mode 0o777)" % (base / "real")


def test_a_world_writable_folder_without_sticky_bit_is_refused(base):
    os.chmod(str(base), 0o777)
    assert "can be written by other users" in planted_path_problem(str(base / "config.yaml"))


def test_a_sticky_world_writable_folder_passes_for_entries_of_root_or_this_user(base):
    os.chmod(str(base), 0o1777)
    (base / "mine").mkdir(mode=0o755)
    assert planted_path_problem(str(base / "mine" / "config.yaml")) is None


@needs_root
def test_a_link_planted_by_another_user_in_a_sticky_folder_is_refused(base, tmp_path):
    os.chmod(str(base), 0o1777)
    secret = tmp_path / "shadow"
    secret.write_text("root only\n")
    link = base / "config.yaml"
    os.symlink(str(secret), str(link))
    os.lchown(str(link), OTHER_UID, OTHER_UID)
    problem = planted_path_problem(str(link))
    assert problem == "%s in the folder %s, which others can write to, belongs to uid %d" % (link, base, OTHER_UID)


@needs_root
def test_a_folder_of_another_user_is_refused(base):
    (base / "kubelet").mkdir(mode=0o755)
    os.chown(str(base / "kubelet"), OTHER_UID, OTHER_UID)
    problem = planted_path_problem(str(base / "kubelet" / "config.yaml"))
    assert problem == "%s belongs to uid %d, neither root nor this user" % (base / "kubelet", OTHER_UID)


@needs_root
def test_a_group_writable_folder_is_refused_unless_the_group_is_roots_or_mine(base):
    os.chmod(str(base), 0o775)
    assert planted_path_problem(str(base / "config.yaml")) is None  # root's group
    os.chown(str(base), 0, OTHER_UID)
    assert "can be written by other users" in planted_path_problem(str(base / "config.yaml"))


def test_a_link_loop_ends(base):
    os.symlink("b", str(base / "a"))
    os.symlink("a", str(base / "b"))
    assert "too many levels of symbolic links" in planted_path_problem(str(base / "a" / "config.yaml"))


# root_folder_problems: the rule for code root runs (no user but root), from lstat(2).
@pytest.fixture
def root_base(tmp_path):
    """tmp_path/node, root's, 0755 (/tmp above it is sticky and root's)."""
    node = tmp_path / "node"
    node.mkdir()
    node.chmod(0o755)
    tmp_path.chmod(0o755)
    return node


@needs_root
def test_root_folders_pass_and_missing_ones_are_not_problems(root_base):
    (root_base / "etc").mkdir()
    assert root_folder_problems([str(root_base / "etc" / "gpuprov" / "deep")], [str(root_base / "etc" / "gpuprov")]) == []


@needs_root
def test_root_rule_names_every_kind_of_problem(root_base):
    own, other, shared = root_base / "own", root_base / "other", root_base / "shared"
    own.mkdir()
    own.chmod(0o1777)   # sticky or not, an own directory may not be shared
    other.mkdir()
    os.chown(str(other), OTHER_UID, OTHER_UID)
    shared.mkdir()
    shared.chmod(0o775)   # group write: refused even for root's group
    link = root_base / "link"
    os.symlink(str(root_base), str(link))
    problems = root_folder_problems([str(other / "x"), str(shared / "x")], [str(own), str(link)])
    assert problems == ["%s belong(s) to another user than root" % other,
                        "%s, %s can be written by other users" % (own, shared),
                        "%s is a symbolic link" % link]


@needs_root
def test_a_sticky_folder_above_the_own_directories_is_allowed(root_base):
    sticky = root_base / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    (sticky / "gpuprov").mkdir()
    assert root_folder_problems([], [str(sticky / "gpuprov")]) == []
    os.chown(str(sticky / "gpuprov"), OTHER_UID, OTHER_UID)
    assert root_folder_problems([], [str(sticky / "gpuprov")]) == ["%s belong(s) to another user than root" % (sticky / "gpuprov")]


@needs_root
def test_a_root_link_on_the_way_is_followed_and_its_target_judged(root_base):
    """A link of root's on the way to a folder another user owns: judging the link by its owner
    and the last folder alone is not enough; the walk judges the folders the link leads to."""
    theirs = root_base / "theirs"
    (theirs / "lib").mkdir(parents=True)
    os.chown(str(theirs), OTHER_UID, OTHER_UID)
    os.symlink(str(theirs), str(root_base / "opt"))
    problems = root_folder_problems([], [str(root_base / "opt" / "lib")])
    assert problems == ["%s belong(s) to another user than root" % theirs]
    # A file's folder (not an own directory) that is a link is followed too.
    assert root_folder_problems([str(root_base / "opt")], []) == ["%s belong(s) to another user than root" % theirs]


@needs_root
def test_a_link_of_another_user_on_the_way_is_refused(root_base):
    (root_base / "real").mkdir()
    os.symlink(str(root_base / "real"), str(root_base / "via"))
    os.lchown(str(root_base / "via"), OTHER_UID, OTHER_UID)
    assert root_folder_problems([], [str(root_base / "via" / "gpuprov")]) == [
        "%s belong(s) to another user than root" % (root_base / "via")]


@needs_root
def test_a_file_on_the_way_cannot_be_read_as_a_folder(root_base):
    (root_base / "etc").write_text("not a folder\n")
    problems = root_folder_problems([], [str(root_base / "etc" / "gpuprov")])
    assert problems == ["could not read every folder: %s: Not a directory" % (root_base / "etc")]


@needs_root
def test_a_link_loop_is_reported_not_followed_forever(root_base):
    os.symlink("loop", str(root_base / "loop"))
    problems = root_folder_problems([], [str(root_base / "loop" / "x")])
    assert len(problems) == 1 and "too many levels of symbolic links" in problems[0]


def _events(path, follow_last=True):
    return [(event, entry) for event, entry, _info, _folder, _folder_info in path_trust._walk(path, follow_last)]


def test_the_walk_goes_through_links_and_dot_dot_as_the_kernel_resolves_them(base):
    (base / "real").mkdir(mode=0o755)
    os.symlink("real", str(base / "rel"))  # relative: the walk stays in base
    os.symlink(str(base / "real"), str(base / "abs"))  # absolute: the walk starts again at /
    top = [("folder", "/")]
    for parent in reversed(list(base.parents)[:-1]):
        top += [("entry", str(parent)), ("folder", str(parent))]
    into_base = [("entry", str(base)), ("folder", str(base))]

    assert _events(str(base / "rel" / "f")) == top + into_base + [
        ("entry", str(base / "rel")), ("entry", str(base / "real")), ("folder", str(base / "real")),
        ("missing", str(base / "real" / "f"))]
    assert _events(str(base / "abs")) == top + into_base + [("entry", str(base / "abs")), ("folder", "/")] + top[1:] + \
        into_base + [("entry", str(base / "real")), ("resolved", str(base / "real"))]
    assert _events(str(base / "abs"), follow_last=False)[-1] == ("link-not-followed", str(base / "abs"))
    assert _events(str(base / "real" / ".." / "rel"))[-4:] == [
        ("folder", str(base)), ("entry", str(base / "rel")), ("entry", str(base / "real")),
        ("resolved", str(base / "real"))]


def test_the_walk_ends_at_a_file_with_more_path_after_it(base):
    (base / "file").write_text("x")
    assert _events(str(base / "file" / "more"))[-1] == ("not-a-directory", str(base / "file"))
    assert _events(str(base / "file"))[-1] == ("resolved", str(base / "file"))
