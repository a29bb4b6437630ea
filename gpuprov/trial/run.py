"""The trial's loop: measure the start, then converge, wait, measure and judge each step, and
put the node where the trial ends (the last step that passed, or where it started).

Nothing changes before the start is measured and a dry run of the node's inventory plan
changes nothing (so "where it started" is its inventory plan, and converging it back
restores it). A failure at any step (a converge that fails, Prometheus gone, no traffic left)
and a Ctrl-C put the node back where it started, and the result says so; when even that
fails, it says exactly what the node may be left at and how to fix it.
"""
import signal
import time

from gpuprov.diagnose.prometheus import PrometheusError
from gpuprov.trial import slo as slo_mod

OUTCOME_FOUND = "found"            # a step passed: the node is at the last one that did
OUTCOME_NONE = "none"              # no step passed: the node is back where it started
OUTCOME_ERROR = "error"            # a step failed to run or measure: the node is back where it started
OUTCOME_INTERRUPTED = "interrupted"


class TrialRefused(Exception):
    """Before any change: the trial cannot start (bad input or a node not as planned), or
    was interrupted (``interrupted``) before it changed anything."""

    def __init__(self, problems, interrupted=False):
        self.problems = list(problems)
        self.interrupted = interrupted
        super().__init__("; ".join(self.problems))


class StepFailed(Exception):
    """A step could not be run or measured (not a verdict on the step)."""


class Interrupted(Exception):
    pass


