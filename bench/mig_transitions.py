#!/usr/bin/env python
"""MIG reconfiguration disruption: gpuprov's mig_layout against mig-parted's way, measured.

Runs layout transitions on a fake 7-slice GPU (H100 80GB, NVML semantics from
roles/fake_gpu_node/files/python/pynvml.py) and counts the GPU instances each approach destroys and
creates, by comparing GPU instance ids in the fake's state before and after:

    gpuprov:   the mig_layout code path (plan_layout + apply_layout over module_utils/nvml):
               keeps instances whose profile and placement still fit, changes the rest
    baseline:  mig-parted's way: if the GPU's profile counts differ, destroy every
               instance and create every wanted one (len(from) + len(to) changes)
    replay:    mig-parted's SetMigConfig replayed against the same fake NVML (largest
               first, driver-chosen placements, clear and try the next ordering on
               Insufficient Resources); its count includes those retries
    mig-parted: NVIDIA's own mig-parted (its config manager, at the version tests/peers
               pins) applying the same transitions on NVIDIA's go-nvml mock of the GPU
               (tests/peers mig-parted-apply --from; the mock starts from mig-parted's own
               apply of the first layout), where the mock shows the profiles under their
               driver names; instances destroyed and created as the mock counts them

Both start every transition from the same instances at the same placements (two identical
GPUs). ``min`` is the proven minimum of destroyed instances for the transition, found
exhaustively over the catalog's placements (proven_minimum_destroyed); the run fails when
gpuprov destroys more on any transition, and prints on how many it is at the minimum. Every destroyed instance is a workload stopped; fewer is better. Exits 1 if gpuprov
is worse than the baseline on any transition, not strictly better on one where it keeps an
instance, or if either ends in a layout other than the one asked for; and, beside mig-parted,
if gpuprov destroys more than mig-parted or the two end in different layouts. Without the
Go peers built (scripts/setup.sh) the mig-parted columns are skipped, unless
GPUPROV_REQUIRE_PEERS=1.

    python bench/mig_transitions.py [--gpu H100-80GB] [--keep DIR]
"""
import argparse
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "collections"))
# The fake NVML of the test-kit role gpuprov.gpu.fake_gpu_node.
FAKES = os.path.join(REPO, "collections", "ansible_collections", "gpuprov", "gpu", "roles", "fake_gpu_node", "files")
sys.path.insert(0, os.path.join(FAKES, "python"))

import pynvml  # noqa: E402  (the fake)

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_manager import (  # noqa: E402
    apply_layout,
    plan_layout,
)
from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import place  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import Nvml  # noqa: E402
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog  # noqa: E402

# The one list of where NVIDIA's mocks differ from the hardware (and which mock is which GPU).
sys.path.insert(0, os.path.join(REPO, "tests"))
import mig_mock_differences  # noqa: E402

# Layouts by kind of profile; names are filled in per GPU model.
LAYOUTS = {
    "all-1g": {"1g": 7},
    "balanced": {"1g": 2, "2g": 1, "3g": 1},
    "4g+3g": {"4g": 1, "3g": 1},
    "4g+2g+1g": {"4g": 1, "2g": 1, "1g": 1},
    "3g+3g": {"3g": 2},
    "7g": {"7g": 1},
    "3x2g+1g": {"2g": 3, "1g": 1},
    "2g+5x1g": {"2g": 1, "1g": 5},
    "4x1g-2mem": {"1g2m": 4},
    "4g+3x1g": {"4g": 1, "1g": 3},
    "3g+4x1g": {"3g": 1, "1g": 4},
    "3g+2x2g": {"3g": 1, "2g": 2},
}

