#!/usr/bin/env python
"""Converge, idempotent re-run and `gpuprov status` on SSH test fleets, against a ping.

For each fleet size N (default 4, 16 and 24; 64 by hand) this brings up N simulated GPU nodes
of tests/fleet (the fleet's default GPU mixes: A100, H100, T4, L40S, A100-40GB, later nodes
with a second model), writes an inventory that says how each node shares its GPUs (MIG
all-balanced where a model has MIG, else time-slicing x4; NUMA-aligned kubelet on all), and
times, on the same nodes with the same --forks:

    converge:  gpuprov.gpu.site, as `gpuprov apply --waves 100%` runs it (fresh nodes: MIG,
               kubelet, ...; the default cap of 5 nodes per wave applies)
    re-run:    gpuprov.gpu.site again (every node already as planned: nothing may change)
    status:    `gpuprov status` (plans, then reads every node with gpuprov.gpu.status; every
               node must be in sync)
    baseline:  a one-task playbook running ansible.builtin.ping on every node

The playbooks run through ansible-playbook from the tree's root (its ansible.cfg: pipelining
on), the site playbook with gpuprov's progress callback exactly as `gpuprov apply` runs it;
`gpuprov status` runs as the CLI, in its own process. The re-run, the status and the ping run
--repeat times each, alternating, and the best time of each counts, since these machines are
shared and noisy.

Every run also loads bench/callback_plugins/bench_timing.py (enabled by this bench only),
which records per phase where the time goes: process start to the playbook's start (imports,
the CLI's own planning for `gpuprov status`), parsing, each task's wall time and its hosts'
worker time (fork, templating, the SSH round trip and the module on the node), and the end.
Printed per size: the timings and ratios, the controller's CPU per node in each kind of run
(the ansible-playbook process with its workers and ssh clients, from getrusage of the children
this bench waited for; the simulated nodes' own work runs on the same cores but is not in it),
tasks per node (results that were ok, from the
progress callback's summary; the ping's from its play recap), the tasks a fresh node's
converge runs, and per-phase tables of the converge, the best re-run, status and ping.

--baseline-ref REF checks REF out into a temporary worktree (git worktree add --detach) and
runs the same sizes there too, each size on fresh nodes of its own, side by side with this
tree; converge time per node is then compared with REF's. Separate fleets run one after the
other, so a shared machine's load can move one tree's times against the other's; with
--interleave N (and --baseline-ref) each size then also runs N rounds on this tree's fleet,
already converged: a ping, then the re-run and `gpuprov status` of each tree, the trees'
order flipped every round. Both trees then meet the same nodes under the same load; REF's
re-run must find every node as planned (else the two trees converge differently and cannot
share a fleet). Printed: least and median wall time and controller CPU per tree, and the
ratios to the rounds' least and median ping.

Targets. Always checked (deterministic): every run completes, the re-run changes nothing and
every node is in sync, and a node already as planned costs at most 1 task in the re-run and
in status. Timed targets, checked only at sizes of 4 nodes and more (the sizes the issue
names; a 2-node check on a shared machine would fail by noise alone), else printed:
    re-run <= 1.2 x ping, status <= 1.5 x ping
    per-node re-run time flat: re-run/N at 24 (and 64) nodes <= 1.5 x that at 4 (forks >= N)
    with --baseline-ref and 24 nodes: converge per node <= 0.5 x REF's
`scripts/test.sh` runs `--sizes 2 --forks 4 --repeat 2 --baseline-ref HEAD --interleave 1`: it
enforces only the deterministic targets and prints the timed ones against their targets. The
exit status is 1 when a checked target is missed.

Needs root and openssh-server (the fleet's nodes are sshd processes in private mount
namespaces, on 127.0.0.N from --first-host up; without --keep every size reuses the same
addresses, so 64 nodes fit).

    python bench/fleet.py [--sizes 4,16,24] [--forks 24] [--repeat 2] [--baseline-ref main]
                          [--interleave 5] [--profile] [--keep]

--keep leaves the fleets running (their directories are printed); --profile runs one more,
untimed re-run per size with Ansible's profile_tasks callback and keeps its output.
"""
import argparse
import copy
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "fleet"))
sys.path.insert(0, os.path.join(REPO, "collections"))
sys.path.insert(0, REPO)

