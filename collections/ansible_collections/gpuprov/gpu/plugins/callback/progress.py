# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: progress
type: stdout
short_description: One line per node and step while a gpuprov playbook runs, then a per-node summary
version_added: "0.1.0"
author: gpuprov maintainers (@gpuprov)
description:
  - Prints a line per host for every task that changed, failed, or was unreachable (and,
    with C(--diff), the diff), the wave (batch) being run, and at the end a summary per
    node - changed, unchanged, failed or unreachable - with what changed.
  - A node that a read task with the variable C(_gpuprov_converge_follows) found not as
    planned (the site playbook reads every node before its waves) is left out of the summary
    until one of its tasks runs in a later play, so a node the rollout never reached is not
    reported as unchanged.
  - When the environment variable C(GPUPROV_START_GATE_FD) names an open file descriptor (as
    C(gpuprov status) passes one), the run is held at the playbook's start, before any host is
    contacted, until C(go) is read from it; at its end of file the run stops there, with exit
    status 2 and no host contacted. C(gpuprov) checks every plan meanwhile.
  - When the environment variable C(GPUPROV_SUMMARY_FILE) names a file, the summary is also
    written there as JSON (C(gpuprov apply) reads it); in check mode it also holds, per node,
    what C(gpuprov.gpu.node_plan) read (C(node_status), which C(gpuprov status) reads). The file's folder must be private (owned
    by the user running Ansible, writable by no one else, as C(gpuprov) creates it with mode
    0700), and the file is opened without following a symbolic link; otherwise the summary is
    not written and a warning says why.
extends_documentation_fragment:
  - default_callback
requirements:
  - set as the stdout callback (C(ANSIBLE_STDOUT_CALLBACK=gpuprov.gpu.progress))
