# -*- coding: utf-8 -*-
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Where a playbook run spends its time, for bench/fleet.py only (not part of the collection).

Enabled by the bench alone (ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins,
ANSIBLE_CALLBACKS_ENABLED=bench_timing); writes JSON to $BENCH_TIMING_FILE at the end:

    start_s      process start ($BENCH_T0, set by the bench just before it starts the
                 process) to the playbook's start: Python and Ansible imports, the CLI
    parse_s      playbook start to the first play: inventory and playbook parsing
    plays        per play: its tasks, each with wall time (task start to the next task
                 start, or the play's end), hosts per status, and per host the worker time
                 (v2_runner_on_start to the result: fork, templating, the connection and the
                 module running on the node; for action plugins, their controller-side work),
                 and waited_s, the longest watch a host's module reported sleeping through
                 (stable_seconds), when one did
    end_s        the last play's last result to the stats (the play's end, the summary)

A task whose worker time is small against its wall time spends its time in the controller's
strategy loop (queueing, includes, templating the task per host), not on the node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = r"""
name: bench_timing
type: aggregate
short_description: per-phase timing for bench/fleet.py
description: [Per-phase timing of a playbook run, written as JSON to $BENCH_TIMING_FILE.]
requirements: [enabled by bench/fleet.py]
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timing"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._t0 = float(os.environ.get("BENCH_T0") or time.time())
        self._playbook_start = None
        self._first_play = None
        self._plays = []
        self._task = None
        self._running = {}
        self._last_result = None

    def _now(self):
        return time.time()

    def _close_task(self, at):
        if self._task is not None:
            self._task["wall_s"] = at - self._task["_start"]
            self._task = None

    def v2_playbook_on_start(self, playbook):
        self._playbook_start = self._now()

    def v2_playbook_on_play_start(self, play):
        now = self._now()
        self._close_task(now)
        if self._first_play is None:
            self._first_play = now
        self._plays.append({"name": play.get_name().strip(), "start": now, "tasks": []})

    def _task_start(self, task):
        now = self._now()
        self._close_task(now)
        self._task = {"name": task.get_name().strip(), "action": task.action, "_start": now, "hosts": {},
                      "status": {}}
        if self._plays:
            self._plays[-1]["tasks"].append(self._task)

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._task_start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._task_start(task)

    def v2_runner_on_start(self, host, task):
        self._running[(host.get_name(), task._uuid)] = self._now()

    def _result(self, result, status):
        now = self._now()
        self._last_result = now
        host = result._host.get_name()
        started = self._running.pop((host, result._task._uuid), None)
        if self._task is not None:
            self._task["status"][status] = self._task["status"].get(status, 0) + 1
            if started is not None:
                self._task["hosts"][host] = now - started
            # A module that sleeps on the node for a watch a real node needs says how long
            # (gpuprov.gpu.kubelet_restart: stable_seconds).
            waited = result._result.get("stable_seconds")
            if isinstance(waited, (int, float)) and not isinstance(waited, bool):
                self._task["waited_s"] = max(self._task.get("waited_s", 0.0), float(waited))

    def v2_runner_on_ok(self, result):
        self._result(result, "changed" if result._result.get("changed") else "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._result(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._result(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._result(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        now = self._now()
        self._close_task(self._last_result or now)
        path = os.environ.get("BENCH_TIMING_FILE")
        if not path:
            return
        plays = []
        for play in self._plays:
            tasks = []
            for task in play["tasks"]:
                task = dict((k, v) for k, v in task.items() if not k.startswith("_"))
                tasks.append(task)
            plays.append({"name": play["name"], "tasks": tasks})
        data = {
            "start_s": (self._playbook_start or now) - self._t0,
            "parse_s": ((self._first_play or now) - (self._playbook_start or now)),
            "end_s": now - (self._last_result or now),
            "stats_at": now,
            "plays": plays,
        }
        with open(path, "w") as handle:
            json.dump(data, handle)