TRANSITIONS = [
    ("all-1g", "balanced"), ("4g+3g", "4g+2g+1g"), ("balanced", "all-1g"), ("7g", "all-1g"),
    ("all-1g", "7g"), ("3g+3g", "balanced"), ("balanced", "3g+3g"), ("balanced", "4g+2g+1g"),
    ("4g+2g+1g", "balanced"), ("4g+3g", "3g+3g"), ("3g+3g", "4g+3g"), ("all-1g", "2g+5x1g"),
    ("2g+5x1g", "all-1g"), ("3x2g+1g", "balanced"), ("balanced", "3x2g+1g"), ("4x1g-2mem", "all-1g"),
    ("all-1g", "4x1g-2mem"), ("4g+3x1g", "4g+2g+1g"), ("4g+2g+1g", "4g+3x1g"), ("3g+4x1g", "balanced"),
    ("balanced", "3g+4x1g"), ("3g+2x2g", "balanced"), ("balanced", "3g+2x2g"), ("4g+3g", "7g"),
    ("7g", "4g+3g"), ("3g+3g", "3g+4x1g"), ("3g+4x1g", "3g+3g"), ("4g+3x1g", "all-1g"),
    ("all-1g", "4g+3x1g"), ("3x2g+1g", "2g+5x1g"), ("2g+5x1g", "3x2g+1g"), ("4g+2g+1g", "4g+3g"),
    ("3g+2x2g", "3x2g+1g"), ("4x1g-2mem", "balanced"), ("balanced", "balanced"), ("7g", "3g+3g"),
]


def profile_names(model):
    """{kind: profile name} for a 7-slice model, from the catalog."""
    by_shape = {}
    for prof in model.mig.profiles.values():
        if prof.media_extensions:
            continue
        kind = "%dg" % prof.compute_slices
        if prof.compute_slices == 1 and prof.memory_slices == 2:
            kind = "1g2m"
        by_shape[kind] = prof.name
    return by_shape


def counts_for(layout, names):
    return dict((names[kind], count) for kind, count in LAYOUTS[layout].items())


def instances_of(gpu):
    return dict((gi["id"], (gi["profile_id"], gi["placement"]["start"])) for gi in gpu["gpu_instances"])


def profile_counts(state, gpu):
    names = dict((p["id"], p["name"][4:]) for p in state["models"][gpu["model"]]["mig"]["profiles"])
    counts = {}
    for gi in gpu["gpu_instances"]:
        counts[names[gi["profile_id"]]] = counts.get(names[gi["profile_id"]], 0) + 1
    return counts


def run_gpuprov(index, counts):
    with Nvml() as nvml:
        info = nvml.gpu_info(index)
        plan = plan_layout(nvml, index, info, nvml.mig_mode(index), counts)
        if plan.changed:
            apply_layout(nvml, plan)


def run_mig_parted(index, counts, current_counts):
    """mig-parted's SetMigConfig against NVML: clear everything, create in order, retry orderings."""
    if current_counts == counts:
        return  # mig-parted skips a GPU whose config already matches
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        infos = {}
        for enum in range(10):
            try:
                info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum)
            except pynvml.NVMLError_NotSupported:
                continue
            infos[info.name[4:]] = (enum, info)  # nvidia-ml-py decodes char arrays to str
        flat = []
        for name, count in counts.items():
            flat.extend([name] * count)
        flat.sort(key=lambda n: -infos[n][1].sliceCount)
        seen = set()
        for order in itertools.permutations(flat):
            if order in seen:
                continue
            seen.add(order)
            _clear(handle)
            try:
                for name in order:
                    gi = pynvml.nvmlDeviceCreateGpuInstance(handle, infos[name][1].id)
                    ci_enum = {1: 0, 2: 1, 3: 2, 4: 3, 7: 4}[infos[name][1].sliceCount]
                    ci = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, ci_enum, 0)
                    pynvml.nvmlGpuInstanceCreateComputeInstance(gi, ci.id)
                return
            except pynvml.NVMLError_InsufficientResources:
                continue
        _clear(handle)
        raise RuntimeError("mig-parted baseline: all orderings failed for %s" % counts)
    finally:
        pynvml.nvmlShutdown()


