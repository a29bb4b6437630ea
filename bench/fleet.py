#!/usr/bin/env python
"""Converge, idempotent re-run and `gpuprov status` on SSH test fleets, against a ping.

For each fleet size N (default 4, 16 and 24) this brings up N simulated GPU nodes of
tests/fleet (the fleet's default GPU mixes: A100, H100, T4, L40S, A100-40GB, later nodes with
a second model), writes an inventory that says how each node shares its GPUs (MIG
all-balanced where a model has MIG, else time-slicing x4; NUMA-aligned kubelet on all), and
times, on the same nodes with the same --forks:

    converge:  gpuprov.gpu.site, every node in one wave (fresh nodes: MIG, kubelet, ...)
    re-run:    gpuprov.gpu.site again (every node already as planned: nothing may change)
    status:    `gpuprov status` (plans, then reads every node with gpuprov.gpu.status; every
               node must be in sync)
    baseline:  a one-task playbook running ansible.builtin.ping on every node

The playbooks run through ansible-playbook from the repository root (its ansible.cfg:
pipelining on), the site playbook with gpuprov's progress callback exactly as `gpuprov apply`
runs it; `gpuprov status` runs as the CLI, in its own process. The re-run, the status and
the ping run --repeat times each, alternating, and the best time of each counts, since these
machines are shared and noisy. Printed per size: converge time (and per node), re-run,
status and ping time, re-run / ping, status / ping, tasks per node of each (results that
were ok: from the progress callback's summary for the site and status playbooks - the
status one from one more, untimed run of gpuprov.gpu.status as `gpuprov status` runs it -
and from the play recap for the ping), and per-node time (re-run / N).

Targets (the exit status is 1 when one is missed):
    re-run <= 4 x ping, at every size
    status <= 3 x ping, at every size
    a node already as planned costs at most 5 tasks in the re-run
    per-node time flat from 4 to 24 nodes: re-run/24 <= 1.5 x re-run/4 (forks >= 24)

Needs root and openssh-server (the fleet's nodes are sshd processes in private mount
namespaces, on 127.0.0.N from --first-host up).

    python bench/fleet.py [--sizes 4,16,24] [--forks 24] [--repeat 2] [--profile] [--keep]

--keep leaves the fleets running (their directories are printed); --profile runs one more,
untimed re-run per size with Ansible's profile_tasks callback and keeps its output (the
slowest tasks of each size), to see where the time goes.
"""
import argparse
import os
import re
import shutil
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

RERUN_OVER_PING_TARGET = 4.0
STATUS_OVER_PING_TARGET = 3.0
RERUN_TASKS_PER_NODE_TARGET = 5
PER_NODE_GROWTH_TARGET = 1.5
PER_NODE_SIZES = (4, 24)
RECAP_OK = re.compile(r"^(\S+)\s+:\s+ok=(\d+)", re.M)

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