class Interrupts:
    """SIGINT (Ctrl-C) and SIGTERM while the trial runs. One while a converge runs lets it
    finish (a second one stops it), one during the dry run or a window ends it at once; while
    the node is put back they are refused, since stopping that would leave the node half way."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, converger, say):
        self.converger, self.say = converger, say
        self.count = 0
        self.phase = "idle"
        self._previous = None

    def __enter__(self):
        self._previous = dict((number, signal.signal(number, self._handle)) for number in self.SIGNALS)
        return self

    def __exit__(self, *exc):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        return False

    @property
    def requested(self):
        return self.count > 0

    def _handle(self, signum, frame):
        self.count += 1
        if self.phase == "restore":
            self.say("interrupt refused: %s is being put back; stopping now could leave it half way" % self.converger.node)
        elif self.phase == "dry run":
            self.say("interrupted: nothing was changed")
            self.converger.stop_running()
        elif self.phase == "converge":
            if self.count == 1:
                self.say("interrupted: the converge of %s finishes first, then the node is put back "
                         "(Ctrl-C again stops the converge)" % self.converger.node)
            else:
                self.say("stopping the converge of %s" % self.converger.node)
                self.converger.stop_running()
        else:
            self.say("interrupted")

    def check(self):
        if self.count and self.phase != "restore":
            raise Interrupted()


class StepRecord:
    """What one step (or the start, replicas None) measured and how it was judged."""

    def __init__(self, replicas, config_name, resources):
        self.replicas, self.config_name, self.resources = replicas, config_name, resources
        self.started = self.ended = None
        self.verdict = "not run"       # pass | slo | memory | not run | error
        self.reasons = []
        self.workloads = {}            # (namespace, model_name) -> {"requests", "quantiles"}
        self.gpus = []
        self.pods = []

    @property
    def label(self):
        return "start" if self.replicas is None else "step %d" % self.replicas


class TrialResult:
    def __init__(self, plan, slos, window, margin):
        self.plan, self.slos, self.window, self.margin = plan, slos, window, margin
        self.start = None
        self.steps = []
        self.outcome = None
        self.best = None               # the Step that passed last
        self.error = None
        self.restored = None           # True/False once the node was converged back, None: not needed
        self.left_at = None            # what the node is at in the end: "start" or a Step
        self.notes = []


class Trial:
    """``converger``: a NodeConverger; ``reader``: a WindowReader; ``say``: progress to the user;
    ``clock``/``sleep``: time.time/time.sleep (tests pass their own)."""

    def __init__(self, plan, converger, reader, slos, window, margin, say, clock=time.time, sleep=time.sleep):
        self.plan, self.converger, self.reader = plan, converger, reader
        self.slos, self.window, self.margin = slos, window, margin
        self.say, self.clock, self.sleep = say, clock, sleep
        self.memory_mib = dict((gpu["index"], gpu["memory_mib"]) for gpu in plan.start["gpus"])
        self.interrupts = None

    # -- measuring -----------------------------------------------------------------------

    def _measure(self, record, end, judge=True):
        """Memory first: a step that leaves too little GPU memory fails on that alone, and
        its latency is not read (it says nothing about a density the node cannot hold)."""
        record.gpus = self.reader.gpus(end, self.window, self.memory_mib)
        record.pods = self.reader.pods(end, self.window)
        missing = self.missing_gpus(record)
        if judge and missing:
            raise StepFailed("%s: Prometheus holds no dcgm-exporter series for GPU %s of %s in the window: the "
                             "memory check cannot judge the step"
                             % (record.label, ",".join(map(str, missing)), self.plan.node))
        short = [g for g in record.gpus if g["free_ratio"] is not None and g["free_ratio"] < self.margin]
        if judge and short:
            record.verdict = "memory"
            record.reasons = ["GPU %s: %.0f%% free (%.1f of %.1f GiB), below the %.0f%% margin" % (
                g["gpu"], 100 * g["free_ratio"], g["free_mib"] / 1024.0, g["total_mib"] / 1024.0, 100 * self.margin)
                for g in short]
            return
        record.workloads = self.reader.latency(end, self.window)
        if not judge:
            return
        serving = dict((k, w) for k, w in record.workloads.items() if any(w["requests"].values()))
        if not serving:
            raise StepFailed("%s: no workload on %s served a request in the %ds window (%s): the trial judges "
                             "load it measures; is the load generator running?"
                             % (record.label, self.plan.node, self.window, ", ".join(
                                 slo_mod.short_name(m) for m in self.reader.metrics)))
        reasons = []
        for key in sorted(set(self.start_workloads) | set(record.workloads)):
            entry = record.workloads.get(key)
            name = workload_name(key)
            if entry is None or not any(entry["requests"].values()):
                reasons.append("%s served no request in the window (crashed, or out of GPU memory?)" % name)
                continue
            reasons.extend("%s: %s" % (name, text) for text in slo_mod.breaches(self.slos, entry["quantiles"]))
        record.reasons = reasons
        record.verdict = "slo" if reasons else "pass"

    def missing_gpus(self, record):
        """The node's GPU indices (from its plan) with no series in the record."""
        return sorted(set(self.memory_mib) - set(g["gpu"] for g in record.gpus))

    # -- the run -------------------------------------------------------------------------

    def run(self):
        result = TrialResult(self.plan, self.slos, self.window, self.margin)
        self.result = result
        with Interrupts(self.converger, self.say) as interrupts:
            self.interrupts = interrupts
            self._prepare(result)
            try:
                self._steps(result)
            except Interrupted:
                result.outcome = OUTCOME_INTERRUPTED
                result.error = "interrupted"
            except (StepFailed, PrometheusError) as exc:
                result.outcome = OUTCOME_ERROR
                result.error = str(exc)
            except Exception as exc:  # anything else that stops the loop still puts the node back
                result.outcome = OUTCOME_ERROR
                result.error = "%s: %s" % (type(exc).__name__, exc)
            if result.outcome in (OUTCOME_INTERRUPTED, OUTCOME_ERROR):
                self._put_back(result, None, "the trial stopped: %s" % result.error)
            else:
                self._finish(result)
        return result

    def _prepare(self, result):
        """The start, measured, and a dry run of the node's inventory plan; refuses on either."""
        node = self.plan.node
        start = StepRecord(None, (self.plan.start.get("device_plugin") or {}).get("config_name"),
                           self.plan.start["resources"])
        now = self.clock()
        self.say("%s: reading the last %ds from Prometheus (the start)" % (node, self.window))
        try:
            self._measure(start, now, judge=False)
        except PrometheusError as exc:
            raise TrialRefused(["--prometheus: %s (nothing was changed)" % exc])
        start.started, start.ended, start.verdict = now - self.window, now, "start"
        missing = self.missing_gpus(start)
        if missing:
            raise TrialRefused(["%s: Prometheus holds no dcgm-exporter series for GPU %s of the node "
                                "(DCGM_FI_DEV_FB_FREE with node, Hostname or hostname %s, and a gpu label): the memory "
                                "check cannot run; nothing was changed" % (node, ",".join(map(str, missing)), node)])
        if not any(any(w["requests"].values()) for w in start.workloads.values()):
            raise TrialRefused(["%s: no request in the last %ds in Prometheus (%s with node=%r%s): a trial needs "
                                "the workloads on the node serving load, and their pods' node name as a `node` "
                                "label of their series; nothing was changed" % (
                                    node, self.window, ", ".join(self.reader.metrics), node,
                                    ", namespace=%r" % self.reader.namespace if self.reader.namespace else "")])
        self.start_workloads = dict((k, w) for k, w in start.workloads.items() if any(w["requests"].values()))
        result.start = start
        self.say("%s: dry run of its inventory plan (it must change nothing, so that the node can be put back)" % node)
        self.interrupts.phase = "dry run"
        outcome = self.converger.run(check=True)
        self.interrupts.phase = "idle"
        if self.interrupts.requested:
            raise TrialRefused(["%s: interrupted before any change; nothing was changed" % node], interrupted=True)
        if not outcome.ok:
            raise TrialRefused(["%s: the dry run of its inventory plan failed (nothing was changed): %s"
                                % (node, outcome.detail)])
        if outcome.changed:
            raise TrialRefused(["%s: not as its inventory plans it; a dry run would change: %s. Converge it first "
                                "(gpuprov apply -l %s): the trial puts the node back to its inventory plan, which must "
                                "be where it is now; nothing was changed" % (node, outcome.detail, node)])

    def _steps(self, result):
        node = self.plan.node
        for step in self.plan.steps:
            self.interrupts.check()
            record = StepRecord(step.replicas, step.config_name, step.plan["resources"])
            result.steps.append(record)
            self.say("step %d: converging %s to %d replicas (%s: %s)" % (
                step.replicas, node, step.replicas, step.config_name, step.resources_text()))
            result.left_at = step  # from here on the node may be at this step
            self.interrupts.phase = "converge"
            outcome = self.converger.run(source=step.source)
            self.interrupts.phase = "window"
            self.interrupts.check()
            if not outcome.ok:
                record.verdict = "error"
                raise StepFailed("step %d: the converge failed: %s" % (step.replicas, outcome.detail))
            record.started = self.clock()
            end = record.started + self.window
            self.say("step %d: measuring for %ds" % (step.replicas, self.window))
            while True:
                self.interrupts.check()
                left = end - self.clock()
                if left <= 0:
                    break
                self.sleep(min(0.2, left))
            record.ended = end
            try:
                self._measure(record, end)
            except (StepFailed, PrometheusError):
                record.verdict = "error"
                raise
            self.interrupts.check()
            self.say("step %d: %s%s" % (step.replicas, record.verdict, (": " + "; ".join(record.reasons))
                                        if record.reasons else ""))
            if record.verdict != "pass":
                return
            result.best = step

    def _finish(self, result):
        result.outcome = OUTCOME_FOUND if result.best else OUTCOME_NONE
        target = result.best
        if result.left_at is target:
            return  # the last step converged passed: the node is where the trial ends
        why = ("back to %d replicas, the last step that passed" % target.replicas) if target else "no step passed"
        self._put_back(result, target, why)

    def _put_back(self, result, target, why):
        """Converge the node to ``target`` (a Step) or to its inventory plan (None)."""
        node = self.plan.node
        if result.left_at is None and target is None:
            result.restored = None  # nothing was changed
            return
        if target is None:
            why = "%s; back where it started (its inventory plan, %s)" % (why, self.result.start.config_name)
        self.say("%s: putting it %s" % (node, why))
        self.interrupts.phase = "restore"
        outcome = self.converger.run(source=target.source if target else None)
        self.interrupts.phase = "idle"
        result.restored = outcome.ok
        if outcome.ok:
            result.left_at = target or "start"
        else:
            result.notes.append("%s could NOT be put back: %s. It may be left at %s; converge it with "
                                "gpuprov apply -l %s (its inventory plan)" % (
                                    node, outcome.detail, describe(result.left_at), node))


def workload_name(key):
    namespace, model = key
    return "%s/%s" % (namespace or "-", model or "-")


def describe(left_at):
    if left_at is None or left_at == "start":
        return "its inventory plan"
    return "%d replicas (%s)" % (left_at.replicas, left_at.config_name)