"""

import json
import os

from ansible.plugins.callback.default import CallbackModule as DefaultCallback

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.start_gate import wait_at_gate


def write_private(path, text):
    """Write ``text`` to ``path`` in a private folder, never through a planted link.

    The folder must belong to this user and be writable by no one else (else anyone could
    swap the file between check and open); the file is opened with O_NOFOLLOW, so a link
    planted at its name is refused (ELOOP) instead of followed.
    """
    folder = os.path.dirname(os.path.abspath(path))
    info = os.lstat(folder)
    if not os.path.isdir(folder) or os.path.islink(folder):
        raise ValueError("%s is not a directory" % folder)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise ValueError("%s is not a private folder (owner uid %d, mode %04o); expected this user's, mode 0700"
                         % (folder, info.st_uid, info.st_mode & 0o7777))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


# Result keys that say what a gpuprov module changed, in a few words.
_DETAIL_KEYS = ("changed_keys", "summary")


def _gpu_detail(gpus):
    """mig_layout / mig_mode per-GPU results -> 'GPU 0,1: kept 1, destroyed 1, created 2'."""
    changed = [g for g in gpus if isinstance(g, dict) and g.get("changed")]
    if not changed:
        return ""
    where = "GPU " + ",".join(str(g.get("index")) for g in changed)
    if "created" in changed[0]:
        totals = dict((k, sum(len(g.get(k) or []) for g in changed)) for k in ("kept", "destroyed", "created"))
        return "%s: kept %d, destroyed %d, created %d instance(s)" % (
            where, totals["kept"], totals["destroyed"], totals["created"])
    after = changed[0].get("after") or {}
    if "current" in after:
        return "%s: MIG %s%s" % (where, "enabled" if after.get("pending") else "disabled",
                                 "" if after.get("current") == after.get("pending") else " (pending reset)")
    return where


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "gpuprov.gpu.progress"

    def __init__(self):
        super(CallbackModule, self).__init__()
        self._nodes = {}
        self._check = False
        self._play = None
        self._plays = 0
        # Nodes a read found not as planned, whose converge is in a later play (site.yml reads
        # every node first): host -> the play of the read. Until a task of theirs runs in a later
        # play they are left out of the summary, as nodes the rollout never reached.
        self._waiting = {}

    # -- helpers ---------------------------------------------------------------------------
    def _node(self, host):
        if host in self._waiting and self._waiting[host] < self._plays:
            del self._waiting[host]
        return self._nodes.setdefault(host, {"status": "unchanged", "changed": [], "failed": None, "ok": 0})

    def _wait_for_converge(self, host, result):
        """A read whose task says a later play converges the node (_gpuprov_converge_follows)."""
        changes = (result._result.get("ansible_facts") or {}).get("gpuprov_node_changes")
        follows = (result._task.vars or {}).get("_gpuprov_converge_follows")
        if follows and isinstance(changes, dict) and changes.get("in_sync") is False:
            self._waiting[host] = self._plays

    @staticmethod
    def _detail(result):
        if isinstance(result.get("gpus"), list):
            text = _gpu_detail(result["gpus"])
            if text:
                return text
        for key in _DETAIL_KEYS:
            value = result.get(key)
            if value:
                text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
                return text if len(text) <= 160 else text[:157] + "..."
        return ""

    def _line(self, host, status, task, detail=""):
        self._display.display("  %-24s %-11s %s%s" % (host, status, task, (": " + detail) if detail else ""))

    # -- events ----------------------------------------------------------------------------
    def v2_playbook_on_start(self, playbook):
        wait_at_gate(os.environ)
        super(CallbackModule, self).v2_playbook_on_start(playbook)

    def v2_playbook_on_play_start(self, play):
        self._play = play
        self._plays += 1
        self._check = bool(play.check_mode)
        self._display.banner("PLAY [%s]%s" % (play.get_name().strip(), " (check mode: nothing changes)" if self._check else ""))

    def v2_playbook_on_task_start(self, task, is_conditional):
        pass  # a line per host and step instead of task banners

    def v2_playbook_on_handler_task_start(self, task):
        pass

    def v2_playbook_on_include(self, included_file):
        pass

    @staticmethod
    def _task_name(result):
        # "gpuprov.gpu.gpu_mig : Enable MIG mode" -> "Enable MIG mode": the step is what matters.
        return result._task.get_name().strip().split(" : ", 1)[-1]

    def v2_runner_on_ok(self, result):
        host = result._host.get_name()
        node = self._node(host)
        node["ok"] += 1
        res = result._result
        # gpuprov.gpu.node_plan's reading of the node (read_node), kept in the summary of a
        # check-mode run: `gpuprov status` reads it there, with no task writing files.
        status = (res.get("ansible_facts") or {}).get("gpuprov_status")
        if self._check and isinstance(status, dict):
            node["node_status"] = {"status": status.get("status"), "drift": status.get("drift") or []}
        looped = "results" in res  # a loop's aggregate: its items were shown one by one
        if res.get("changed", False):
            task = self._task_name(result)
            detail = "" if looped else self._detail(res)
            entry = task + (" (" + detail + ")" if detail else "")
            if entry not in node["changed"]:
                node["changed"].append(entry)
            if node["status"] == "unchanged":
                node["status"] = "changed"
            if not looped:
                self._show_change(host, task, detail, res)
        else:
            self._handle_warnings(res)
        if not looped:
            self._show_note(host, result)
        self._wait_for_converge(host, result)

    def _show_change(self, host, task, detail, res):
        self._line(host, "would change" if self._check else "changed", task, detail)
        self._handle_warnings(res)
        if res.get("diff") and self._play and self._play.diff:
            self._display.display(self._get_diff(res["diff"]))

    def _show_note(self, host, result):
        msg = result._result.get("msg")
        if result._task.action in ("ansible.builtin.debug", "debug") and msg:
            self._line(host, "note", str(msg))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        host = result._host.get_name()
        task = self._task_name(result)
        msg = result._result.get("msg") or result._result.get("stderr") or "failed"
        if ignore_errors:
            self._line(host, "ignored", task, str(msg))
            return
        node = self._node(host)
        node["status"] = "failed"
        node["failed"] = "%s: %s" % (task, msg)
        self._line(host, "FAILED", task, str(msg))

    def v2_runner_on_unreachable(self, result):
        host = result._host.get_name()
        node = self._node(host)
        node["status"] = "unreachable"
        node["failed"] = result._result.get("msg", "unreachable")
        self._line(host, "UNREACHABLE", self._task_name(result), node["failed"])

    def v2_runner_on_skipped(self, result):
        self._node(result._host.get_name())

    def v2_runner_item_on_ok(self, result):
        host = result._host.get_name()
        if result._result.get("changed", False):
            label = self._get_item_label(result._result)
            self._show_change(host, "%s [%s]" % (self._task_name(result), label), self._detail(result._result),
                              result._result)
        self._show_note(host, result)

    def v2_runner_item_on_failed(self, result):
        self.v2_runner_on_failed(result)

    def v2_runner_item_on_skipped(self, result):
        pass

    def v2_runner_retry(self, result):
        self._line(result._host.get_name(), "retrying", self._task_name(result),
                   "%d of %d" % (result._result.get("attempts", 0), result._result.get("retries", 0)))

    def v2_playbook_on_stats(self, stats):
        self._display.banner("SUMMARY%s" % (" (dry run: nothing was changed)" if self._check else ""))
        for host in sorted(stats.processed):
            if host in self._waiting:
                continue  # left out below
            totals = stats.summarize(host)
            node = self._node(host)
            if totals["unreachable"] and node["status"] != "failed":
                node["status"] = "unreachable"
            elif totals["failures"]:
                node["status"] = "failed"
        for host in self._waiting:
            self._nodes.pop(host, None)
        if not self._nodes:
            self._display.display("  no hosts ran")
        for host, node in sorted(self._nodes.items()):
            label = node["status"]
            if self._check and label == "changed":
                label = "would change"
            detail = node["failed"] or "; ".join(node["changed"]) or "-"
            self._display.display("  %-24s %-12s %s" % (host, label, detail))
        path = os.environ.get("GPUPROV_SUMMARY_FILE")
        if path:
            try:
                write_private(path, json.dumps({"check_mode": self._check, "nodes": self._nodes}, indent=2,
                                               sort_keys=True))
            except (OSError, ValueError) as exc:
                self._display.warning("gpuprov summary not written to %s: %s" % (path, exc))