def _clear(handle):
    import ctypes

    for enum in range(10):
        try:
            info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, enum)
        except pynvml.NVMLError_NotSupported:
            continue
        buf = (pynvml.c_nvmlGpuInstance_t * info.instanceCount)()
        count = ctypes.c_uint(info.instanceCount)
        pynvml.nvmlDeviceGetGpuInstances(handle, info.id, buf, ctypes.byref(count))
        for i in range(count.value):
            gi = buf[i]
            for ci_enum in range(5):
                try:
                    ci_info = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, ci_enum, 0)
                except pynvml.NVMLError_NotSupported:
                    continue
                cbuf = (pynvml.c_nvmlComputeInstance_t * ci_info.instanceCount)()
                ccount = ctypes.c_uint(ci_info.instanceCount)
                pynvml.nvmlGpuInstanceGetComputeInstances(gi, ci_info.id, cbuf, ctypes.byref(ccount))
                for j in range(ccount.value):
                    pynvml.nvmlComputeInstanceDestroy(cbuf[j])
            pynvml.nvmlGpuInstanceDestroy(gi)


def proven_minimum_destroyed(start, wanted, profiles, compute_total):
    """The least number of ``start`` instances any valid sequence of placements must destroy
    to reach the profile counts ``wanted``, found exhaustively over the catalog's placements.

    An instance is never moved, only kept or destroyed, so a sequence keeps a set K of the
    starting instances and ends in a layout holding K plus new instances at free placements.
    The minimum is len(start) - the largest K whose completion exists; every subset of start
    is tried, and for each the new instances are placed by full backtracking (no heuristics
    shared with mig_solver, so the two can be compared).
    """
    best = 0
    for size in range(len(start), -1, -1):
        if size <= best:
            break
        for kept in itertools.combinations(start, size):
            need = dict(wanted)
            ok = True
            for inst in kept:
                need[inst.profile] = need.get(inst.profile, 0) - 1
                if need[inst.profile] < 0:
                    ok = False
            if ok and _completes(kept, need, profiles, compute_total):
                best = size
                break
    return len(start) - best


def first_free_placements(counts, profiles):
    """Where the driver puts instances created without a placement: the first free placement
    of each (the fake's rule; the real driver's choice is UNVERIFIED), in the first ordering,
    largest first, in which all fit."""
    from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import Instance

    flat = sorted((n for n, c in counts.items() for _ in range(c)), key=lambda n: -profiles[n].compute_slices)
    for order in itertools.permutations(flat):  # mig-parted tries orderings until one fits
        used, result = 0, []
        for name in order:
            for start, size in profiles[name].placements:
                bits = ((1 << size) - 1) << start
                if not used & bits:
                    used |= bits
                    result.append(Instance(name, start, size))
                    break
            else:
                break
        if len(result) == len(flat):
            return result
    raise RuntimeError("%s does not fit first-free in any order" % counts)


def _completes(kept, need, profiles, compute_total):
    used = 0
    compute = 0
    for inst in kept:
        size = dict(profiles[inst.profile].placements)[inst.start]
        used |= ((1 << size) - 1) << inst.start
        compute += profiles[inst.profile].compute_slices
    todo = sorted((name for name, count in need.items() for _ in range(count)),
                  key=lambda n: -profiles[n].compute_slices)
    if compute + sum(profiles[n].compute_slices for n in todo) > compute_total:
        return False

    def place_from(i, mask, last_start):
        if i == len(todo):
            return True
        name = todo[i]
        floor = last_start if i and todo[i - 1] == name else -1  # identical instances: one order only
        for start, size in profiles[name].placements:
            bits = ((1 << size) - 1) << start
            if start > floor and not mask & bits and place_from(i + 1, mask | bits, start):
                return True
        return False

    return place_from(0, used, -1)


def peers_binary():
    """The built Go peers binary of tests/peers, or None."""
    spec = importlib.util.spec_from_file_location("gpuprov_peers_build", os.path.join(REPO, "tests", "peers", "build.py"))
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    path = os.path.join(build.build_dir(), "peers")
    return path if os.access(path, os.X_OK) else None