class SizeRun:
    """One fleet of N nodes and its timings."""

    def __init__(self, size, directory, first_host, forks, log):
        self.size = size
        self.directory = directory
        self.forks = forks
        self.log = log
        self.specs = fleetlib.default_node_specs(size)
        self.fleet = fleetlib.Fleet.create(os.path.join(directory, "fleet"), self.specs, first_host=first_host)
        self.inventory = os.path.join(directory, "gpus.yml")
        self.ping_playbook = os.path.join(directory, "ping.yml")
        self.inventories = [self.inventory, str(self.fleet.connection_inventory)]
        self.converge_s = None
        self.rerun_s = []
        self.status_s = []
        self.ping_s = []
        self.tasks_per_node = None
        self.status_tasks_per_node = None
        self.ping_tasks_per_node = None

    def up(self):
        os.makedirs(self.directory, exist_ok=True)
        write_inventory(self.inventory, self.specs)
        with open(self.ping_playbook, "w") as handle:
            yaml.safe_dump(PING_PLAYBOOK, handle, sort_keys=False)
        self.fleet.up()

    def site(self, what, profile=False):
        """The site playbook as `gpuprov apply --waves 100%` runs it; (seconds, summary)."""
        env = dict(os.environ)
        if profile:
            env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.posix.profile_tasks"
        variables = {"gpuprov_waves": ["100%"], "gpuprov_max_fail_percentage": 0,
                     "gpuprov_hosts": ",".join(spec.name for spec in self.specs)}
        self.log.write("\n==== %d nodes: %s\n" % (self.size, what))
        self.log.flush()
        start = time.monotonic()
        rc, summary = run_playbook("gpuprov.gpu.site", self.inventories, extra_vars=variables,
                                   forks=self.forks, env=env, stdout=self.log)
        elapsed = time.monotonic() - start
        nodes = (summary or {}).get("nodes", {})
        bad = dict((host, node) for host, node in nodes.items() if node["status"] in ("failed", "unreachable"))
        if rc != 0 or bad or len(nodes) != self.size:
            raise RuntimeError("%s on %d nodes failed (ansible-playbook exit %d, %d of %d nodes reported%s); "
                               "see %s" % (what, self.size, rc, len(nodes), self.size,
                                           "".join("; %s %s: %s" % (h, n["status"], n["failed"])
                                                   for h, n in sorted(bad.items())), self.log.name))
        return elapsed, nodes

    def ping(self):
        argv = [ansible_command("ansible-playbook"), "--forks", str(self.forks)]
        for inventory in self.inventories:
            argv += ["-i", inventory]
        argv.append(self.ping_playbook)
        self.log.write("\n==== %d nodes: ping\n" % self.size)
        self.log.flush()
        env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="default")
        start = time.monotonic()
        proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, check=False)
        elapsed = time.monotonic() - start
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
        self.log.write("\n==== %d nodes: gpuprov status\n" % self.size)
        self.log.flush()
        start = time.monotonic()
        proc = subprocess.run(argv, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT, check=False)
        elapsed = time.monotonic() - start
        if proc.returncode != 0:
            raise RuntimeError("gpuprov status on %d nodes exited %d (a node not in sync?); see %s"
                               % (self.size, proc.returncode, self.log.name))
        return elapsed

    def count_status_tasks(self):
        """Tasks per node of gpuprov.gpu.status, run as `gpuprov status` runs it (not timed)."""
        directory = tempfile.mkdtemp(prefix="status-", dir=self.directory)
        variables = {"gpuprov_status_dir": directory, "gpuprov_status_fail_on_drift": False}
        self.log.write("\n==== %d nodes: gpuprov.gpu.status (task count)\n" % self.size)
        self.log.flush()
        rc, summary = run_playbook("gpuprov.gpu.status", self.inventories, check=True, extra_vars=variables,
                                   forks=self.forks, stdout=self.log)
        nodes = (summary or {}).get("nodes", {})
        if rc != 0 or len(nodes) != self.size:
            raise RuntimeError("gpuprov.gpu.status on %d nodes failed (exit %d, %d nodes reported); see %s"
                               % (self.size, rc, len(nodes), self.log.name))
        self.status_tasks_per_node = sum(node["ok"] for node in nodes.values()) / float(len(nodes))

    def rerun_once(self, what, profile=False):
        elapsed, nodes = self.site(what, profile=profile)
        changed = sorted(host for host, node in nodes.items() if node["status"] != "unchanged")
        if changed:
            raise RuntimeError("the re-run on %d nodes changed %s: the site playbook is not idempotent; "
                               "see %s" % (self.size, ", ".join(changed), self.log.name))
        self.tasks_per_node = sum(node["ok"] for node in nodes.values()) / float(len(nodes))
        return elapsed

    def measure(self, repeat, profile):
        self.converge_s, _nodes = self.site("converge")
        for i in range(repeat):
            self.rerun_s.append(self.rerun_once("re-run %d" % (i + 1)))
            self.status_s.append(self.status())
            self.ping_s.append(self.ping())
        self.count_status_tasks()
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


def parse_sizes(text):
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 for size in sizes):
        raise SystemExit("--sizes %r: give node counts separated by commas, e.g. 1,4,16" % text)
    return sizes


def check(label, ok, text):
    print("target: %s: %s -> %s" % (label, text, "met" if ok else "MISSED"))
    return ok


