"""`gpuprov trial` without nodes: its grammar, the planning that refuses before any change, the
loop's verdicts and how it puts the node back (with a converger and a Prometheus reader
that stand in for the playbook and the server), and its report in headless Chromium.

The same loop against a real Prometheus and the SSH fleet is tests/test_trial_fleet.py.
"""
import json
import math
import os

import pytest
import yaml

from gpuprov.trial import html_report, recommend, report
from gpuprov.trial import slo as slo_mod
from gpuprov.diagnose.prometheus import PrometheusError
from gpuprov.trial.run import Trial, TrialRefused
from gpuprov.trial.steps import TrialInputError, parse_steps, plan_trial, step_sharing
from test_html_report import dump_dom, needs_chromium

TTFT, E2E = slo_mod.TTFT, slo_mod.E2E
A100_MIB = 81920


def inventory(tmp_path, hosts):
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"children": {"gpus": {"hosts": hosts}}}}))
    return str(path)


CANARY = {"gpuprov_gpu_model": "A100-80GB", "gpuprov_gpu_count": 1}


# -------------------------------------------------------------------------- grammar


def test_slo_grammar():
    slo = slo_mod.parse_slo("ttft:p99<=300ms", [E2E, TTFT])
    assert (slo.metric, slo.quantile, slo.limit) == (TTFT, 0.99, 0.3)
    bare = slo_mod.parse_slo("p95 <= 1m30s", [E2E, TTFT])
    assert bare.metric is None and bare.limit == 90 and bare.applies_to(E2E) and bare.applies_to(TTFT)
    assert slo_mod.parse_slo("vllm:e2e_request_latency_seconds:p99.9<=4s", [E2E]).quantile == 0.999
    for text, reason in (("p99<300ms", "write [METRIC:]pNN<=DURATION"), ("p0<=1s", "above p0 and below p100"),
                         ("p99<=300", "is not a duration"), ("p99<=0s", "longer than 0"),
                         ("queue:p99<=1s", "add --metric queue")):
        with pytest.raises(ValueError, match=reason.replace("[", r"\[").replace("]", r"\]")):
            slo_mod.parse_slo(text, [E2E, TTFT])
    assert slo_mod.quantiles_for([slo, slo_mod.parse_slo("p90<=1s", [E2E])]) == (0.5, 0.9, 0.95, 0.99)


def test_window_and_metric_names():
    assert slo_mod.parse_window("5s") == 5 and slo_mod.parse_window("10m") == 600
    assert slo_mod.parse_window("1h2m3s") == 3723
    for text in ("500ms", "2d", "25h", "5", "", "1.5s"):
        with pytest.raises(ValueError, match="--window"):
            slo_mod.parse_window(text)
    assert slo_mod.metric_name("ttft") == TTFT and slo_mod.metric_name("my_latency_seconds") == "my_latency_seconds"
    with pytest.raises(ValueError, match="without _bucket"):
        slo_mod.metric_name("vllm:e2e_request_latency_seconds_bucket")
    with pytest.raises(ValueError, match="not a Prometheus metric name"):
        slo_mod.metric_name('x{job="a"}')


def test_steps_rise_and_stay_within_the_planner_limit():
    assert parse_steps("2, 4,8") == [2, 4, 8]
    for text in ("4,2", "1,2", "2,2", "2,129", "two"):
        with pytest.raises(ValueError, match="--steps"):
            parse_steps(text)


def test_each_strategy_raises_its_own_replicas():
    assert step_sharing("n", None, 4) == {"strategy": "time-slicing", "replicas": 4}
    opts = {"strategy": "exclusive", "device_plugin": {"rename_by_default": True}}
    assert step_sharing("n", opts, 2) == {
        "strategy": "time-slicing", "replicas": 2, "device_plugin": {"rename_by_default": True}}
    assert step_sharing("n", {"strategy": "mps", "replicas": 2, "mps": {"provider": "host"}}, 8)["replicas"] == 8
    assert step_sharing("n", {"strategy": "mig", "mig": {"config": "all-3g.40gb"}}, 2)["time_slicing_replicas"] == 2
    with pytest.raises(TrialInputError, match="split count"):
        step_sharing("n", {"strategy": "hami"}, 2)


# ------------------------------------------------------------ planning, before any change