def run_nvidia_mig_parted(model, names, work):
    """mig-parted's own apply of every transition on NVIDIA's mock of ``model``.

    Returns ([per transition: {destroyed, created, refused, counts} or {error}], None), or
    (None, why not)."""
    mock, pci_id = mig_mock_differences.MOCKS.get(model.key, (None, None))
    if mock is None:
        return None, "go-nvml has no mock of %s" % model.key
    kinds = set(kind for layout in LAYOUTS.values() for kind in layout)
    misnamed = sorted(names[k] for k in kinds
                      if mig_mock_differences.differs(model.key, "name", model.profile(names[k]).gi_enum))
    if misnamed:
        return None, "the %s mock names %s otherwise (tests/mig_mock_differences.py)" % (mock, ", ".join(misnamed))
    binary = peers_binary()
    if binary is None:
        return None, "the Go peers are not built (scripts/setup.sh or python tests/peers/build.py)"
    path = os.path.join(work, "mig-parted.yaml")
    with open(path, "w") as handle:
        json.dump({"version": "v1", "mig-configs": dict(
            (layout, [{"devices": "all", "mig-enabled": True, "mig-devices": counts_for(layout, names)}])
            for layout in LAYOUTS)}, handle)
    results = []
    for source, target in TRANSITIONS:
        argv = [binary, "mig-parted-apply", path, target, "--from", source, "--mock", mock]
        if pci_id:
            argv += ["--pci-id", pci_id]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        data = json.loads(proc.stdout)
        if "error" in data:
            results.append({"error": data["error"]})
            continue
        gpu = data["gpus"][0]  # every GPU of the mock gets the same config
        results.append({"destroyed": gpu["counts"]["gpu_instances_destroyed"],
                        "created": gpu["counts"]["gpu_instances_created"],
                        "refused": gpu["counts"]["gpu_instances_refused"],
                        "counts": dict((k, v) for k, v in (gpu["mig_config"] or {}).items() if v),
                        "placements_as_driver": not any(mig_mock_differences.differs(model.key, "placements", p)
                                                        for p in range(10))})
    return results, None


def peer_version():
    versions = json.loads(subprocess.run([peers_binary(), "versions"], capture_output=True, text=True,
                                         timeout=60).stdout)
    return "mig-parted " + versions["github.com/NVIDIA/mig-parted"]


