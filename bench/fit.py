#!/usr/bin/env python
"""`gpuprov fit` quality and speed, against baselines measured in the same run.

Small inputs (200 random instances of 1 to 12 workload copies, fixed seed, several pools):
  * the share where `fit` (method auto, which is the exact search at this size) equals the
    exact optimum: 100% by construction; tests/test_fit.py checks the exact search against
    brute force;
  * the share where the heuristic alone (the method used above 12 copies) finds the
    optimum: the meaningful number, since it is what large inputs get;
  * the share where the lower bound already equals the optimum.

Large inputs (1,000 workloads per pool): GPUs used / lower bound (target <= 1.05) and wall
time (target < 2 s, best of --repeat runs), printed beside two baselines run on the same
input: first-fit in input order (no sorting, one pass, same feasibility checks) and one
workload per GPU.

    python bench/fit.py [--seed 1] [--instances 200] [--workloads 1000] [--repeat 3]
"""
import argparse
import os
import random
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "collections"))

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog  # noqa: E402
from gpuprov import fit  # noqa: E402

# Memory footprints of common inference services, GiB.
SIZES = (1, 2, 3, 4, 5, 6, 8, 10, 12, 14, 16, 20, 24, 30, 40, 48, 60, 70)

SMALL_POOLS = [
    ("A100-40GB", [("A100-SXM4-40GB", None)]),
    ("A100-80GB", [("A100-80GB", None)]),
    ("H100-80GB", [("H100-80GB", None)]),
    ("A30", [("A30", None)]),
    ("L40S (no MIG)", [("L40S", None)]),
    ("3 A100-80GB + L4", [("A100-80GB", 3), ("L4", None)]),
]
LARGE_POOLS = [
    ("A100-80GB", [("A100-80GB", None)], 0.4),
    ("H100-80GB", [("H100-80GB", None)], 0.4),
    ("A30", [("A30", None)], 0.4),
    ("L40S soft only", [("L40S", None)], 0.0),
    ("A100-80GB x500 + L4", [("A100-80GB", 500), ("L4", None)], 0.3),
]


def make_pool(spec):
    return [fit.PoolEntry(catalog.get(name), count) for name, count in spec]


def make_workloads(rng, pool, copies, hard_share):
    """Random workloads totalling ``copies`` copies, each one some GPU of the pool can take."""
    mig = [e.model for e in pool if e.model.mig_capable]
    biggest_mig = max((p.memory_gib for m in mig for p in m.mig.profiles.values()), default=0)
    biggest = max(e.model.memory_mib for e in pool) / 1024.0
    workloads, total = [], 0
    while total < copies:
        hard = bool(mig) and rng.random() < hard_share
        memory = rng.choice([s for s in SIZES if s < (biggest_mig if hard else biggest)])
        roll = rng.random()
        compute = None
        if roll < 0.15:
            compute = ("fraction", rng.choice((0.25, 0.5)))
        elif roll < 0.30:
            compute = ("slices", rng.choice((2, 3)))
        replicas = min(copies - total, rng.choice((1, 1, 1, 1, 2, 3)))
        workloads.append(fit.Workload("w%d" % len(workloads), memory * 1024.0, compute, hard, replicas))
        total += replicas
    return workloads


def first_fit_unsorted(workloads, pool):
    """Baseline: each copy in input order into the first GPU that takes it, else a new one."""
    views = [fit.View(k, entry) for k, entry in enumerate(pool)]
    items = fit.expand(workloads)
    fit.prepare(items, views)
    remaining = [v.count for v in views]
    gpus = []  # [view, mode, items, mask key]
    for item in items:
        placed = False
        for gpu in gpus:
            view, mode, members, key = gpu
            if mode == "mig":
                mask = item.masks[view.index]
                new_key = tuple(sorted(key + (mask,)))
                if mask and view.geometry.fits(new_key) is not None:
                    members.append(item)
                    gpu[3] = new_key
                    placed = True
            elif fit.shared_ok(members + [item], view, "time-slicing"):
                members.append(item)
                placed = True
            if placed:
                break
        if placed:
            continue
        options = [(fit.item_footprint(item, v), v) for v in views if remaining[v.index] != 0]
        options = [(f, v) for f, v in options if f is not None]
        if not options:
            return None
        (frac, mode), view = min(options, key=lambda o: (o[0][0], o[1].index))
        if remaining[view.index] is not None:
            remaining[view.index] -= 1
        gpus.append([view, mode, [item], (item.masks[view.index],) if mode == "mig" else None])
    return len(gpus)