def test_every_step_is_planned_through_an_inventory_source_of_its_own(tmp_path):
    path = inventory(tmp_path, {"canary": dict(CANARY, gpuprov_sharing={"strategy": "exclusive"}),
                                "t4": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1}})
    plan = plan_trial([path], "canary", [2, 4])
    try:
        assert plan.start["device_plugin"]["config_name"] == "exclusive"
        assert [(s.replicas, s.config_name, s.plan["resources"]) for s in plan.steps] == [
            (2, "ts-2", {"nvidia.com/gpu": 2}), (4, "ts-4", {"nvidia.com/gpu": 4})]
        assert plan.steps[0].changes(plan.start) == ["label-node nvidia.com/device-plugin.config=ts-2"]
        # What the step's source holds is what `gpuprov plan -i INV -i SOURCE` plans.
        source = plan.steps[1].source
        assert yaml.safe_load(open(source + "/host_vars/canary.yml")) == {
            "gpuprov_sharing": {"strategy": "time-slicing", "replicas": 4}}
        from gpuprov.planning import plan_inventory
        both = plan_inventory([path, source]).nodes
        assert both["canary"]["device_plugin"]["config_name"] == "ts-4"
        assert both["t4"]["device_plugin"]["config_name"] == "exclusive"  # the rest untouched
    finally:
        plan.cleanup()
    assert not (tmp_path / source).exists()


def test_the_steps_sources_can_be_kept_for_gpuprov_plan(gpuprov, tmp_path):
    path = inventory(tmp_path, {"canary": CANARY})
    kept = tmp_path / "steps"
    plan = plan_trial([path], "canary", [2, 4], steps_dir=str(kept))
    plan.cleanup()
    assert sorted(os.listdir(kept)) == ["step-2", "step-4"] and oct(os.stat(kept).st_mode & 0o777) == "0o700"
    code, out, err = gpuprov("plan", "-i", path, "-i", str(kept / "step-4"), "-o", "json")
    assert code == 0, err
    assert json.loads(out)["nodes"]["canary"]["device_plugin"]["config_name"] == "ts-4"
    with pytest.raises(TrialInputError, match="exists; give a folder that does not exist yet"):
        plan_trial([path], "canary", [2], steps_dir=str(kept))


@pytest.mark.parametrize("node,steps,expected", [
    ("nosuch", [2], "--node nosuch: no such host in the inventory"),
    ("cp", [2], "--node cp: not a GPU node of the inventory"),
    ("t4", [2, 64], "step 64: t4: gpuprov_sharing.replicas"),
    ("ts4", [2, 4], "--steps: ts4 already gives 4 replica(s) per device"),
    ("hami", [2], "split count, not by replicas"),
    ("../x", [2], "give the node's inventory host name"),
])
def test_a_step_that_does_not_plan_or_a_node_that_is_not_a_gpu_node_is_refused(tmp_path, node, steps, expected):
    path = inventory(tmp_path, {"t4": {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1}, "cp": {"ansible_host": "x"},
                                "ts4": dict(CANARY, gpuprov_sharing={"strategy": "time-slicing", "replicas": 4}),
                                "hami": dict(CANARY, gpuprov_sharing={"strategy": "hami"})})
    with pytest.raises(TrialInputError) as caught:
        plan_trial([path], node, steps)
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems


def test_bad_input_is_exit_2_before_anything_is_read(gpuprov, tmp_path):
    path = inventory(tmp_path, {"canary": CANARY})
    code, out, err = gpuprov("trial", "-i", path, "--node", "canary", "--slo", "p99<300ms", "--window", "2d",
                             "--steps", "8,4", "--prometheus", "ftp://x", "--memory-margin", "120%")
    assert code == 2 and out == ""
    assert "gpuprov trial: 5 problem(s); nothing was changed:" in err
    for text in ("--steps:", "--window:", "--memory-margin:", "--slo:", "--prometheus:"):
        assert text in err, err


def test_a_prometheus_that_does_not_answer_is_refused_before_any_change(gpuprov, tmp_path):
    from prometheus_harness import free_port

    path = inventory(tmp_path, {"canary": CANARY})
    code, out, err = gpuprov("trial", "-i", path, "--node", "canary", "--slo", "p99<=300ms",
                             "--prometheus", "http://127.0.0.1:%d" % free_port())
    assert code == 2, out + err
    assert "cannot connect" in err and "(nothing was changed)" in err


