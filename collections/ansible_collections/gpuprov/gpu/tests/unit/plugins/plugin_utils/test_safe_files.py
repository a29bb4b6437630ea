# -*- coding: utf-8 -*-
"""safe_files: every input file is read whole, typed and bounded, or refused naming it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tracemalloc

import pytest

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import safe_files


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return str(path)


def test_plain_yaml_and_json_load(tmp_path):
    assert safe_files.load(write(tmp_path, "a.yaml", "a: [1, 2]\n")) == {"a": [1, 2]}
    assert safe_files.load(write(tmp_path, "a.json", '{"a": [1, 2]}')) == {"a": [1, 2]}
    # A few aliases are fine: only their expanded size is bounded.
    assert safe_files.load(write(tmp_path, "b.yaml", "x: &x [1, 2]\ny: *x\n")) == {"x": [1, 2], "y": [1, 2]}


def test_alias_bomb_is_refused_while_composing(tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append("%s: &%s [%s]" % (cur, cur, ", ".join(["*" + prev] * 10)))
    path = write(tmp_path, "bomb.yaml", "\n".join(lines) + "\n")
    tracemalloc.start()
    try:
        with pytest.raises(safe_files.FileInputError, match="more than 500000 values once YAML aliases are expanded"):
            safe_files.load(path)
        dummy, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, peak


@pytest.mark.parametrize("name, data, message", [
    ("deep.yaml", "[" * 100000, "nesting deeper than 64 levels"),
    ("deep.json", "[" * 100000 + "]" * 100000, "nesting deeper than 64 levels"),
    ("deep2.json", "[" * 65 + "]" * 65, "nesting deeper than 64 levels"),
    ("nan.json", '{"a": NaN}', "NaN is not JSON"),
    ("inf.json", '[Infinity]', "Infinity is not JSON"),
    ("nul.yaml", b"a: 1\x00", "binary content"),
    ("latin.yaml", b"a: caf\xe9\n", "not UTF-8 text"),
    ("int.yaml", "a: " + "9" * 5000, "not valid YAML"),
    ("key.yaml", "? [a, b]\n: 1\n", "not valid YAML"),
])
def test_hostile_content_is_refused_naming_the_file(tmp_path, name, data, message):
    path = write(tmp_path, name, data)
    with pytest.raises(safe_files.FileInputError) as info:
        safe_files.load(path)
    assert str(info.value).startswith(path + ": ")
    assert message in str(info.value)


def test_size_cap_reads_no_more_than_it_needs(tmp_path):
    path = write(tmp_path, "big.yaml", "# " + "x" * (safe_files.MAX_BYTES + 10))
    with pytest.raises(safe_files.FileInputError, match="over the limit of 4194304 bytes"):
        safe_files.load(path)


def test_fifo_and_directory_are_refused_without_blocking(tmp_path):
    fifo = str(tmp_path / "fifo.yaml")
    os.mkfifo(fifo)
    with pytest.raises(safe_files.FileInputError, match="not a regular file"):
        safe_files.load(fifo)
    with pytest.raises(safe_files.FileInputError, match="not a regular file"):
        safe_files.load(str(tmp_path))
