# -*- coding: utf-8 -*-
"""Root writes a file only through folders and links that no other user could have planted."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.path_trust import planted_path_problem

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
