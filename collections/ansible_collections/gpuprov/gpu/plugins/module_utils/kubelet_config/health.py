# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Whether a restarted kubelet is healthy, and stays so.

The kubelet's /healthz answers "ok" before its container manager has started, so a kubelet
that refuses its CPU or memory manager checkpoint says "ok" for a few seconds of every run of
its crash loop.
One good answer proves nothing: the unit must also stay active with an unchanged restart
count (``NRestarts``, systemd 235 and later) across some restart intervals (``RestartSec=``,
read from the unit as ``RestartUSec``) plus the time a kubelet takes to reach its container
manager, and /healthz must still say "ok" afterwards.

Everything that touches the node (``systemctl show``, the HTTP request, the clock) is passed
in, so the logic is tested without a kubelet; the module passes the real ones.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

# systemd's format_timespan() units (src/basic/time-util.c), in seconds.
_TIMESPAN_UNITS = {
    "y": 31557600, "month": 2629800, "w": 604800, "d": 86400, "h": 3600, "min": 60, "m": 60,
    "s": 1, "sec": 1, "": 1, "ms": 0.001, "msec": 0.001, "us": 0.000001, "usec": 0.000001,
    u"\u03bcs": 0.000001,
}
_TIMESPAN_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?) *([^0-9. ]*)")


class KubeletHealthError(Exception):
    """A check failed; RESULT holds what was seen (status, content, restart counts)."""

    def __init__(self, msg, **result):
        super(KubeletHealthError, self).__init__(msg)
        self.result = result


def parse_show(text):
    """``systemctl show --property=...`` output as a dict of property to value."""
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def timespan_seconds(text):
    """Seconds in a systemd time span as ``systemctl show`` prints it ("10s", "1min 30s",
    "100ms", "0"); ValueError for anything else ("infinity" included: no restart interval)."""
    text = (text or "").strip()
    if not text:
        raise ValueError("empty time span")
    seconds, end = 0.0, 0
    for match in _TIMESPAN_PART.finditer(text):
        if text[end:match.start()].strip():
            break
        unit = match.group(2)
        if unit not in _TIMESPAN_UNITS:
            raise ValueError("unknown unit %r in time span %r" % (unit, text))
        seconds += float(match.group(1)) * _TIMESPAN_UNITS[unit]
        end = match.end()
    if end == 0 or text[end:].strip():
        raise ValueError("not a time span: %r" % text)
    return seconds


def stable_seconds(restart_seconds, intervals, startup_seconds):
    """How long the unit must stay up: INTERVALS restart intervals plus the start-up time,
    rounded up to a whole second."""
    return int(math.ceil(round(intervals * restart_seconds + startup_seconds, 6)))


def _answer_text(status, content):
    if status is None:
        return "no answer (%s)" % content
    return "HTTP %d: %s" % (status, (content or "").strip()[:200] or "(empty)")


def _ok(status, content):
    return status == 200 and (content or "").strip() == "ok"


class HealthWatch(object):
    """The checks, in order. SHOW(service, props) returns ``systemctl show``'s text or raises
    KubeletHealthError; GET(url) returns (status, text), status None when nothing answered
    (text then says why); SLEEP(seconds) waits; MONOTONIC() reads a clock."""

    def __init__(self, service, url, show, get, sleep, monotonic):
        self.service, self.url = service, url
        self._show, self._get, self._sleep, self._monotonic = show, get, sleep, monotonic

    def wait_ok(self, retries, delay):
        """Ask /healthz until it says ok: one try plus up to RETRIES more, DELAY seconds apart."""
        started = self._monotonic()
        for attempt in range(retries + 1):
            if attempt:
                self._sleep(delay)
            status, content = self._get(self.url)
            if _ok(status, content):
                return attempt + 1
        raise KubeletHealthError(
            "%s did not answer ok at %s in %d tries over %.0f s; its last answer: %s"
            % (self.service, self.url, retries + 1, self._monotonic() - started, _answer_text(status, content)),
            status=-1 if status is None else status, content=content if status is not None else "")

    def unit_state(self, props):
        values = parse_show(self._show(self.service, props))
        missing = [name for name in props if name not in values or values[name] == ""]
        if "NRestarts" in missing:
            raise KubeletHealthError(
                "systemctl show %s printed no NRestarts: systemd 235 or later is needed to see "
                "whether the kubelet restarts" % self.service)
        if missing:
            raise KubeletHealthError("systemctl show %s printed no %s" % (self.service, ", ".join(missing)))
        try:
            values["NRestarts"] = int(values["NRestarts"])
        except ValueError:
            raise KubeletHealthError("systemctl show %s: NRestarts=%s is not a number" % (self.service, values["NRestarts"]))
        return values

    def run(self, retries, delay, intervals, startup_seconds):
        """Every check; the facts seen, or KubeletHealthError saying which check failed."""
        tries = self.wait_ok(retries, delay)
        before = self.unit_state(["ActiveState", "NRestarts", "RestartUSec"])
        try:
            restart_seconds = timespan_seconds(before["RestartUSec"])
        except ValueError as exc:
            raise KubeletHealthError("systemctl show %s: RestartUSec=%s: %s" % (self.service, before["RestartUSec"], exc))
        watch = stable_seconds(restart_seconds, intervals, startup_seconds)
        if watch > 0:
            self._sleep(watch)
        after = self.unit_state(["ActiveState", "NRestarts"])
        facts = dict(healthz_tries=tries, restart_seconds=restart_seconds, stable_seconds=watch,
                     restarts_before=before["NRestarts"], restarts_after=after["NRestarts"],
                     active_state=after["ActiveState"])
        if after["ActiveState"] != "active" or after["NRestarts"] != before["NRestarts"]:
            raise KubeletHealthError(
                "%s answered /healthz but did not stay up: over %ds its NRestarts went from %d to %d "
                "and it is %s (a crash loop: the kubelet exits when its container manager starts)"
                % (self.service, watch, before["NRestarts"], after["NRestarts"], after["ActiveState"]), **facts)
        status, content = self._get(self.url)
        facts.update(status=-1 if status is None else status, content=content if status is not None else "")
        if not _ok(status, content):
            raise KubeletHealthError(
                "%s stayed up for %ds but /healthz at %s then said %s"
                % (self.service, watch, self.url, _answer_text(status, content)), **facts)
        return facts