# ------------------------------------------------------------------ the loop, with stand-ins


class Outcome:
    def __init__(self, ok=True, changed=False, detail="-"):
        self.ok, self.changed, self.detail = ok, changed, detail


class FakeConverger:
    """Records each run: ('dry run' | replicas | 'inventory plan'); ``fail_at``: runs that fail."""

    node = "canary"

    def __init__(self, plan, fail_at=(), drifted=False, on_run=None):
        self.by_source = dict((s.source, s.replicas) for s in plan.steps)
        self.runs, self.fail_at, self.drifted, self.on_run = [], set(fail_at), drifted, on_run
        self.replicas = 1

    def run(self, source=None, check=False):
        what = "dry run" if check else self.by_source.get(source, "inventory plan")
        self.runs.append(what)
        if self.on_run:
            self.on_run(what)
        if check:
            return Outcome(changed=self.drifted, detail="localhost changed: Set each node's device-plugin config label")
        if what in self.fail_at:
            return Outcome(ok=False, detail="canary failed: Plan the node: boom")
        self.replicas = 1 if what == "inventory plan" else what
        return Outcome(changed=True)

    def stop_running(self):
        pass


class FakeReader:
    """Prometheus as the scenario says: ``p99(replicas)`` seconds for ml/chat's TTFT and
    ``used(replicas)`` MiB on GPU 0; ``down_at``: replicas at which the server is gone."""

    metrics = (TTFT,)
    namespace = None

    def __init__(self, converger, p99, used, down_at=None, requests=100.0):
        self.converger, self.p99, self.used, self.down_at, self.requests = converger, p99, used, down_at, requests
        self.latency_reads = []

    def _check(self):
        if self.converger.replicas == self.down_at:
            raise PrometheusError("http://prometheus:9090: cannot connect: [Errno 111] Connection refused")

    def gpus(self, end, seconds, memory_mib):
        self._check()
        used = self.used(self.converger.replicas)
        free = A100_MIB - used
        return [{"gpu": 0, "uuid": "GPU-0", "used_mib": used, "free_mib": free, "total_mib": A100_MIB,
                 "free_ratio": free / float(A100_MIB), "sm_active": 0.5, "sm_metric": "DCGM_FI_PROF_SM_ACTIVE"}]

    def pods(self, end, seconds):
        return [{"pod": "ml/chat-%d" % n, "gpu": 0, "used_mib": 8192.0} for n in range(self.converger.replicas)]

    def latency(self, end, seconds):
        self._check()
        self.latency_reads.append(self.converger.replicas)
        p99 = self.p99(self.converger.replicas)
        return {("ml", "org/chat"): {"requests": {TTFT: self.requests},
                                     "quantiles": {TTFT: {0.5: p99 / 3, 0.95: p99 * 0.8, 0.99: p99}}}}


class Clock:
    def __init__(self):
        self.now = 1_800_000_000.0

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture
def trial_plan(tmp_path):
    plan = plan_trial([inventory(tmp_path, {"canary": CANARY})], "canary", [2, 4, 8])
    yield plan
    plan.cleanup()


def run_trial(plan, converger, reader, slo="ttft:p99<=100ms", margin=0.1):
    clock, said = Clock(), []
    trial = Trial(plan, converger, reader, [slo_mod.parse_slo(slo, [TTFT])], 5, margin, said.append,
                  clock=clock.time, sleep=clock.sleep)
    return trial.run(), said


def test_the_first_step_that_breaks_the_slo_stops_the_trial_and_the_last_passing_one_stays(trial_plan):
    converger = FakeConverger(trial_plan)
    reader = FakeReader(converger, p99=lambda r: 0.02 * r, used=lambda r: 4096 * r)
    result, said = run_trial(trial_plan, converger, reader)
    assert converger.runs == ["dry run", 2, 4, 8, 4]
    assert [r.verdict for r in result.steps] == ["pass", "pass", "slo"]
    assert result.steps[2].reasons == ["ml/org/chat: ttft p99 160ms > 100ms"]
    assert result.outcome == "found" and result.best.replicas == 4 and result.left_at.replicas == 4
    assert report.recommendation(result)["gpu_memory_utilization"] == 0.22
    assert "canary: putting it back to 4 replicas, the last step that passed" in said