def best_time(function, repeat):
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - started)
    return result, min(times)


def small(seed, count):
    rng = random.Random(seed)
    rows, totals = [], {"n": 0, "auto": 0, "heuristic": 0, "bound": 0, "exact_s": 0.0, "heuristic_s": 0.0}
    for name, spec in SMALL_POOLS:
        rows.append([name, 0, 0, 0, 0, 0])
    for k in range(count):
        index = k % len(SMALL_POOLS)
        pool = make_pool(SMALL_POOLS[index][1])
        workloads = make_workloads(rng, pool, rng.randint(1, 12), 0.5)
        try:
            started = time.perf_counter()
            exact = fit.fit(workloads, pool, method="exact")
            middle = time.perf_counter()
            heuristic = fit.fit(workloads, pool, method="heuristic")
            ended = time.perf_counter()
            auto = fit.fit(workloads, pool, method="auto")
        except fit.NoFit:
            rows[index][5] += 1  # the counted pool is too small: proven, not scored
            continue
        optimum = len(exact.gpus)
        row = rows[index]
        row[1] += 1
        row[2] += len(auto.gpus) == optimum
        row[3] += len(heuristic.gpus) == optimum
        row[4] += exact.lower_bound == optimum
        totals["n"] += 1
        totals["auto"] += len(auto.gpus) == optimum
        totals["heuristic"] += len(heuristic.gpus) == optimum
        totals["bound"] += exact.lower_bound == optimum
        totals["exact_s"] += middle - started
        totals["heuristic_s"] += ended - middle
    return rows, totals


def pct(part, whole):
    return "%5.1f%%" % (100.0 * part / whole) if whole else "   -  "


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--instances", type=int, default=200)
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    ok = True

    rows, totals = small(args.seed, args.instances)
    print("fit, small inputs: %d random instances of 1-12 workload copies (seed %d)" % (args.instances, args.seed))
    print("  %-18s %5s  %12s  %14s  %12s  %s" % ("pool", "n", "auto=optimum", "heuristic=opt", "bound=opt",
                                                  "pool too small (proven)"))
    for name, n, auto, heuristic, bound, refused in rows:
        print("  %-18s %5d  %12s  %14s  %12s  %d" % (name, n, pct(auto, n), pct(heuristic, n), pct(bound, n), refused))
    print("  %-18s %5d  %12s  %14s  %12s" % ("all", totals["n"], pct(totals["auto"], totals["n"]),
                                              pct(totals["heuristic"], totals["n"]), pct(totals["bound"], totals["n"])))
    print("  auto = the exact search at this size (target 100%%): %s; heuristic alone: %s; "
          "time: exact %.2f s, heuristic %.2f s in all"
          % (pct(totals["auto"], totals["n"]).strip(), pct(totals["heuristic"], totals["n"]).strip(),
             totals["exact_s"], totals["heuristic_s"]))
    ok = ok and totals["auto"] == totals["n"]

    print("")
    print("fit, %d workloads per pool (best of %d runs); baselines on the same input:" % (args.workloads, args.repeat))
    print("  %-20s %5s  %6s %6s %6s  %7s %6s  %8s  %6s %7s  %6s" % (
        "pool", "LB", "fit", "fit/LB", "time", "FF-uns", "FF/LB", "FF time", "t/FF", "naive", "target"))
    rng = random.Random(args.seed * 7919)
    for name, spec, hard_share in LARGE_POOLS:
        pool = make_pool(spec)
        workloads = make_workloads(rng, pool, args.workloads, hard_share)
        result, seconds = best_time(lambda: fit.fit(workloads, pool, method="auto"), args.repeat)
        baseline, baseline_seconds = best_time(lambda: first_fit_unsorted(workloads, pool), args.repeat)
        naive = sum(w.replicas for w in workloads)
        used, lower = len(result.gpus), result.lower_bound
        ratio = used / float(lower)
        good = ratio <= 1.05 and seconds < 2.0
        ok = ok and good
        print("  %-20s %5d  %6d %6.3f %5.2fs  %7s %6s  %7.2fs  %6.1f %7d  %6s" % (
            name, lower, used, ratio, seconds, baseline if baseline else "fail",
            "%.3f" % (baseline / float(lower)) if baseline else "-", baseline_seconds,
            seconds / baseline_seconds, naive, "OK" if good else "MISSED"))
    print("  targets: fit/LB <= 1.05 and time < 2 s. FF-uns: first-fit in input order; t/FF: fit time over "
          "its time; naive: one workload per GPU")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