class Counter:
    """Counts the GPU instances destroyed and created on one GPU while ``func`` runs,
    including instances that came and went in between (the baseline's failed orderings)."""

    def __init__(self, index):
        self.index = index
        self.destroyed = self.created = 0

    def measure(self, func, *args):
        # Wrap the fake's two operations that change the instance set (a create that NVML
        # refuses never reaches the count).
        original_create = pynvml._create_gi
        original_destroy = pynvml.nvmlGpuInstanceDestroy
        counter = self

        def create(state, gpu, prof, start, size):
            gi = original_create(state, gpu, prof, start, size)
            if gpu["index"] == counter.index:
                counter.created += 1
            return gi

        def destroy(gpu_instance):
            result = original_destroy(gpu_instance)
            if pynvml._handle_target(gpu_instance)[1] == counter.index:  # ("gi", gpu index, gi id)
                counter.destroyed += 1
            return result

        pynvml._create_gi = create
        pynvml.nvmlGpuInstanceDestroy = destroy
        try:
            func(*args)
        finally:
            pynvml._create_gi = original_create
            pynvml.nvmlGpuInstanceDestroy = original_destroy
        return self


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", default="H100-80GB", help="a 7-slice catalog model (default H100-80GB)")
    parser.add_argument("--keep", help="keep the fake NVML state in this directory")
    args = parser.parse_args(argv)

    model = catalog.get(args.gpu)
    if not model.mig or model.mig.compute_slices != 7:
        parser.error("%s is not a 7-slice MIG GPU" % args.gpu)
    names = profile_names(model)
    work = args.keep or tempfile.mkdtemp(prefix="gpuprov-mig-bench-")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "nvml-state.json")
    os.environ[pynvml.STATE_ENV] = path
    solver_profiles = model.solver_profiles()

    rows, problems, minima, endings = [], [], [], []
    for number, (source, target) in enumerate(TRANSITIONS, 1):
        # Two identical GPUs holding the source layout at the solver's placements.
        state = pynvml.new_state(gpus=[(args.gpu, 2)])
        start = place(counts_for(source, names), solver_profiles, 7)
        for index in (0, 1):
            pynvml.set_mig_mode(state, index, True)
            pynvml.create_instances(state, index, [(i.profile, i.start) for i in start])
        pynvml.save_state(state, path)
        before = [instances_of(g) for g in state["gpus"]]
        wanted = counts_for(target, names)

        ours = Counter(0).measure(run_gpuprov, 0, wanted)
        theirs = Counter(1).measure(run_mig_parted, 1, wanted, profile_counts(state, state["gpus"][1]))

        after = pynvml.load_state(path)
        for index, label in ((0, "gpuprov"), (1, "baseline")):
            got = profile_counts(after, after["gpus"][index])
            if got != wanted:
                problems.append("#%d %s -> %s: %s ended with %s" % (number, source, target, label, got))
            if index == 0:
                endings.append(got)
        # Each starting instance was either destroyed (counted exactly) or kept.
        kept = len(before[0]) - ours.destroyed
        ours_total = ours.destroyed + ours.created
        replay_total = theirs.destroyed + theirs.created
        if profile_counts(state, state["gpus"][1]) == wanted:
            base_destroyed = base_created = 0
        else:
            base_destroyed, base_created = len(before[1]), sum(wanted.values())
        theirs_total = base_destroyed + base_created
        if replay_total < theirs_total:
            problems.append("#%d %s -> %s: the replay made %d changes, fewer than destroy-all/create-all (%d)"
                            % (number, source, target, replay_total, theirs_total))
        if ours_total > theirs_total:
            problems.append("#%d %s -> %s: gpuprov made %d changes, the baseline %d"
                            % (number, source, target, ours_total, theirs_total))
        if kept and ours_total >= theirs_total and theirs_total:
            problems.append("#%d %s -> %s: kept %d instance(s) yet not fewer changes than the baseline"
                            % (number, source, target, kept))
        minimum = proven_minimum_destroyed(start, wanted, solver_profiles, 7)
        minima.append(minimum)
        if ours.destroyed > minimum:
            problems.append("#%d %s -> %s: gpuprov destroyed %d instance(s), the proven minimum is %d"
                            % (number, source, target, ours.destroyed, minimum))
        rows.append((number, source, target, kept, ours.destroyed, minimum, ours.created, ours_total,
                     base_destroyed, base_created, theirs_total, replay_total))

    # The same transitions from the placements the driver picks when asked without one (first
    # free slot, largest instance first, as mig-parted creates them): gpuprov must reach the
    # proven minimum from layouts it did not place itself too.
    driver_at_minimum = 0
    for number, (source, target) in enumerate(TRANSITIONS, 1):
        state = pynvml.new_state(gpus=[(args.gpu, 1)])
        pynvml.set_mig_mode(state, 0, True)
        start = first_free_placements(counts_for(source, names), solver_profiles)
        pynvml.create_instances(state, 0, [(i.profile, i.start) for i in start])
        pynvml.save_state(state, path)
        wanted = counts_for(target, names)
        ours = Counter(0).measure(run_gpuprov, 0, wanted)
        minimum = proven_minimum_destroyed(start, wanted, solver_profiles, 7)
        if ours.destroyed > minimum:
            problems.append("#%d %s -> %s from driver placements: gpuprov destroyed %d, the proven minimum is %d"
                            % (number, source, target, ours.destroyed, minimum))
        else:
            driver_at_minimum += 1

    # NVIDIA's mig-parted on NVIDIA's mock, the same transitions.
    nvidia, why_not = run_nvidia_mig_parted(model, names, work)
    if nvidia is None and os.environ.get("GPUPROV_REQUIRE_PEERS") == "1" and "not built" in why_not:
        problems.append("mig-parted side by side: " + why_not)
    side = {"destroyed": 0, "created": 0, "refused": 0, "same": 0, "compared": 0}
    for number, ((source, target), row) in enumerate(zip(TRANSITIONS, rows), 1):
        if nvidia is None:
            rows[number - 1] = row + ("-", "-")
            continue
        result, wanted = nvidia[number - 1], counts_for(target, names)
        if "error" in result:
            problems.append("#%d %s -> %s: mig-parted failed on the mock: %s" % (number, source, target, result["error"]))
            rows[number - 1] = row + ("error", "error")
            continue
        rows[number - 1] = row + (result["destroyed"], result["created"])
        side["compared"] += 1
        for key in ("destroyed", "created", "refused"):
            side[key] += result[key]
        if result["counts"] != wanted:
            problems.append("#%d %s -> %s: mig-parted ended with %s" % (number, source, target, result["counts"]))
        elif result["counts"] == endings[number - 1]:
            side["same"] += 1
        if row[4] > result["destroyed"]:
            problems.append("#%d %s -> %s: gpuprov destroyed %d instance(s), mig-parted %d"
                            % (number, source, target, row[4], result["destroyed"]))

    header = ("#", "from", "to", "kept", "destroyed", "min", "created", "total",
              "base destroyed", "base created", "base total", "replay total", "mig-parted destroyed",
              "mig-parted created")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    line = "  ".join("%%%ds" % w if i not in (1, 2) else "%%-%ds" % w for i, w in enumerate(widths))
    print("MIG layout transitions on %s (%d); gpuprov vs destroy-everything (mig-parted)" % (args.gpu, len(rows)))
    print(line % header)
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(line % row)
    total = lambda i: sum(r[i] for r in rows)  # noqa: E731
    print("  ".join("-" * w for w in widths))
    print(line % ("", "total", "", total(3), total(4), total(5), total(6), total(7), total(8), total(9), total(10),
                  total(11), side["destroyed"] if nvidia else "-", side["created"] if nvidia else "-"))
    destroyed_ratio = float(total(4)) / total(8) if total(8) else 0.0
    changes_ratio = float(total(7)) / total(10) if total(10) else 0.0
    print()
    print("instances destroyed (workloads stopped): gpuprov %d, baseline %d, ratio %.2f"
          % (total(4), total(8), destroyed_ratio))
    print("instances destroyed + created:           gpuprov %d, baseline %d, ratio %.2f"
          % (total(7), total(10), changes_ratio))
    print("mig-parted replay:                       %d changes, ratio gpuprov/replay %.2f"
          % (total(11), float(total(7)) / total(11) if total(11) else 0.0))
    at_minimum = sum(1 for row, minimum in zip(rows, minima) if row[4] <= minimum)
    print("gpuprov at the proven minimum on %d/%d transitions" % (at_minimum + driver_at_minimum, 2 * len(rows)))
    print("  (%d/%d from gpuprov's own placements, %d/%d from the driver's first-free placements)"
          % (at_minimum, len(rows), driver_at_minimum, len(rows)))
    print("(the replay's placements are the fake driver's first free slot; the real driver's choice is UNVERIFIED)")
    if nvidia is None:
        print("beside mig-parted: skipped, %s" % why_not)
    else:
        mock = mig_mock_differences.MOCKS[model.key][0]
        print("beside mig-parted (NVIDIA's own apply, %s, on go-nvml's %s mock): destroyed mig-parted %d / gpuprov %d, "
              "created mig-parted %d / gpuprov %d; both end in the layout asked for, the same on %d/%d transitions"
              % (peer_version(), mock, side["destroyed"], total(4), side["created"], total(6), side["same"],
                 len(rows)))
        print("  (same layout: the profiles on each GPU; %s; mig-parted's creates the mock refused and it retried: %d)"
              % ("placements may differ, gpuprov keeps instances where they are" if nvidia[0]["placements_as_driver"]
                 else "the mock's placement sizes count compute slices, not the driver's memory slices", side["refused"]))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    if problems:
        print()
        for problem in problems:
            print("FAIL: " + problem)
        return 1
    print("OK: gpuprov is never worse, and strictly better wherever it keeps an instance")
    return 0


if __name__ == "__main__":
    sys.exit(main())