import fleet as fleetlib  # noqa: E402  (tests/fleet is not a package)
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog  # noqa: E402
from gpuprov.runner import ansible_command, run_playbook  # noqa: E402

RERUN_OVER_PING_TARGET = 1.2
STATUS_OVER_PING_TARGET = 1.5
IN_SYNC_TASKS_TARGET = 1
PER_NODE_GROWTH_TARGET = 1.5
CONVERGE_OVER_BASELINE_TARGET = 0.5
TIMED_FROM_SIZE = 4
CONVERGE_SIZE = 24
RECAP_OK = re.compile(r"^(\S+)\s+:\s+ok=(\d+)", re.M)
TIMING_PLUGINS = os.path.join(REPO, "bench", "callback_plugins")
# Tasks that wait for something a real node needs (allocatable, a drain, a GPU reset).
WAIT_ACTIONS = ("ansible.builtin.wait_for", "wait_for", "ansible.builtin.pause", "pause")
WAIT_NAME = re.compile(r"\bwait", re.I)
# The NUMA alignment of examples/group_vars/gpu_nodes.yml.
KUBELET = {
    "cpu_manager_policy": "static",
    "cpu_manager_policy_options": {"full-pcpus-only": True},
    "topology_manager_policy": "single-numa-node",
    "topology_manager_scope": "pod",
    "reserved_system_cpus": "auto",
}

PING_PLAYBOOK = [{
    "name": "Ping every node",
    "hosts": "all",
    "gather_facts": False,
    "tasks": [{"name": "Ping", "ansible.builtin.ping": None}],
}]


def sharing_for(spec):
    """MIG all-balanced on a node with a MIG-capable model, else time-slicing x4."""
    if any(catalog.lookup(group.model).mig_capable for group in spec.gpus):
        return {"strategy": "mig", "mig": {"config": "all-balanced"}}
    return {"strategy": "time-slicing", "replicas": 4}


def write_inventory(path, specs):
    """The GPUs and sharing of every node; combined with the fleet's connection.yml."""
    hosts = {}
    for spec in specs:
        hosts[spec.name] = {"gpuprov_gpus": [group.to_dict() for group in spec.gpus],
                            "gpuprov_sharing": sharing_for(spec)}
    with open(path, "w") as handle:
        yaml.safe_dump({"all": {"children": {"gpu_nodes": {"vars": {"gpuprov_kubelet": KUBELET},
                                                           "hosts": hosts}}}}, handle, sort_keys=False)


def timing_env(base, path):
    """``base`` plus what loads bench_timing and where it writes; BENCH_T0 is set by the caller."""
    env = dict(base)
    enabled = [name for name in env.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if name]
    env["ANSIBLE_CALLBACKS_ENABLED"] = ",".join(enabled + ["bench_timing"])
    plugins = [TIMING_PLUGINS] + [p for p in env.get("ANSIBLE_CALLBACK_PLUGINS", "").split(":") if p]
    env["ANSIBLE_CALLBACK_PLUGINS"] = ":".join(plugins)
    env["BENCH_TIMING_FILE"] = path
    return env


