"""The trial's steps, each planned before anything changes.

A step is the canary node's sharing with N replicas and every other variable of the
inventory as it is. It reaches the planner and the playbooks the way any inventory does: an
extra inventory source, written for the step, whose ``host_vars/NODE.yml`` sets
``gpuprov_sharing`` for the node alone. Ansible merges ``host_vars`` of later sources over
earlier ones, so ``gpuprov plan -i INV -i STEP_DIR`` prints exactly the plan that
``ansible-playbook -i INV -i STEP_DIR gpuprov.gpu.site`` converges; the trial plans each step
that way and refuses when a step's plan is not the one it asked for (a variable of higher
precedence, such as a playbook's host_vars, would win over the step).
"""
import copy
import os
import re
import shutil
import tempfile

import yaml
from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import digits_value

from gpuprov.planning import PlanningFailed, plan_inventory

MAX_STEPS = 16
MAX_REPLICAS = 128  # the planner's limit per GPU (plugin_utils/intent.py)
# The step's inventory source names the host in a file name: only plain host names.
_FILE_SAFE_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}\Z", re.ASCII)


class TrialInputError(Exception):
    """Bad input: nothing was changed. ``problems``: one line each."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def parse_steps(text):
    """'2,4,8' -> [2, 4, 8]: replica counts, rising, each 2..128."""
    steps = []
    for part in str(text).split(","):
        part = part.strip()
        if not 2 <= digits_value(part, 0) <= MAX_REPLICAS:
            raise ValueError("--steps: %r: each step is a replica count from 2 to %d, e.g. 2,4,8"
                             % (part[:20], MAX_REPLICAS))
        if steps and digits_value(part) <= steps[-1]:
            raise ValueError("--steps: %s: steps must rise (each more replicas than the one before)" % text)
        steps.append(digits_value(part))
    if len(steps) > MAX_STEPS:
        raise ValueError("--steps: %d steps; at most %d" % (len(steps), MAX_STEPS))
    return steps


def step_sharing(node, sharing, replicas):
    """The node's gpuprov_sharing with ``replicas``: time-slicing (from exclusive too), MPS
    replicas, or each MIG device time-sliced. Raises TrialInputError for sharing a replica
    count does not describe."""
    base = copy.deepcopy(sharing) if isinstance(sharing, dict) else {}
    strategy = base.get("strategy", "exclusive")
    if strategy == "exclusive":
        step = {"strategy": "time-slicing", "replicas": replicas}
        if "device_plugin" in base:
            step["device_plugin"] = base["device_plugin"]
        return step
    if strategy in ("time-slicing", "mps"):
        base["replicas"] = replicas
        return base
    if strategy == "mig":
        base["time_slicing_replicas"] = replicas
        return base
    raise TrialInputError(["%s: gpuprov_sharing.strategy: %s shares a GPU by its own split count, not by replicas; "
                           "a trial raises time-slicing (from exclusive or time-slicing), MPS replicas or the "
                           "time-slicing of MIG devices" % (node, strategy)])


def advertised_replicas(plan):
    """The replicas a planned node gives each device (1 when it shares nothing)."""
    replicas = [slot["replicas"] for slot in plan.get("slots") or []]
    return max(replicas) if replicas else 1


class _Dumper(yaml.SafeDumper):
    """Writes every string as data: a value holding '{' is tagged !unsafe, so Ansible never
    renders it as a template (the values come from the inventory, already rendered once)."""


class _Unsafe(str):
    pass


_Dumper.add_representer(_Unsafe, lambda dumper, data: dumper.represent_scalar("!unsafe", str(data), style="'"))


def _data_only(value):
    if isinstance(value, dict):
        return dict((k, _data_only(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_data_only(v) for v in value]
    if isinstance(value, str) and "{" in value:
        return _Unsafe(value)
    return value


def sharing_yaml(sharing):
    return yaml.dump({"gpuprov_sharing": _data_only(sharing)}, Dumper=_Dumper, sort_keys=False,
                     default_flow_style=False)


class Step:
    """One planned step: ``replicas``, the ``sharing`` written for it, its ``plan`` (the
    node's, as `gpuprov plan` prints it) and ``source``, the inventory source that sets it."""

    def __init__(self, replicas, sharing, plan, source):
        self.replicas, self.sharing, self.plan, self.source = replicas, sharing, plan, source

    @property
    def config_name(self):
        device_plugin = self.plan.get("device_plugin") or {}
        return device_plugin.get("config_name")

    def changes(self, start):
        """The plan's steps that the start's plan does not have (what this step changes on a
        node as its inventory plans it), as text: e.g. ['label-node nvidia.com/device-plugin.config=ts-4']."""
        def key(action):
            return dict((k, v) for k, v in action.items() if k != "step")
        before = [key(a) for a in start["actions"]]
        texts = []
        for action in self.plan["actions"]:
            if key(action) in before:
                continue
            detail = ",".join("%s=%s" % item for item in sorted((action.get("labels") or {}).items()))
            texts.append("%s%s%s" % (action["action"], " " + detail if detail else "",
                                     " (disruptive)" if action["disruptive"] else ""))
        return texts

    def resources_text(self):
        return ", ".join("%s=%d" % (k.replace("nvidia.com/", ""), v) for k, v in self.plan["resources"].items())


class TrialPlan:
    """Every step of a trial, planned; the start is the node's inventory plan. Owns the
    folder of the steps' inventory sources (private, removed by cleanup())."""

    def __init__(self, node, start, steps, workdir, base_sharing, keep=False):
        self.node, self.start, self.steps, self.workdir = node, start, steps, workdir
        self.base_sharing = base_sharing
        self.keep = keep

    def cleanup(self):
        if not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _write_source(directory, node, sharing):
    """An inventory source that only sets ``node``'s gpuprov_sharing: a hosts file naming the
    host (a source with no host is no inventory) and host_vars/NODE.yml."""
    os.makedirs(os.path.join(directory, "host_vars"), mode=0o700)
    with open(os.path.join(directory, "hosts.yml"), "w") as handle:
        handle.write("# gpuprov trial: one step for %s; every other variable comes from the inventory\n" % node)
        yaml.safe_dump({"all": {"hosts": {node: None}}}, handle, default_flow_style=False)
    with open(os.path.join(directory, "host_vars", node + ".yml"), "w") as handle:
        handle.write(sharing_yaml(sharing))
    return directory


def _steps_dir(path):
    """``path`` created for the steps' sources (mode 0700); it must not exist yet, so nothing
    of the user's is written over and no link planted there is followed."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        raise TrialInputError(["--steps-dir %s: exists; give a folder that does not exist yet" % path])
    except OSError as exc:
        raise TrialInputError(["--steps-dir %s: cannot create it: %s" % (path, exc.strerror or exc)])
    return path


def plan_trial(inventories, node, steps, vault=None, catalog_file=None, steps_dir=None):
    """Plan the start and every step for ``node``; TrialInputError (nothing changed) when the
    node is not a GPU node of the inventory or a step does not plan. ``steps_dir``: keep the
    steps' inventory sources there (else a private temporary folder, removed by cleanup())."""
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import inventory as inventory_mod
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import escape

    if not _FILE_SAFE_HOST.match(node):
        raise TrialInputError(["--node: %r: give the node's inventory host name (letters, digits, '.', '_', '-')"
                               % escape(node[:80])])
    try:
        hosts, skipped = inventory_mod.load_inventory(list(inventories), node, vault=vault)
    except inventory_mod.InventoryError as exc:
        text = str(exc)
        if "matches no host" in text:
            raise TrialInputError(["--node %s: no such host in the inventory" % node])
        raise TrialInputError([escape(text)])
    if [h.host for h in hosts] != [node] or skipped:
        if node in skipped:
            raise TrialInputError(["--node %s: not a GPU node of the inventory (it has no gpuprov_ variables)" % node])
        raise TrialInputError(["--node %s: names %s; give one host name" % (
            node, ", ".join(sorted([h.host for h in hosts] + list(skipped)))[:200] or "no host")])
    base_sharing = hosts[0].variables.get("gpuprov_sharing")
    try:
        start = plan_inventory(list(inventories), node, vault=vault, catalog_file=catalog_file).nodes[node]
    except PlanningFailed as exc:
        raise TrialInputError(["the inventory does not plan (nothing was changed):"] + exc.problems)
    workdir = _steps_dir(steps_dir) if steps_dir else tempfile.mkdtemp(prefix="gpuprov-trial-")
    planned, problems = [], []
    try:
        for replicas in steps:
            try:
                sharing = step_sharing(node, base_sharing, replicas)
            except TrialInputError as exc:
                problems.extend(exc.problems)
                break
            source = _write_source(os.path.join(workdir, "step-%d" % replicas), node, sharing)
            try:
                plan = plan_inventory(list(inventories) + [source], node, vault=vault,
                                      catalog_file=catalog_file).nodes[node]
            except PlanningFailed as exc:
                problems.extend("step %d: %s" % (replicas, p) for p in exc.problems)
                continue
            got = advertised_replicas(plan)
            if got != replicas:
                problems.append("step %d: %s's plan gives %d replica(s) per device, not %d: a variable of higher "
                                "precedence than the inventory's host_vars sets gpuprov_sharing (ansible-playbook "
                                "-e, or host_vars beside a playbook); remove it for the trial" % (
                                    replicas, node, got, replicas))
                continue
            planned.append(Step(replicas, sharing, plan, source))
        if not problems and advertised_replicas(start) >= steps[0]:
            problems.append("--steps: %s already gives %d replica(s) per device; start the steps above it"
                            % (node, advertised_replicas(start)))
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    if problems:
        shutil.rmtree(workdir, ignore_errors=True)
        raise TrialInputError(problems)
    return TrialPlan(node, start, planned, workdir, base_sharing, keep=bool(steps_dir))