def report(runs, forks):
    print()
    print("gpuprov on SSH test fleets (forks %d; best of %d re-runs / status runs / pings)"
          % (forks, len(runs[0].rerun_s) if runs else 0))
    header = ("nodes", "converge s", "conv/node", "re-run s", "status s", "ping s", "re-run/ping", "status/ping",
              "tasks/node re-run,status,ping", "per-node s")
    line = "%5s  %10s  %9s  %8s  %8s  %6s  %11s  %11s  %29s  %10s"
    print(line % header)
    for run in runs:
        print(line % (run.size, "%.1f" % run.converge_s, "%.2f" % (run.converge_s / run.size), "%.1f" % run.rerun,
                      "%.1f" % run.status_time, "%.1f" % run.ping_time, "%.2f" % (run.rerun / run.ping_time),
                      "%.2f" % (run.status_time / run.ping_time),
                      "%.1f, %.1f, %.1f" % (run.tasks_per_node, run.status_tasks_per_node, run.ping_tasks_per_node),
                      "%.2f" % run.per_node))
    print()
    met = True
    worst = max(runs, key=lambda run: run.rerun / run.ping_time)
    met &= check("idempotent re-run <= %.0fx the ping playbook at every size" % RERUN_OVER_PING_TARGET,
                 worst.rerun / worst.ping_time <= RERUN_OVER_PING_TARGET,
                 "worst %.2fx (%d nodes)" % (worst.rerun / worst.ping_time, worst.size))
    worst = max(runs, key=lambda run: run.status_time / run.ping_time)
    met &= check("gpuprov status <= %.0fx the ping playbook at every size" % STATUS_OVER_PING_TARGET,
                 worst.status_time / worst.ping_time <= STATUS_OVER_PING_TARGET,
                 "worst %.2fx (%d nodes)" % (worst.status_time / worst.ping_time, worst.size))
    worst = max(runs, key=lambda run: run.tasks_per_node)
    met &= check("a node already as planned costs <= %d tasks" % RERUN_TASKS_PER_NODE_TARGET,
                 worst.tasks_per_node <= RERUN_TASKS_PER_NODE_TARGET,
                 "worst %.1f (%d nodes)" % (worst.tasks_per_node, worst.size))
    by_size = dict((run.size, run) for run in runs)
    small, large = PER_NODE_SIZES
    if small in by_size and large in by_size:
        growth = by_size[large].per_node / by_size[small].per_node
        met &= check("per-node time at %d nodes <= %.1fx that at %d nodes (forks >= %d)"
                     % (large, PER_NODE_GROWTH_TARGET, small, large),
                     growth <= PER_NODE_GROWTH_TARGET and forks >= large,
                     "%.2fs vs %.2fs = %.2fx%s" % (by_size[large].per_node, by_size[small].per_node, growth,
                                                   "" if forks >= large else " (forks < %d)" % large))
    else:
        print("target: per-node time from %d to %d nodes: not measured (run with --sizes including %d and %d)"
              % (small, large, small, large))
    return met


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,16,24", help="fleet sizes, comma-separated (default %(default)s)")
    parser.add_argument("--forks", type=int, default=None,
                        help="ansible-playbook --forks for every run (default: 24, or the largest size if more)")
    parser.add_argument("--repeat", type=int, default=2, help="re-runs and pings per size; the best counts (default 2)")
    parser.add_argument("--first-host", type=int, default=201,
                        help="last octet of the first node's 127.0.0.N (default %(default)s)")
    parser.add_argument("--profile", action="store_true",
                        help="one more, untimed re-run per size with profile_tasks (see the log)")
    parser.add_argument("--keep", action="store_true", help="leave the fleets running and their files in place")
    args = parser.parse_args(argv)
    sizes = parse_sizes(args.sizes)
    forks = args.forks or max([24] + sizes)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    try:
        fleetlib.check_prerequisites()
    except fleetlib.FleetError as exc:
        print("bench/fleet.py: %s" % exc, file=sys.stderr)
        return 2
    if args.first_host + sum(sizes) - 1 > fleetlib.LAST_HOST_OCTET:
        parser.error("%d nodes from 127.0.0.%d do not fit below .%d; lower --first-host or --sizes"
                     % (sum(sizes), args.first_host, fleetlib.LAST_HOST_OCTET))

    os.chdir(REPO)  # ansible.cfg of the repository: collections path, pipelining
    # Short, space-free paths: they go into sshd_config and ssh's ControlPath.
    base = tempfile.mkdtemp(prefix="gpuprov-bench-fleet-", dir="/tmp")
    log = open(os.path.join(base, "ansible.log"), "w")
    print("fleet bench in %s (Ansible output: %s)" % (base, log.name))
    runs = []
    first_host = args.first_host
    failed = None
    try:
        for size in sizes:
            run = SizeRun(size, os.path.join(base, "n%d" % size), first_host, forks, log)
            first_host += size  # every size its own addresses, so --keep can keep them all
            print("%d node(s): bringing the fleet up ..." % size, flush=True)
            run.up()
            try:
                print("%d node(s): converge, then %d x (re-run, status, ping) ..." % (size, args.repeat), flush=True)
                run.measure(args.repeat, args.profile)
                runs.append(run)
                print("%d node(s): converge %.1fs, re-run %.1fs, status %.1fs, ping %.1fs"
                      % (size, run.converge_s, run.rerun, run.status_time, run.ping_time), flush=True)
            finally:
                if not args.keep:
                    run.fleet.down(clean=True)
    except (RuntimeError, fleetlib.FleetError) as exc:
        failed = str(exc)
    finally:
        log.close()

    met = report(runs, forks) if runs else False
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