def read_timing(path, started, ended):
    """bench_timing's JSON plus the process's exit after the stats (exit_s), or None."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    data["exit_s"] = max(0.0, ended - data["stats_at"])
    data["total_s"] = ended - started
    return data


class Tree:
    """A checkout whose collection and CLI run: this repository, or --baseline-ref's worktree."""

    def __init__(self, root, label):
        self.root = root
        self.label = label

    def env(self):
        env = dict(os.environ)
        # The tree's own CLI and collection, not an installed copy (gpuprov installs non-editable).
        env["PYTHONPATH"] = os.pathsep.join([os.path.join(self.root, "collections"), self.root]
                                            + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        return env


class SizeRun:
    """One fleet of N nodes, one tree, and its timings."""

    def __init__(self, size, directory, first_host, forks, log, tree):
        self.size = size
        self.directory = directory
        self.forks = forks
        self.log = log
        self.tree = tree
        self.specs = fleetlib.default_node_specs(size)
        self.fleet = fleetlib.Fleet.create(os.path.join(directory, "fleet"), self.specs, first_host=first_host)
        self.inventory = os.path.join(directory, "gpus.yml")
        self.ping_playbook = os.path.join(directory, "ping.yml")
        self.inventories = [self.inventory, str(self.fleet.connection_inventory)]
        self.converge_s = None
        self.rerun_s = []
        self.status_s = []
        self.ping_s = []
        self.profiles = {}  # kind -> [(seconds, bench_timing data)]
        # kind -> [controller CPU seconds of each run]: the ansible-playbook process and every
        # process it waited for (its workers, the ssh clients), not the nodes' sshd sessions.
        self.controller_cpu = {}
        self.tasks_per_node = None
        self.fresh_tasks_per_node = None
        self.status_tasks_per_node = None
        self.ping_tasks_per_node = None
        self._timings = 0

    def up(self):
        os.makedirs(self.directory, exist_ok=True)
        write_inventory(self.inventory, self.specs)
        with open(self.ping_playbook, "w") as handle:
            yaml.safe_dump(PING_PLAYBOOK, handle, sort_keys=False)
        self.fleet.up()

    def _timed_env(self, base=None):
        self._timings += 1
        path = os.path.join(self.directory, "timing-%d.json" % self._timings)
        env = timing_env(self.tree.env() if base is None else base, path)
        env["BENCH_T0"] = repr(time.time())
        return env, path

    def _keep(self, kind, elapsed, path, started, ended, cpu=None):
        if cpu is not None:
            self.controller_cpu.setdefault(kind, []).append(cpu)
        data = read_timing(path, started, ended)
        if data is not None:
            self.profiles.setdefault(kind, []).append((elapsed, data))

    def profile(self, kind):
        """bench_timing's data of the best (fastest) run of ``kind``, or None."""
        runs = self.profiles.get(kind)
        return min(runs, key=lambda item: item[0])[1] if runs else None

    def site(self, what, kind, profile=False):
        """The site playbook as `gpuprov apply --waves 100%` runs it; (seconds, summary)."""
        env = self.tree.env()
        if profile:
            env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
        env, timing = self._timed_env(env)
        variables = {"gpuprov_waves": ["100%"], "gpuprov_max_fail_percentage": 0,
                     "gpuprov_hosts": ",".join(spec.name for spec in self.specs)}
        self.log.write("\n==== %s, %d nodes: %s\n" % (self.tree.label, self.size, what))
        self.log.flush()
        here = os.getcwd()
        os.chdir(self.tree.root)  # the tree's ansible.cfg: its collection, pipelining
        try:
            cpu = children_cpu()
            start = time.time()
            rc, summary = run_playbook("gpuprov.gpu.site", self.inventories, extra_vars=variables,
                                       forks=self.forks, env=env, stdout=self.log)
            ended = time.time()
            cpu = children_cpu() - cpu
        finally:
            os.chdir(here)
        elapsed = ended - start
        if not profile:
            self._keep(kind, elapsed, timing, start, ended, cpu)
        nodes = (summary or {}).get("nodes", {})
        bad = dict((host, node) for host, node in nodes.items() if node["status"] in ("failed", "unreachable"))
        if rc != 0 or bad or len(nodes) != self.size:
            raise RuntimeError("%s: %s on %d nodes failed (ansible-playbook exit %d, %d of %d nodes reported%s); "
                               "see %s" % (self.tree.label, what, self.size, rc, len(nodes), self.size,
                                           "".join("; %s %s: %s" % (h, n["status"], n["failed"])
                                                   for h, n in sorted(bad.items())), self.log.name))
        return elapsed, nodes

    def ping(self):
        argv = [ansible_command("ansible-playbook"), "--forks", str(self.forks)]
        for inventory in self.inventories:
            argv += ["-i", inventory]
        argv.append(self.ping_playbook)
        self.log.write("\n==== %s, %d nodes: ping\n" % (self.tree.label, self.size))
        self.log.flush()
        env, timing = self._timed_env()
        env["ANSIBLE_STDOUT_CALLBACK"] = "default"
        cpu = children_cpu()
        start = time.time()
        proc = subprocess.run(argv, cwd=self.tree.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, check=False)
        ended = time.time()
        elapsed = ended - start
        self._keep("ping", elapsed, timing, start, ended, children_cpu() - cpu)
        self.log.write(proc.stdout)
        if proc.returncode != 0:
            raise RuntimeError("ping playbook on %d nodes exited %d; see %s" % (self.size, proc.returncode, self.log.name))
        ok = dict((host, int(count)) for host, count in RECAP_OK.findall(proc.stdout))
        if len(ok) != self.size:
            raise RuntimeError("the ping's play recap names %d of %d nodes; see %s" % (len(ok), self.size, self.log.name))
        self.ping_tasks_per_node = sum(ok.values()) / float(len(ok))
        return elapsed

    def status(self):
        """`gpuprov status` as a user runs it; every node must be in sync."""
        argv = [sys.executable, "-m", "gpuprov", "status", "--forks", str(self.forks)]
        for inventory in self.inventories:
            argv += ["-i", inventory]
        self.log.write("\n==== %s, %d nodes: gpuprov status\n" % (self.tree.label, self.size))
        self.log.flush()
        env, timing = self._timed_env()
        cpu = children_cpu()
        start = time.time()
        proc = subprocess.run(argv, cwd=self.tree.root, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                              check=False)
        ended = time.time()
        elapsed = ended - start
        self._keep("status", elapsed, timing, start, ended, children_cpu() - cpu)
        if proc.returncode != 0:
            raise RuntimeError("%s: gpuprov status on %d nodes exited %d (a node not in sync?); see %s"
                               % (self.tree.label, self.size, proc.returncode, self.log.name))
        return elapsed

    def status_tasks(self):
        """Tasks per node of `gpuprov status`'s playbook run, from its best timed run's profile."""
        data = self.profile("status")
        if data is None:
            return None
        return tasks_run(data) / float(self.size)

    def on_tree(self, tree, label):
        """This fleet, already converged, run with ``tree``'s collection and CLI; timings of its own."""
        other = copy.copy(self)
        other.tree = tree
        other.directory = os.path.join(self.directory, label)
        os.makedirs(other.directory, exist_ok=True)
        other.rerun_s, other.status_s, other.ping_s = [], [], []
        other.profiles, other.controller_cpu = {}, {}
        other._timings = 0
        return other

    def rerun_once(self, what, profile=False, converged_by=None):
        elapsed, nodes = self.site(what, "re-run", profile=profile)
        changed = sorted(host for host, node in nodes.items() if node["status"] != "unchanged")
        if changed and converged_by is not None and converged_by is not self.tree:
            raise RuntimeError("%s: its re-run changed %s on the nodes %s converged: the two trees do not "
                               "converge alike and cannot share a fleet (leave out --interleave); see %s"
                               % (self.tree.label, ", ".join(changed), converged_by.label, self.log.name))
        if changed:
            raise RuntimeError("%s: the re-run on %d nodes changed %s: the site playbook is not idempotent; "
                               "see %s" % (self.tree.label, self.size, ", ".join(changed), self.log.name))
        self.tasks_per_node = sum(node["ok"] for node in nodes.values()) / float(len(nodes))
        return elapsed

    def measure(self, repeat, profile):
        self.converge_s, nodes = self.site("converge", "converge")
        self.fresh_tasks_per_node = sum(node["ok"] for node in nodes.values()) / float(len(nodes))
        for i in range(repeat):
            self.rerun_s.append(self.rerun_once("re-run %d" % (i + 1)))
            self.status_s.append(self.status())
            self.ping_s.append(self.ping())
        self.status_tasks_per_node = self.status_tasks()
        if profile:
            # Not timed: profile_tasks adds its own cost.
            self.rerun_once("re-run with profile_tasks", profile=True)

    @property
    def rerun(self):
        return min(self.rerun_s)

    @property
    def ping_time(self):
        return min(self.ping_s)

    @property
    def status_time(self):
        return min(self.status_s)

    @property
    def per_node(self):
        return self.rerun / self.size

    def cpu_per_node(self, kind):
        """The least controller CPU seconds per node of the runs of KIND (CPU time varies less
        than wall time on a shared machine), or None."""
        runs = self.controller_cpu.get(kind)
        return min(runs) / self.size if runs else None


def children_cpu():
    """User + system CPU seconds of this process's children that ended and were waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def tasks_run(data, hosts_only=True):
    """Host results (ok, changed, failed; not skipped) over every task of a bench_timing run."""
    return sum(sum(count for status, count in task["status"].items() if status != "skipped")
               for play in data["plays"] for task in play["tasks"]
               if not (hosts_only and task["action"] in ("meta", "ansible.builtin.meta")))


def phase_table(title, data, size, top=8):
    """Per-phase lines of one run: where its wall time went."""
    lines = ["%s (%.1f s wall):" % (title, data["total_s"])]
    lines.append("  %-52s %8s %8s %8s %6s" % ("phase / task", "wall s", "worker s", "max wkr", "hosts"))
    lines.append("  %-52s %8.2f" % ("process start -> playbook start (imports, CLI)", data["start_s"]))
    lines.append("  %-52s %8.2f" % ("playbook start -> first play (parse, inventory)", data["parse_s"]))
    tasks = []
    for play in data["plays"]:
        for task in play["tasks"]:
            tasks.append(task)
    # A waiting task counts whole; a module that also does other work counts its reported watch.
    # A task's workers run side by side: the mean of its hosts' worker times, less the wait in
    # it, is the part of its wall time they account for (their sum over the fleet's size would
    # count a wave of 5 of 24 nodes at a fifth, and leave the rest to the controller).
    waits = 0.0
    module = 0.0
    for task in tasks:
        workers = list(task["hosts"].values())
        mean = sum(workers) / float(len(workers)) if workers else 0.0
        if task["action"] in WAIT_ACTIONS or WAIT_NAME.search(task["name"]):
            waits += task.get("wall_s", 0.0)
        else:
            waited = min(task.get("waited_s", 0.0), task.get("wall_s", 0.0))
            waits += waited
            module += max(0.0, mean - waited)
    total_tasks = sum(task.get("wall_s", 0.0) for task in tasks)
    by_wall = sorted(tasks, key=lambda task: -task.get("wall_s", 0.0))
    shown = by_wall if len(tasks) <= top + 2 else by_wall[:top]
    for task in sorted(shown, key=tasks.index):
        workers = list(task["hosts"].values())
        lines.append("  %-52s %8.2f %8s %8s %6d" % (
            ("task: " + task["name"])[:52], task.get("wall_s", 0.0),
            "%.2f" % (sum(workers) / len(workers)) if workers else "-",
            "%.2f" % max(workers) if workers else "-", len(workers)))
    if len(shown) < len(tasks):
        rest = [task for task in tasks if task not in shown]
        lines.append("  %-52s %8.2f" % ("%d other tasks" % len(rest), sum(task.get("wall_s", 0.0) for task in rest)))
    lines.append("  %-52s %8.2f" % ("last result -> stats (play end, summary)", data["end_s"]))
    lines.append("  %-52s %8.2f" % ("stats -> process exit", data["exit_s"]))
    lines.append("  tasks %.2f s in %d task(s) (%d host results per node), of it waits %.2f s; worker time %.2f s "
                 "(each task's mean over its hosts, its wait left out: forks, SSH, the module on the node); the rest, %.2f s, is "
                 "the controller between workers"
                 % (total_tasks, len(tasks), tasks_run(data) // max(size, 1), waits, module,
                    max(0.0, total_tasks - module - waits)))
    return lines


def parse_sizes(text):
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes):
        raise SystemExit("--sizes %r: give node counts separated by commas, e.g. 1,4,16" % text)
    return sizes


def check(label, ok, text, enforced=True):
    verdict = ("met" if ok else "MISSED") if enforced else ("within target" if ok else "over target") + ", not enforced"
    print("target: %s: %s -> %s" % (label, text, verdict))
    return ok or not enforced


def table(runs, forks):
    print("nodes  tree        converge s  conv/node  re-run s  status s  ping s  re-run/ping  status/ping  "
          "tasks/node fresh,re-run,status,ping  per-node s")
    for run in runs:
        print("%5d  %-10s  %10.1f  %9.2f  %8.1f  %8.1f  %6.1f  %11.2f  %11.2f  %35s  %10.2f" % (
            run.size, run.tree.label[:10], run.converge_s, run.converge_s / run.size, run.rerun, run.status_time,
            run.ping_time, run.rerun / run.ping_time, run.status_time / run.ping_time,
            "%.1f, %.1f, %.1f, %.1f" % (run.fresh_tasks_per_node, run.tasks_per_node,
                                        run.status_tasks_per_node or 0.0, run.ping_tasks_per_node),
            run.per_node))


def cpu_table(runs):
    """Controller CPU per node: what the in-sync path costs on the controller, apart from the
    nodes' own work (which the simulated nodes do on the same cores as the controller)."""
    print("controller CPU per node (ansible-playbook, its workers and ssh clients; best run):")
    print("nodes  tree        re-run s  status s  ping s  re-run/ping  status/ping")
    for run in runs:
        rerun, status, ping = (run.cpu_per_node(kind) for kind in ("re-run", "status", "ping"))
        if None in (rerun, status, ping):
            continue
        print("%5d  %-10s  %8.3f  %8.3f  %6.3f  %11.2f  %11.2f" % (run.size, run.tree.label[:10], rerun, status, ping,
                                                                 rerun / ping, status / ping))


def interleave(run, baseline, rounds):
    """``rounds`` rounds on ``run``'s converged fleet: a ping, then each tree's re-run and
    `gpuprov status`, the trees' order flipped every round. [this tree's, REF's]; the rounds'
    pings are kept with this tree's."""
    mine, theirs = run.on_tree(run.tree, "interleave-this"), run.on_tree(baseline, "interleave-base")
    for i in range(rounds):
        order = (mine, theirs) if i % 2 == 0 else (theirs, mine)
        mine.ping_s.append(mine.ping())
        for side in order:
            side.rerun_s.append(side.rerun_once("interleaved re-run %d" % (i + 1), converged_by=run.tree))
        for side in order:
            side.status_s.append(side.status())
    return [mine, theirs]


def interleave_table(pairs):
    print("interleaved on one fleet per size (this tree's, converged): least / median of each")
    print("nodes  tree        re-run s     status s     ping s       re-run/ping  status/ping  "
          "CPU/node re-run, status, ping")
    for sides in pairs:
        pings = sides[0]
        for side in sides:
            least = (min(side.rerun_s), min(side.status_s), min(pings.ping_s))
            middle = (statistics.median(side.rerun_s), statistics.median(side.status_s),
                      statistics.median(pings.ping_s))
            cpu = ["%.3f" % (statistics.median(side.controller_cpu[kind]) / side.size)
                   for kind in ("re-run", "status")] + [
                "%.3f" % (statistics.median(pings.controller_cpu["ping"]) / side.size)]
            print("%5d  %-10s  %4.1f / %4.1f  %4.1f / %4.1f  %4.1f / %4.1f  %4.2f / %4.2f  %4.2f / %4.2f  "
                  "%s (median)" % (
                side.size, side.tree.label[:10], least[0], middle[0], least[1], middle[1], least[2], middle[2],
                least[0] / least[2], middle[0] / middle[2], least[1] / least[2], middle[1] / middle[2],
                ", ".join(cpu)))


def report(runs, baseline_runs, forks, phases, interleaved=()):
    print()
    print("gpuprov on SSH test fleets (forks %d; best of %d re-runs / status runs / pings)"
          % (forks, len(runs[0].rerun_s) if runs else 0))
    ordered = sorted(runs + baseline_runs, key=lambda run: (run.size, run.tree.label != "this tree"))
    table(ordered, forks)
    print()
    cpu_table(ordered)
    if interleaved:
        print()
        interleave_table(interleaved)
    if phases:
        for run in sorted(baseline_runs + runs, key=lambda run: (run.size, run.tree.label != "this tree")):
            for kind, title in (("converge", "converge (fresh nodes)"), ("re-run", "best re-run"),
                                ("status", "best gpuprov status"), ("ping", "best ping")):
                data = run.profile(kind)
                if data is not None:
                    print()
                    print("\n".join(phase_table("%s, %d nodes, %s" % (run.tree.label, run.size, title),
                                                data, run.size)))
    print()
    met = True
    for run in runs:
        timed = run.size >= TIMED_FROM_SIZE
        note = "" if timed else " (timed targets are enforced from %d nodes)" % TIMED_FROM_SIZE
        met &= check("%d nodes: idempotent re-run <= %.1fx the ping playbook" % (run.size, RERUN_OVER_PING_TARGET),
                     run.rerun / run.ping_time <= RERUN_OVER_PING_TARGET,
                     "%.2fx%s" % (run.rerun / run.ping_time, note), enforced=timed)
        met &= check("%d nodes: gpuprov status <= %.1fx the ping playbook" % (run.size, STATUS_OVER_PING_TARGET),
                     run.status_time / run.ping_time <= STATUS_OVER_PING_TARGET,
                     "%.2fx%s" % (run.status_time / run.ping_time, note), enforced=timed)
        met &= check("%d nodes: a node already as planned costs <= %d task in the re-run and in status"
                     % (run.size, IN_SYNC_TASKS_TARGET),
                     run.tasks_per_node <= IN_SYNC_TASKS_TARGET
                     and (run.status_tasks_per_node or 0) <= IN_SYNC_TASKS_TARGET,
                     "%.1f and %.1f" % (run.tasks_per_node, run.status_tasks_per_node or 0))
    by_size = dict((run.size, run) for run in runs)
    small = min(by_size) if by_size else None
    for large in sorted(by_size):
        if small is None or large <= small or small < TIMED_FROM_SIZE:
            continue
        growth = by_size[large].per_node / by_size[small].per_node
        met &= check("per-node re-run time at %d nodes <= %.1fx that at %d nodes (forks >= %d)"
                     % (large, PER_NODE_GROWTH_TARGET, small, large),
                     growth <= PER_NODE_GROWTH_TARGET and forks >= large,
                     "%.2fs vs %.2fs = %.2fx%s" % (by_size[large].per_node, by_size[small].per_node, growth,
                                                   "" if forks >= large else " (forks < %d)" % large))
        conv = (by_size[large].converge_s / large) / (by_size[small].converge_s / small)
        print("converge per node at %d nodes: %.2fs, %.2fx that at %d nodes" % (large, by_size[large].converge_s / large,
                                                                              conv, small))
    base = dict((run.size, run) for run in baseline_runs)
    for size in sorted(set(base) & set(by_size)):
        ratio = by_size[size].converge_s / base[size].converge_s
        enforced = size == CONVERGE_SIZE
        met &= check("%d nodes: converge per node <= %.1fx %s's" % (size, CONVERGE_OVER_BASELINE_TARGET,
                                                                    base[size].tree.label),
                     ratio <= CONVERGE_OVER_BASELINE_TARGET,
                     "%.2fs vs %.2fs = %.2fx%s" % (by_size[size].converge_s / size, base[size].converge_s / size, ratio,
                                                   "" if enforced else " (enforced at %d nodes)" % CONVERGE_SIZE),
                     enforced=enforced)
    return met


def baseline_tree(ref, base):
    """REF checked out, detached, in a temporary worktree of this repository."""
    path = os.path.join(base, "baseline")
    proc = subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", path, ref], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit("--baseline-ref %s: git worktree add failed: %s" % (ref, proc.stdout.strip()))
    return Tree(path, ref)


def remove_tree(tree):
    subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", tree.root], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=False)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     epilog="Timed targets are enforced from %d nodes only; scripts/test.sh's 2-node "
                                            "run checks the deterministic ones (completes, idempotent, <= %d task "
                                            "per in-sync node) and prints the ratios." % (TIMED_FROM_SIZE,
                                                                                          IN_SYNC_TASKS_TARGET))
    parser.add_argument("--sizes", default="4,16,24", help="fleet sizes, comma-separated (default %(default)s; "
                                                            "64 runs too, by hand)")
    parser.add_argument("--forks", type=int, default=None,
                        help="ansible-playbook --forks for every run (default: 24, or the largest size if more)")
    parser.add_argument("--repeat", type=int, default=2, help="re-runs and pings per size; the best counts (default 2)")
    parser.add_argument("--first-host", type=int, default=160,
                        help="last octet of the first node's 127.0.0.N (default %(default)s)")
    parser.add_argument("--baseline-ref", metavar="REF",
                        help="also run the same sizes on REF (a git ref, checked out in a temporary worktree)")
    parser.add_argument("--interleave", type=int, default=0, metavar="N",
                        help="with --baseline-ref: also N rounds per size on this tree's converged fleet, the "
                             "trees' re-runs and status runs alternating (see above)")
    parser.add_argument("--no-phases", action="store_true", help="leave out the per-phase tables")
    parser.add_argument("--profile", action="store_true",
                        help="one more, untimed re-run per size with profile_tasks (see the log)")
    parser.add_argument("--keep", action="store_true", help="leave the fleets running and their files in place")
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    forks = args.forks or max([24] + sizes)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.interleave < 0 or (args.interleave and not args.baseline_ref):
        parser.error("--interleave needs --baseline-ref and a number of rounds >= 1")
    try:
        fleetlib.check_prerequisites()
    except fleetlib.FleetError as exc:
        print("bench/fleet.py: %s" % exc, file=sys.stderr)
        return 2
    trees_per_size = 2 if args.baseline_ref else 1
    needed = sum(sizes) * trees_per_size if args.keep else max(sizes)
    if args.first_host + needed - 1 > fleetlib.LAST_HOST_OCTET:
        parser.error("%d nodes from 127.0.0.%d do not fit below .%d; lower --first-host or --sizes"
                     % (needed, args.first_host, fleetlib.LAST_HOST_OCTET))

    os.chdir(REPO)
    # Short, space-free paths: they go into sshd_config and ssh's ControlPath.
    base = tempfile.mkdtemp(prefix="gpuprov-bench-fleet-", dir="/tmp")
    log = open(os.path.join(base, "ansible.log"), "w")
    print("fleet bench in %s (Ansible output: %s)" % (base, log.name))
    trees = []
    baseline = None
    if args.baseline_ref:
        baseline = baseline_tree(args.baseline_ref, base)
        trees.append(baseline)
    trees.append(Tree(REPO, "this tree"))
    runs, baseline_runs, interleaved = [], [], []
    first_host = args.first_host
    failed = None
    try:
        for size in sizes:
            for tree in trees:
                name = "n%d-%s" % (size, "base" if tree is baseline else "this")
                run = SizeRun(size, os.path.join(base, name), first_host, forks, log, tree)
                if args.keep:
                    first_host += size  # every fleet its own addresses, so --keep can keep them all
                print("%d node(s), %s: bringing the fleet up ..." % (size, tree.label), flush=True)
                run.up()
                try:
                    print("%d node(s), %s: converge, then %d x (re-run, status, ping) ..."
                          % (size, tree.label, args.repeat), flush=True)
                    run.measure(args.repeat, args.profile)
                    (baseline_runs if tree is baseline else runs).append(run)
                    print("%d node(s), %s: converge %.1fs, re-run %.1fs, status %.1fs, ping %.1fs"
                          % (size, tree.label, run.converge_s, run.rerun, run.status_time, run.ping_time), flush=True)
                    if args.interleave and tree is not baseline:
                        print("%d node(s): %d interleaved round(s) of %s and %s on this tree's fleet ..."
                              % (size, args.interleave, tree.label, baseline.label), flush=True)
                        interleaved.append(interleave(run, baseline, args.interleave))
                finally:
                    if not args.keep:
                        run.fleet.down(clean=True)
    except (RuntimeError, fleetlib.FleetError) as exc:
        failed = str(exc)
    finally:
        log.close()
        if baseline is not None:
            remove_tree(baseline)

    met = report(runs, baseline_runs, forks, not args.no_phases, interleaved) if runs else False
    if failed:
        print("\nFAIL: %s" % failed)
        return 1
    if args.keep:
        print("\nfleets kept in %s; stop them with `python tests/fleet/fleet.py down --dir DIR --clean`" % base)
    elif not args.profile:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print("\nprofile_tasks output: %s" % os.path.join(base, "ansible.log"))
    if not met:
        print("\nFAIL: a target was missed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