def test_when_every_step_passes_the_node_stays_at_the_last_without_another_converge(trial_plan):
    converger = FakeConverger(trial_plan)
    result, _ = run_trial(trial_plan, converger, FakeReader(converger, lambda r: 0.01, lambda r: 1024))
    assert converger.runs == ["dry run", 2, 4, 8] and result.best.replicas == 8 and result.restored is None


def test_memory_is_judged_first_and_a_short_step_reads_no_latency(trial_plan):
    converger = FakeConverger(trial_plan)
    reader = FakeReader(converger, p99=lambda r: 0.01, used=lambda r: 20480 * r)  # 4 x 20 GiB: nothing free
    result, _ = run_trial(trial_plan, converger, reader)
    assert [r.verdict for r in result.steps] == ["pass", "memory"]
    assert result.steps[1].reasons == ["GPU 0: 0% free (0.0 of 80.0 GiB), below the 10% margin"]
    assert reader.latency_reads == [1, 2]  # the start and step 2; never step 4
    assert converger.runs == ["dry run", 2, 4, 2]


def test_no_step_passing_puts_the_node_back_and_fit_packs_the_pods_of_the_first_step(trial_plan):
    converger = FakeConverger(trial_plan)
    reader = FakeReader(converger, p99=lambda r: 0.5, used=lambda r: 8192 * r)
    result, _ = run_trial(trial_plan, converger, reader)
    assert result.outcome == "none" and converger.runs == ["dry run", 2, "inventory plan"]
    assert result.left_at == "start" and result.restored is True
    fit = recommend.fit_proposal(trial_plan.start, report.fit_source(result).pods)
    assert fit["method"] == "mig" and sorted(w["name"] for w in fit["workloads"]) == ["ml/chat-0", "ml/chat-1"]
    text = report.text(result, fit)
    assert "No step passed" in text and "fit isolates the same pods with MIG" in text
    assert "canary is back as it was: its inventory plan (exclusive)." in text


def test_a_failed_converge_puts_the_node_back_where_it_started(trial_plan):
    converger = FakeConverger(trial_plan, fail_at={4})
    result, _ = run_trial(trial_plan, converger, FakeReader(converger, lambda r: 0.01, lambda r: 1024))
    assert result.outcome == "error" and "step 4: the converge failed: canary failed: Plan the node: boom" in result.error
    assert converger.runs == ["dry run", 2, 4, "inventory plan"] and result.left_at == "start"


def test_prometheus_gone_mid_trial_puts_the_node_back_and_names_the_error(trial_plan):
    converger = FakeConverger(trial_plan)
    result, _ = run_trial(trial_plan, converger, FakeReader(converger, lambda r: 0.01, lambda r: 1024, down_at=4))
    assert result.outcome == "error" and "cannot connect" in result.error
    assert converger.runs == ["dry run", 2, 4, "inventory plan"]


def test_a_restore_that_fails_says_exactly_what_to_do(trial_plan):
    converger = FakeConverger(trial_plan, fail_at={4, "inventory plan"})
    result, _ = run_trial(trial_plan, converger, FakeReader(converger, lambda r: 0.01, lambda r: 1024))
    assert result.restored is False
    assert result.notes == ["canary could NOT be put back: canary failed: Plan the node: boom. It may be left at "
                            "4 replicas (ts-4); converge it with gpuprov apply -l canary (its inventory plan)"]
    assert "ATTENTION: canary could NOT be put back" in report.text(result)


def test_no_traffic_in_a_window_is_an_error_not_a_verdict(trial_plan):
    converger = FakeConverger(trial_plan)
    reader = FakeReader(converger, lambda r: 0.01, lambda r: 1024)
    reader.requests = 100.0

    def silence(what):
        if what == 2:
            reader.requests = 0.0
    converger.on_run = silence
    result, _ = run_trial(trial_plan, converger, reader)
    assert result.outcome == "error" and "no workload on canary served a request" in result.error


def test_a_node_not_as_its_inventory_plans_it_is_refused_before_any_change(trial_plan):
    converger = FakeConverger(trial_plan, drifted=True)
    with pytest.raises(TrialRefused, match="not as its inventory plans it; a dry run would change"):
        run_trial(trial_plan, converger, FakeReader(converger, lambda r: 0.01, lambda r: 1024))
    assert converger.runs == ["dry run"]


