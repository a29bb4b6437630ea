# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The kubelet health watch: systemd time spans, the order of the checks, every failure."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpuprov.gpu.plugins.module_utils.kubelet_config.health import (
    HealthWatch,
    KubeletHealthError,
    parse_show,
    stable_seconds,
    timespan_seconds,
)

URL = "http://127.0.0.1:10248/healthz"


@pytest.mark.parametrize("text, seconds", [
    ("10s", 10), ("0", 0), ("100ms", 0.1), ("1min 30s", 90), ("2h 1min", 7260), ("500us", 0.0005),
    (u"250\u03bcs", 0.00025), ("1.5s", 1.5), ("1d", 86400), ("3w", 1814400),
])
def test_time_spans_as_systemctl_show_prints_them(text, seconds):
    assert timespan_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "infinity", "10x", "s10", "10s garbage", "1..5s", "-1s"])
def test_what_is_not_a_time_span_is_refused(text):
    with pytest.raises(ValueError):
        timespan_seconds(text)


def test_the_watch_is_the_intervals_plus_start_up_rounded_up_to_a_second():
    assert stable_seconds(10, 2, 10) == 30
    assert stable_seconds(0.1, 2, 4) == 5
    assert stable_seconds(0.3, 2, 0) == 1
    assert stable_seconds(0, 0, 0) == 0
    # No float noise turns a whole number into one more second.
    assert stable_seconds(0.1, 3, 0.7) == 1


def test_show_output_is_read_as_properties():
    assert parse_show("ActiveState=active\nNRestarts=3\nRestartUSec=10s\n\n") == {
        "ActiveState": "active", "NRestarts": "3", "RestartUSec": "10s"}


class Node(object):
    """A scripted node: /healthz answers and unit states in order, a clock moved by sleeps."""

    def __init__(self, answers, states):
        self.answers, self.states = list(answers), list(states)
        self.now, self.sleeps, self.calls = 100.0, [], []

    def show(self, service, props):
        self.calls.append(("show", service, tuple(props)))
        state = self.states.pop(0)
        if isinstance(state, Exception):
            raise state
        return "".join("%s=%s\n" % (key, state[key]) for key in props if key in state)

    def get(self, url):
        self.calls.append(("get", url))
        return self.answers.pop(0)

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def watch(self):
        return HealthWatch("kubelet.service", URL, self.show, self.get, self.sleep, lambda: self.now)


UP = {"ActiveState": "active", "NRestarts": "2", "RestartUSec": "10s"}


def test_a_kubelet_that_comes_up_and_stays_up():
    node = Node([(None, "connection refused"), (503, "not yet"), (200, "ok\n"), (200, "ok")],
                [UP, dict(UP)])
    facts = node.watch().run(retries=5, delay=2, intervals=2, startup_seconds=10)
    assert facts == dict(healthz_tries=3, restart_seconds=10, stable_seconds=30, restarts_before=2,
                         restarts_after=2, active_state="active", status=200, content="ok")
    # Two waits between the tries, then the watch; the unit is read before and after it.
    assert node.sleeps == [2, 2, 30]
    assert [call[0] for call in node.calls] == ["get", "get", "get", "show", "show", "get"]
    assert node.calls[3] == ("show", "kubelet.service", ("ActiveState", "NRestarts", "RestartUSec"))


def test_a_crash_loop_that_answers_ok_between_crashes_fails():
    node = Node([(200, "ok")], [UP, dict(UP, NRestarts="4", ActiveState="activating")])
    with pytest.raises(KubeletHealthError) as caught:
        node.watch().run(retries=5, delay=2, intervals=2, startup_seconds=10)
    assert str(caught.value) == (
        "kubelet.service answered /healthz but did not stay up: over 30s its NRestarts went from 2 to 4 "
        "and it is activating (a crash loop: the kubelet exits when its container manager starts)")
    assert caught.value.result["restarts_after"] == 4


def test_a_unit_that_stopped_without_a_restart_fails():
    node = Node([(200, "ok")], [UP, dict(UP, ActiveState="failed")])
    with pytest.raises(KubeletHealthError, match="did not stay up: .* from 2 to 2 and it is failed"):
        node.watch().run(retries=0, delay=2, intervals=2, startup_seconds=10)


def test_healthz_that_never_says_ok_fails_after_every_try_with_its_last_answer():
    node = Node([(503, "kubelet crash-looping: bad checkpoint\n")] * 4, [])
    with pytest.raises(KubeletHealthError) as caught:
        node.watch().run(retries=3, delay=2, intervals=2, startup_seconds=10)
    assert str(caught.value) == ("kubelet.service did not answer ok at %s in 4 tries over 6 s; its last "
                                 "answer: HTTP 503: kubelet crash-looping: bad checkpoint" % URL)
    assert caught.value.result == {"status": 503, "content": "kubelet crash-looping: bad checkpoint\n"}
    assert node.sleeps == [2, 2, 2] and not [call for call in node.calls if call[0] == "show"]


def test_no_answer_at_all_is_said_as_such():
    node = Node([(None, "<urlopen error [Errno 111] Connection refused>")], [])
    with pytest.raises(KubeletHealthError) as caught:
        node.watch().run(retries=0, delay=2, intervals=2, startup_seconds=10)
    assert "its last answer: no answer (<urlopen error [Errno 111] Connection refused>)" in str(caught.value)
    assert caught.value.result == {"status": -1, "content": ""}


def test_healthz_that_stops_saying_ok_after_the_watch_fails():
    node = Node([(200, "ok"), (500, "[-]syncloop failed")], [UP, dict(UP)])
    with pytest.raises(KubeletHealthError) as caught:
        node.watch().run(retries=0, delay=2, intervals=1, startup_seconds=0)
    assert str(caught.value) == ("kubelet.service stayed up for 10s but /healthz at %s then said "
                                 "HTTP 500: [-]syncloop failed" % URL)
    assert caught.value.result["content"] == "[-]syncloop failed"


def test_a_systemd_without_nrestarts_is_refused_not_trusted():
    node = Node([(200, "ok")], [{"ActiveState": "active", "RestartUSec": "10s"}])
    with pytest.raises(KubeletHealthError, match="printed no NRestarts: systemd 235 or later"):
        node.watch().run(retries=0, delay=2, intervals=2, startup_seconds=10)


def test_a_restart_interval_that_is_not_a_time_span_is_refused():
    node = Node([(200, "ok")], [dict(UP, RestartUSec="infinity")])
    with pytest.raises(KubeletHealthError, match="RestartUSec=infinity: not a time span"):
        node.watch().run(retries=0, delay=2, intervals=2, startup_seconds=10)
    assert node.sleeps == []


def test_a_failing_systemctl_is_passed_on():
    node = Node([(200, "ok")], [KubeletHealthError("systemctl show kubelet.service exited 1: no bus")])
    with pytest.raises(KubeletHealthError, match="exited 1: no bus"):
        node.watch().run(retries=0, delay=2, intervals=2, startup_seconds=10)


def test_no_watch_when_it_would_last_no_time():
    node = Node([(200, "ok"), (200, "ok")], [dict(UP, RestartUSec="0"), dict(UP)])
    facts = node.watch().run(retries=0, delay=2, intervals=2, startup_seconds=0)
    assert facts["stable_seconds"] == 0 and node.sleeps == []
