# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""cpuset parsing/formatting, the sysfs topology readers and the 'auto' reservation."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils import cpuset
from ansible_collections.gpuprov.gpu.plugins.module_utils.cpuset import (
    CpuTopology,
    CpusetError,
    SysfsError,
    auto_reserved_cpus,
    format_cpuset,
    parse_cpuset,
    read_cpulist,
    read_numa_node_cpus,
    read_numa_node_memory,
    read_online_cpus,
    read_thread_siblings,
)
from ansible_collections.gpuprov.gpu.tests.unit.plugins.module_utils.fake_sysfs import build_sysfs


# --------------------------------------------------------------------------------------------
# parse / format


@pytest.mark.parametrize("text, expected", [
    ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
    ("5", [5]),
    ("0-0", [0]),
    ("8,0-1", [0, 1, 8]),
    (" 0-1 , 4 \n", [0, 1, 4]),
    ("", []),
    ("\n", []),
    ("126-127", [126, 127]),
])
def test_parse_cpuset(text, expected):
    assert parse_cpuset(text) == expected


@pytest.mark.parametrize("text, message", [
    ("3-1", "reversed range '3-1'"),
    ("0,,2", "empty element"),
    ("0,", "empty element"),
    ("a", "invalid CPU number 'a'"),
    ("0-x", "invalid CPU number 'x'"),
    ("-1", "invalid CPU number ''"),
    ("1-", "invalid CPU number ''"),
    ("+1", "invalid CPU number '+1'"),
    ("0x3", "invalid CPU number '0x3'"),
    ("1.5", "invalid CPU number '1.5'"),
    ("0-31:2/4", "stride syntax"),
    ("0-3,2", "CPU 2 is listed more than once"),
    ("1,1", "CPU 1 is listed more than once"),
])
def test_parse_cpuset_rejects(text, message):
    with pytest.raises(CpusetError) as err:
        parse_cpuset(text)
    assert message in str(err.value)
    assert repr(text) in str(err.value) or "'%s'" % text.strip() in str(err.value)


def test_reversed_range_error_suggests_the_fix():
    with pytest.raises(CpusetError, match="write it as 1-3"):
        parse_cpuset("3-1")


def test_duplicates_allowed_on_request_take_the_union():
    assert parse_cpuset("0-3,2,3-5", allow_duplicates=True) == [0, 1, 2, 3, 4, 5]


@pytest.mark.parametrize("value", [None, 3, ["0"]])
def test_parse_cpuset_needs_a_string(value):
    with pytest.raises(CpusetError, match="must be a string"):
        parse_cpuset(value)


@pytest.mark.parametrize("cpus, expected", [
    ([0, 1, 2, 3, 8], "0-3,8"),
    ([8, 3, 2, 1, 0], "0-3,8"),
    ([0, 2, 4], "0,2,4"),
    ([7], "7"),
    ([], ""),
    ([0, 1, 1, 2], "0-2"),
    ([0, 1, 3, 4, 10, 11, 12], "0-1,3-4,10-12"),
])
def test_format_cpuset(cpus, expected):
    assert format_cpuset(cpus) == expected


@pytest.mark.parametrize("text", ["0-3,8,10-11", "0,2,4-7", "1", "0-127"])
def test_format_parse_round_trip(text):
    assert format_cpuset(parse_cpuset(text)) == text


# --------------------------------------------------------------------------------------------
# sysfs readers


def test_readers_on_a_two_node_smt_tree(tmp_path):
    root = str(tmp_path)
    build_sysfs(root, numa_nodes=2, cores_per_node=4, smt=True)
    assert read_online_cpus(root) == list(range(16))
    assert read_numa_node_cpus(root) == {0: [0, 1, 2, 3, 8, 9, 10, 11],
                                         1: [4, 5, 6, 7, 12, 13, 14, 15]}
    siblings = read_thread_siblings(root)
    assert siblings[0] == [0, 8]
    assert siblings[13] == [5, 13]
    assert read_numa_node_memory(root) == {0: 16 * 1024 ** 3, 1: 16 * 1024 ** 3}


def test_readers_accept_the_kernel_format_of_a_file(tmp_path):
    path = tmp_path / "cpulist"
    path.write_text("0-3,8-11\n")
    assert read_cpulist(str(path)) == [0, 1, 2, 3, 8, 9, 10, 11]


def test_missing_file_names_the_path(tmp_path):
    root = str(tmp_path)
    with pytest.raises(SysfsError) as err:
        read_online_cpus(root)
    assert err.value.path == os.path.join(root, "devices", "system", "cpu", "online")
    assert "cannot read" in str(err.value)


def test_garbage_in_a_cpulist_names_the_path(tmp_path):
    build_sysfs(str(tmp_path), numa_nodes=1, cores_per_node=2, smt=False)
    online = tmp_path / "devices" / "system" / "cpu" / "online"
    online.write_text("zero\n")
    with pytest.raises(SysfsError) as err:
        read_online_cpus(str(tmp_path))
    assert str(online) in str(err.value)
    assert "unexpected content" in str(err.value)