def test_a_start_without_requests_or_gpu_series_is_refused(trial_plan):
    converger = FakeConverger(trial_plan)
    reader = FakeReader(converger, lambda r: 0.01, lambda r: 1024, requests=0.0)
    with pytest.raises(TrialRefused, match="no request in the last 5s"):
        run_trial(trial_plan, converger, reader)
    reader = FakeReader(converger, lambda r: 0.01, lambda r: 1024)
    reader.gpus = lambda end, seconds, memory: []
    with pytest.raises(TrialRefused, match="no dcgm-exporter series for GPU 0 of the node"):
        run_trial(trial_plan, converger, reader)
    assert converger.runs == []


def test_gpu_series_gone_at_a_step_is_an_error_not_a_pass(trial_plan):
    converger = FakeConverger(trial_plan)
    reader = FakeReader(converger, lambda r: 0.01, lambda r: 1024)
    original = reader.gpus
    reader.gpus = lambda end, seconds, memory: [] if converger.replicas == 4 else original(end, seconds, memory)
    result, _ = run_trial(trial_plan, converger, reader)
    assert result.outcome == "error" and "no dcgm-exporter series for GPU 0 of canary" in result.error
    assert converger.runs == ["dry run", 2, 4, "inventory plan"]


def test_ctrl_c_in_a_window_stops_at_once_and_puts_the_node_back(trial_plan):
    import os
    import signal

    converger = FakeConverger(trial_plan)
    clock = Clock()
    ticks = []

    def sleep(seconds):
        if converger.replicas == 4:
            ticks.append(seconds)
        if len(ticks) == 30:
            os.kill(os.getpid(), signal.SIGINT)  # the handler runs before the next bytecode
        clock.sleep(seconds)
    said = []
    trial = Trial(trial_plan, converger, FakeReader(converger, lambda r: 0.01, lambda r: 1024),
                  [slo_mod.parse_slo("p99<=1s", [TTFT])], 60, 0.1, said.append, clock=clock.time, sleep=sleep)
    result = trial.run()
    assert result.outcome == "interrupted" and converger.runs == ["dry run", 2, 4, "inventory plan"]
    assert result.steps[1].verdict == "not run" and result.left_at == "start"
    assert "interrupted" in said


# ---------------------------------------------------------------------------- the report


def test_json_keeps_infinity_and_missing_values_apart(trial_plan):
    converger = FakeConverger(trial_plan)
    result, _ = run_trial(trial_plan, converger, FakeReader(converger, lambda r: math.inf if r == 8 else 0.01,
                                                            lambda r: 1024))
    data = json.loads(json.dumps(report.as_dict(result)))
    step8 = [s for s in data["steps"] if s["step"] == 8][0]
    assert step8["workloads"][0]["latency_seconds"][TTFT]["p99"] == "+Inf"
    assert step8["reasons"] == ["ml/org/chat: ttft p99 +Inf > 100ms"]


def test_report_text_from_the_input_is_escaped(trial_plan):
    converger = FakeConverger(trial_plan)
    reader = FakeReader(converger, lambda r: 0.01 * r, lambda r: 1024)
    original = reader.latency

    def hostile(end, seconds):
        data = original(end, seconds)
        return {("<img src=x onerror=alert(1)>", "</script>"): data[("ml", "org/chat")]}
    reader.latency = hostile
    result, _ = run_trial(trial_plan, converger, reader)
    page = html_report.render(result)
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "</script>/" not in page.split("<body>", 1)[1]


@needs_chromium
def test_chromium_renders_the_latency_and_memory_charts(trial_plan, tmp_path):
    converger = FakeConverger(trial_plan)
    result, _ = run_trial(trial_plan, converger, FakeReader(converger, lambda r: 0.02 * r, lambda r: 4096 * r))
    page = tmp_path / "trial.html"
    page.write_text(html_report.render(result))
    html_tag, console = dump_dom(page, tmp_path / "profile")
    # p99 and p95 of one workload, and the memory line; the SLO limit and the margin.
    assert 'data-rendered="3"' in html_tag and 'data-limits="2"' in html_tag, html_tag
    assert "data-errors" not in html_tag and console == []


