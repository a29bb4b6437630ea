#!/usr/bin/env python
"""Planning cost at fleet scale, against Ansible's own inventory read.

For each size (default 2,000 and 10,000 nodes) generates an inventory of that many nodes x
8 GPUs (MIG A100/H100 groups with per-host overrides, time-sliced L4s, an MPS pool,
NUMA-aligned kubelet everywhere), then measures, in this one run and on the same files:

    baseline:  ansible-inventory -i INV --list          (read + resolve every host's vars)
    gpuprov:   gpuprov plan -i INV -o json              (the same read, then validate and plan)

and prints gpuprov / baseline for the wall time and for the peak memory (the largest
resident set of the process, from wait4). Both run in this repository's folder, so both
read its ansible.cfg, and gpuprov checks it as it does for any working folder.

Targets: time at most 1.2 and peak memory at most 1.5 at every size from 2,000 nodes; below
that the fixed start-up cost of both (Python, Ansible, and gpuprov's collection) is what is
measured, and the time target is 1.5 (--small). The exit status is 1 when one is missed.
Each command runs --repeat times (default 3), alternating, and the best of each is compared,
since these machines are noisy.

    python bench/plan_scale.py [--sizes 2000,10000] [--repeat 3] [--keep DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

GROUPS = [
    # (group, share of nodes, group vars)
    ("a100_balanced", 0.30, {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 8,
                             "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-balanced"}}}),
    ("h100_small", 0.20, {"gpuprov_gpu_model": "H100-80GB", "gpuprov_gpu_count": 8,
                          "gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-1g.10gb"},
                                              "time_slicing_replicas": 2}}),
    ("h200_mixed", 0.15, {"gpuprov_gpu_model": "H200-141GB", "gpuprov_gpu_count": 8,
                          "gpuprov_sharing": {"strategy": "mig", "mig": {"devices": [
                              {"devices": [0, 1, 2, 3], "mig-enabled": True, "mig-devices": {"3g.71gb": 2}},
                              {"devices": [4, 5, 6, 7], "mig-enabled": True,
                               "mig-devices": {"4g.71gb": 1, "2g.35gb": 1, "1g.18gb": 1}}]}}}),
    ("l4_ts", 0.20, {"gpuprov_gpu_model": "L4", "gpuprov_gpu_count": 8,
                     "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4}}),
    ("l40s_mps", 0.15, {"gpuprov_gpu_model": "L40S", "gpuprov_gpu_count": 8,
                        "gpuprov_sharing": {"strategy": "mps", "replicas": 8}}),
]
KUBELET = {"gpuprov_kubelet": {"cpu_manager_policy": "static", "topology_manager_policy": "single-numa-node",
                               "topology_manager_scope": "pod", "reserved_system_cpus": "0,64"}}


def generate(directory, nodes):
    os.makedirs(os.path.join(directory, "group_vars"))
    os.makedirs(os.path.join(directory, "host_vars"))
    children = {}
    start = 0
    for i, (group, share, variables) in enumerate(GROUPS):
        count = nodes - start if i == len(GROUPS) - 1 else int(nodes * share)
        hosts = dict(("gpu-%s-%04d" % (group.split("_")[0], start + n), None) for n in range(count))
        children[group] = {"hosts": hosts}
        start += count
        with open(os.path.join(directory, "group_vars", group + ".yml"), "w") as handle:
            yaml.safe_dump(variables, handle)
        # Every tenth A100 node overrides its layout in host_vars, as real fleets do.
        if group == "a100_balanced":
            for host in list(hosts)[::10]:
                with open(os.path.join(directory, "host_vars", host + ".yml"), "w") as handle:
                    yaml.safe_dump({"gpuprov_sharing": {"strategy": "mig", "mig": {"config": "all-3g.40gb"}}}, handle)
    with open(os.path.join(directory, "group_vars", "gpu_nodes.yml"), "w") as handle:
        yaml.safe_dump(KUBELET, handle)
    inventory = {"all": {"children": {"gpu_nodes": {"children": children}}}}
    path = os.path.join(directory, "inventory.yml")
    with open(path, "w") as handle:
        yaml.safe_dump(inventory, handle)
    return path


FLEET = 2000
TIME_TARGET = 1.2
SMALL_TIME_TARGET = 1.5
MEMORY_TARGET = 1.5


def time_target_for(nodes):
    return TIME_TARGET if nodes >= FLEET else SMALL_TIME_TARGET


def measured(argv, cwd):
    """(wall seconds, peak resident MiB) of one run of ``argv``."""
    env = dict((k, v) for k, v in os.environ.items() if k != "ANSIBLE_CONFIG")
    started = time.perf_counter()
    with open(os.devnull, "w") as sink, tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(argv, cwd=cwd, stdout=sink, stderr=errors, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            errors.seek(0)
            sys.exit("%s failed (%d): %s" % (" ".join(argv), proc.returncode, errors.read().decode()[-2000:]))
    return elapsed, usage.ru_maxrss / 1024.0


def measure(nodes, repeat, directory):
    """(best gpuprov time, best baseline time, planned summary) for one generated inventory."""
    if os.path.exists(directory):
        shutil.rmtree(directory)
    # Generated by another process: a child's peak memory (ru_maxrss) counts what it
    # inherited when it was forked, so this process must stay small.
    subprocess.run([sys.executable, os.path.abspath(__file__), "--generate", directory, str(nodes)], check=True)
    inventory = os.path.join(directory, "inventory.yml")
    bindir = os.path.dirname(sys.executable)
    baseline_cmd = [os.path.join(bindir, "ansible-inventory"), "-i", inventory, "--list"]
    # The bench measures speed, not the reading budget (30 s by default, about five times what
    # 10,000 nodes take on a quiet machine): a busy machine must not turn it into a refusal.
    gpuprov_cmd = [sys.executable, "-m", "gpuprov", "plan", "-i", inventory, "-o", "json", "--time-budget", "3600"]

    # Sanity: the plan covers every node (read by another process, to stay small here).
    check = ("import json, sys; s = json.load(sys.stdin)['summary']; "
             "print(s['nodes'], s['physical_gpus'])")
    with subprocess.Popen(gpuprov_cmd, cwd=REPO, stdout=subprocess.PIPE) as plan:
        counted = subprocess.run([sys.executable, "-c", check], stdin=plan.stdout, capture_output=True,
                                 text=True, check=True).stdout.split()
    if plan.returncode != 0:
        sys.exit("%s failed (%d)" % (" ".join(gpuprov_cmd), plan.returncode))
    planned = {"nodes": int(counted[0]), "physical_gpus": int(counted[1])}
    assert planned["nodes"] == nodes, planned

    baseline, ours = [], []
    for _ in range(repeat):
        baseline.append(measured(baseline_cmd, REPO))
        ours.append(measured(gpuprov_cmd, REPO))
    ratio = min(t for t, _ in ours) / min(t for t, _ in baseline)
    memory = min(m for _, m in ours) / min(m for _, m in baseline)
    target = time_target_for(nodes)
    print("plan_scale: %d nodes x 8 GPUs (%d GPUs), best of %d" % (nodes, planned["physical_gpus"], repeat))
    for name, runs in (("ansible-inventory --list", baseline), ("gpuprov plan -o json    ", ours)):
        print("  %s : %6.2f s %6.0f MiB   (runs: %s)" % (name, min(t for t, _ in runs), min(m for _, m in runs),
                                                        ", ".join("%.2f s %.0f MiB" % run for run in runs)))
    print("  time   gpuprov / baseline : %5.2f  (target <= %.1f): %s"
          % (ratio, target, "OK" if ratio <= target else "OVER"))
    print("  memory gpuprov / baseline : %5.2f  (target <= %.1f): %s"
          % (memory, MEMORY_TARGET, "OK" if memory <= MEMORY_TARGET else "OVER"))
    sys.stdout.flush()
    return ratio <= target and memory <= MEMORY_TARGET


def main():
    if sys.argv[1:2] == ["--generate"]:
        generate(sys.argv[2], int(sys.argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", "--nodes", dest="sizes", default="%d,10000" % FLEET,
                        help="node counts, comma-separated (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", help="write the inventories here (one folder per size) and keep them")
    args = parser.parse_args()
    try:
        sizes = [int(part) for part in args.sizes.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes):
        parser.error("--sizes %r: give node counts separated by commas, e.g. 2000,10000" % args.sizes)

    base = args.keep or tempfile.mkdtemp(prefix="gpuprov-plan-scale-")
    met = True
    for nodes in sizes:
        met = measure(nodes, args.repeat, os.path.join(base, "n%d" % nodes)) and met
    if not args.keep:
        shutil.rmtree(base)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
