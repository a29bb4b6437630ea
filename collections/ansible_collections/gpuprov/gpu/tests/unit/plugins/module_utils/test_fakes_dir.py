# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fakes are named by GPUPROV_FAKES_DIR, never searched for."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.fakes_dir import FAKES_DIR_ENV, fakes_dir


def test_the_named_folder_is_used(tmp_path, monkeypatch):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvidia-smi").write_text("#!/bin/sh\n")
    monkeypatch.setenv(FAKES_DIR_ENV, str(tmp_path))
    assert fakes_dir(os.path.join("bin", "nvidia-smi")) == str(tmp_path)


def test_a_folder_without_the_fake_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv(FAKES_DIR_ENV, str(tmp_path))
    assert fakes_dir(os.path.join("bin", "nvidia-smi")) is None


def test_nothing_is_searched_when_unset(monkeypatch, tmp_path):
    # From inside a repository checkout, a search up the tree would find the fakes.
    monkeypatch.delenv(FAKES_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert fakes_dir(os.path.join("python", "pynvml.py")) is None


def test_the_repository_names_its_fakes():
    # Set by the repository's root conftest.py for every test run from the checkout.
    path = os.environ.get(FAKES_DIR_ENV)
    if not path:
        pytest.skip("run outside the repository (no root conftest.py)")
    assert os.path.isfile(os.path.join(path, "python", "pynvml.py"))
    assert os.path.isfile(os.path.join(path, "bin", "nvidia-cuda-mps-control"))