def test_meminfo_without_memtotal_names_the_file(tmp_path):
    build_sysfs(str(tmp_path), numa_nodes=1, cores_per_node=2, smt=False)
    meminfo = tmp_path / "devices" / "system" / "node" / "node0" / "meminfo"
    meminfo.write_text("Node 0 MemFree: 5 kB\n")
    with pytest.raises(SysfsError, match="MemTotal"):
        read_numa_node_memory(str(tmp_path))


def test_kernel_without_numa_puts_every_cpu_on_node_0(tmp_path):
    build_sysfs(str(tmp_path), numa_nodes=1, cores_per_node=4, smt=True, numa_dirs=False)
    assert read_numa_node_cpus(str(tmp_path)) == {0: list(range(8))}
    assert read_numa_node_memory(str(tmp_path)) == {}


def test_memory_only_nodes_have_no_cpus(tmp_path):
    build_sysfs(str(tmp_path), numa_nodes=1, cores_per_node=2, smt=False, memory_only_nodes=2)
    assert read_numa_node_cpus(str(tmp_path)) == {0: [0, 1], 1: [], 2: []}


def test_offline_cpus_are_left_out(tmp_path):
    build_sysfs(str(tmp_path), numa_nodes=1, cores_per_node=4, smt=True, offline=[0, 5])
    topology = CpuTopology.from_sysfs(str(tmp_path))
    assert topology.online == [1, 2, 3, 4, 6, 7]
    assert topology.numa_nodes == {0: [1, 2, 3, 4, 6, 7]}
    # CPU 4 was CPU 0's sibling: alone on its core now.
    assert topology.siblings[4] == [4]


# --------------------------------------------------------------------------------------------
# auto reservation


AUTO_CASES = [
    # numa nodes, cores per node, smt, layout, expected
    (1, 4, False, "split", [0]),
    (1, 4, True, "split", [0, 4]),
    (2, 4, False, "split", [0, 4]),
    (2, 4, True, "split", [0, 4, 8, 12]),
    (2, 4, True, "adjacent", [0, 1, 8, 9]),
    (4, 4, False, "split", [0, 4, 8, 12]),
    (4, 4, True, "split", [0, 4, 8, 12, 16, 20, 24, 28]),
    (4, 2, True, "adjacent", [0, 1, 4, 5, 8, 9, 12, 13]),
]


@pytest.mark.parametrize("nodes, cores, smt, layout, expected", AUTO_CASES)
def test_auto_takes_the_first_core_of_each_numa_node(tmp_path, nodes, cores, smt, layout,
                                                     expected):
    node_cpus = build_sysfs(str(tmp_path), numa_nodes=nodes, cores_per_node=cores, smt=smt,
                            sibling_layout=layout)
    topology = CpuTopology.from_sysfs(str(tmp_path))
    reserved = auto_reserved_cpus(topology)
    assert reserved == expected

    reserved_set = set(reserved)
    for node, cpus in node_cpus.items():
        in_node = reserved_set & set(cpus)
        # exactly one whole core per node: the reserved CPUs of a node are one sibling group
        assert len(in_node) == (2 if smt else 1)
        for cpu in in_node:
            assert set(topology.siblings[cpu]) == in_node
        # and the node keeps CPUs for pods
        assert set(cpus) - reserved_set


def test_auto_skips_memory_only_and_single_core_nodes(tmp_path):
    build_sysfs(str(tmp_path), numa_nodes=2, cores_per_node=2, smt=True, memory_only_nodes=2)
    topology = CpuTopology.from_sysfs(str(tmp_path))
    # A node reduced to one core keeps it.
    topology.numa_nodes[1] = [2, 6]
    assert auto_reserved_cpus(topology) == [0, 4]


def test_auto_never_reserves_an_offline_cpu(tmp_path):
    build_sysfs(str(tmp_path), numa_nodes=2, cores_per_node=4, smt=True, offline=[0])
    topology = CpuTopology.from_sysfs(str(tmp_path))
    reserved = auto_reserved_cpus(topology)
    assert 0 not in reserved
    assert reserved == [1, 4, 9, 12]


def test_auto_on_a_one_core_machine_asks_for_an_explicit_cpuset(tmp_path):
    build_sysfs(str(tmp_path), numa_nodes=1, cores_per_node=1, smt=True)
    topology = CpuTopology.from_sysfs(str(tmp_path))
    with pytest.raises(CpusetError, match="set an explicit cpuset"):
        auto_reserved_cpus(topology)


# -- bounds: refused before any range is built ---------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ("0-999999999", "above the largest CPU id Linux has (8191)"),
    ("8192", "above the largest CPU id Linux has (8191)"),
    ("9" * 10000, "invalid CPU number"),
    (",".join(["0-8191"] * 3), "lists more than 16384 CPUs, counting repeats"),
    ("0," * 40000, "over the limit of 65536"),
])
def test_huge_cpusets_are_refused_without_building_them(text, message):
    import tracemalloc

    tracemalloc.start()
    try:
        with pytest.raises(cpuset.CpusetError, match=re.escape(message)):
            cpuset.parse_cpuset(text, allow_duplicates="," in text and "0-8191" in text)
        dummy, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # A set of 10**9 CPU ids needs tens of GB; refusing it must stay within a few MB.
    assert peak < 4 * 1024 * 1024, peak


def test_the_largest_cpu_id_is_accepted():
    assert cpuset.parse_cpuset("8190-8191") == [8190, 8191]