def test_the_command_shares_the_inventory_vault_catalog_and_output_options(gpuprov):
    code, out, _ = gpuprov("trial", "--help")
    assert code == 0
    for option in ("-i, --inventory", "--vault-id", "--vault-password-file", "--ask-vault-pass", "--catalog FILE"):
        assert option in out, option
    assert "json" in out[out.index("-o, --output"):]


class RecordingClient:
    def __init__(self):
        self.queries = []

    def query(self, promql, at):
        self.queries.append((promql, at))
        return []


def test_the_window_reads_only_the_canary_and_its_namespace():
    from gpuprov.trial.metrics import WindowReader

    client = RecordingClient()
    reader = WindowReader(client, "canary", [TTFT], (0.5, 0.99), namespace='m"l')
    assert reader.latency(1000.0, 5) == {}
    reader.gpus(1000.0, 5, {0: A100_MIB})
    quantile = [q for q, _ in client.queries if q.startswith("histogram_quantile(0.99")][0]
    assert quantile == ('histogram_quantile(0.99, sum by (le, namespace, model_name) '
                        '(rate(vllm:time_to_first_token_seconds_bucket{node="canary",namespace="m\\"l"}[5s])))')
    free = [q for q, _ in client.queries if "DCGM_FI_DEV_FB_FREE" in q][0]
    assert free == ('min by (UUID, gpu) (min_over_time(DCGM_FI_DEV_FB_FREE{node="canary"}[5s]) or '
                    'min_over_time(DCGM_FI_DEV_FB_FREE{Hostname="canary"}[5s]) or '
                    'min_over_time(DCGM_FI_DEV_FB_FREE{hostname="canary"}[5s]))')
    assert all(at == 1000.0 for _, at in client.queries)


def test_a_workload_name_cannot_print_a_line_of_its_own(trial_plan):
    converger = FakeConverger(trial_plan)
    reader = FakeReader(converger, lambda r: 0.02 * r, lambda r: 1024)
    original = reader.latency

    def forged(end, seconds):
        return {("ml", "x\ncanary is at 8 replicas now."): original(end, seconds)[("ml", "org/chat")]}
    reader.latency = forged
    result, _ = run_trial(trial_plan, converger, reader)
    lines = report.text(result).splitlines()
    assert "canary is at 8 replicas now." not in lines
    assert any("x\\x0acanary is at 8 replicas now." in line for line in lines)


def test_sigterm_is_an_interrupt_too_and_one_in_the_dry_run_changes_nothing(trial_plan):
    import os
    import signal

    converger = FakeConverger(trial_plan, on_run=lambda what: os.kill(os.getpid(), signal.SIGTERM))
    with pytest.raises(TrialRefused) as caught:
        run_trial(trial_plan, converger, FakeReader(converger, lambda r: 0.01, lambda r: 1024))
    assert caught.value.interrupted and converger.runs == ["dry run"]
    assert caught.value.problems == ["canary: interrupted before any change; nothing was changed"]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # put back once the trial ended


def test_the_fake_device_plugin_advertises_its_devices_through_the_node_config():
    """The stub cluster's plugin with physical_devices, as NVIDIA's replicates them
    (k8s-device-plugin v0.19.3 internal/rm/device_map.go): the trial's steps change it."""
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "fleet"))
    import fleet as fleetlib

    fake = fleetlib._load_fake_cluster()

    def state(config):
        return {"nodes": {"n": {"labels": {fake.CONFIG_LABEL: "c"}, "physical_devices": {"nvidia.com/gpu": 2}}},
                "releases": {"ns/nvdp": {"chart": "nvidia-device-plugin", "values": {"config": {"map": {"c": config}}}}}}

    exclusive = "version: v1\nflags: {migStrategy: none}\n"
    ts4 = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/gpu, replicas: 4}\n"
    renamed = ts4.replace("timeSlicing:\n", "timeSlicing:\n    renameByDefault: true\n")
    assert fake.advertised(state(exclusive), "n") == {"nvidia.com/gpu": 2}
    assert fake.advertised(state(ts4), "n") == {"nvidia.com/gpu": 8}
    assert fake.advertised(state(renamed), "n") == {"nvidia.com/gpu.shared": 8}
    with pytest.raises(ValueError, match="subset of devices is not implemented"):
        fake.advertised(state(ts4.replace("replicas: 4}", "replicas: 4, devices: [0]}")), "n")
