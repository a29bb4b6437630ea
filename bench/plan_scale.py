#!/usr/bin/env python
"""Planning cost at fleet scale, against Ansible's own inventory read.

For each size (default 2,000 and 10,000 nodes) generates an inventory of that many nodes x
8 GPUs (MIG A100/H100 groups with per-host overrides, time-sliced L4s, an MPS pool,
NUMA-aligned kubelet everywhere), then times, in this one run and on the same files:

    baseline:  ansible-inventory -i INV --list          (read + resolve every host's vars)
    gpuprov:   gpuprov plan -i INV -o json              (the same read, then validate and plan)

and prints gpuprov / baseline. Targets: at most 1.5 below 10,000 nodes, at most 1.2 at
10,000 nodes and more (where the fixed start-up cost of both no longer hides the per-node
cost); the exit status is 1 when one is missed. Each command runs --repeat times (default 3),
alternating, and the best time of each is compared, since these machines are noisy.

    python bench/plan_scale.py [--sizes 2000,10000] [--repeat 3] [--keep DIR]
"""
import argparse
import json
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


LARGE_FLEET = 10000
TARGET = 1.5
LARGE_FLEET_TARGET = 1.2


def target_for(nodes):
    return LARGE_FLEET_TARGET if nodes >= LARGE_FLEET else TARGET


def timed(argv, cwd):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"))
    started = time.perf_counter()
    with open(os.devnull, "w") as sink:
        proc = subprocess.run(argv, cwd=cwd, stdout=sink, stderr=subprocess.PIPE, env=env, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit("%s failed (%d): %s" % (" ".join(argv), proc.returncode, proc.stderr.decode()[-2000:]))
    return elapsed


def measure(nodes, repeat, directory):
    """(best gpuprov time, best baseline time, planned summary) for one generated inventory."""
    if os.path.exists(directory):
        shutil.rmtree(directory)
    inventory = generate(directory, nodes)
    bindir = os.path.dirname(sys.executable)
    baseline_cmd = [os.path.join(bindir, "ansible-inventory"), "-i", inventory, "--list"]
    gpuprov_cmd = [sys.executable, "-m", "gpuprov", "plan", "-i", inventory, "-o", "json"]

    # Sanity: the plan covers every node.
    out = subprocess.run(gpuprov_cmd, cwd=REPO, capture_output=True, check=True).stdout
    planned = json.loads(out)["summary"]
    assert planned["nodes"] == nodes, planned

    baseline, ours = [], []
    for _ in range(repeat):
        baseline.append(timed(baseline_cmd, REPO))
        ours.append(timed(gpuprov_cmd, REPO))
    ratio = min(ours) / min(baseline)
    target = target_for(nodes)
    print("plan_scale: %d nodes x 8 GPUs (%d GPUs), best of %d" % (nodes, planned["physical_gpus"], repeat))
    print("  ansible-inventory --list : %6.2f s   (runs: %s)" % (min(baseline), ", ".join("%.2f" % t for t in baseline)))
    print("  gpuprov plan -o json     : %6.2f s   (runs: %s)" % (min(ours), ", ".join("%.2f" % t for t in ours)))
    print("  ratio gpuprov / baseline : %6.2f    (target <= %.1f): %s" % (ratio, target, "OK" if ratio <= target else "OVER"))
    sys.stdout.flush()
    return ratio <= target


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", "--nodes", dest="sizes", default="2000,%d" % LARGE_FLEET,
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
