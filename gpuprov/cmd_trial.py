"""`gpuprov trial`: raise sharing on one canary node step by step until tail latency breaks the SLO."""
import sys

import click

from gpuprov import options, render
from gpuprov.errors import EXIT_FAILED, EXIT_OK, fail_bad_input

EXIT_INTERRUPTED = 130  # as `gpuprov` exits on a Ctrl-C (cli.main)


def _parse_margin(text):
    value = str(text).strip()
    number = value[:-1] if value.endswith("%") else value
    try:
        margin = float(number) / (100.0 if value.endswith("%") else 1.0)
    except ValueError:
        raise ValueError("--memory-margin: %r: a percentage (10%%) or a fraction (0.1)" % value[:40])
    if not 0 <= margin < 1:
        raise ValueError("--memory-margin: %r: from 0%% to below 100%%" % value[:40])
    return margin


@click.command()
@options.inventory_option
@options.vault_options
@options.catalog_option
@click.option("--node", required=True, metavar="HOST", help="The canary: a GPU node of the inventory (its host name).")
@click.option("--slo", "slos", multiple=True, required=True, metavar="[METRIC:]pNN<=DURATION",
              help="The objective each step must keep, e.g. 'p99<=300ms' (every histogram read) or "
                   "'ttft:p95<=200ms'; METRIC is ttft, e2e or a --metric. Repeatable.")
@click.option("--steps", default="2,4,8", show_default=True, metavar="N,N,...",
              help="Replicas per GPU to try, rising (time-slicing; MPS replicas on MPS nodes; each MIG device "
                   "time-sliced on MIG nodes).")
@click.option("--window", default="10m", show_default=True, metavar="DURATION",
              help="How long each step is measured, once the node advertises its slots (e.g. 5s, 10m, 1m30s).")
@click.option("--prometheus", "prometheus_url", required=True, metavar="URL",
              help="Prometheus scraping the workloads (vLLM) and dcgm-exporter, e.g. http://prometheus:9090.")
@click.option("--metric", "metrics", multiple=True, metavar="HISTOGRAM",
              help="A latency histogram (seconds) to read instead of vLLM's request latency and time to first "
                   "token (e2e, ttft). Repeatable.")
@click.option("-n", "--namespace", metavar="NAMESPACE", help="Only the workloads of this namespace count.")
@click.option("--memory-margin", default="10%", show_default=True, metavar="PERCENT",
              help="GPU memory that must stay free on every GPU of the node; a step leaving less fails.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False), help="As for gpuprov apply: drain and the cluster side.")
@click.option("--context", "kube_context", help="kubeconfig context.")
@click.option("-w", "--write", "write_path", metavar="FILE",
              help="Write the host_vars snippet with the replicas found to FILE (atomically).")
@click.option("--report", "report_path", metavar="FILE", help="Write a self-contained HTML report to FILE.")
@click.option("--steps-dir", metavar="DIR", help="Keep each step's inventory source in DIR/step-N (DIR must not exist): "
              "`gpuprov plan -i INVENTORY -i DIR/step-N` prints the plan the step converges.")
@options.output_option(["table", "json"], help_text="table: the steps and the recommendation for people (progress on "
                       "stderr); json: the trial as one JSON document.")
def trial(inventory, vault, catalog_file, node, slos, steps, window, prometheus_url, metrics, namespace,
          memory_margin, kubeconfig, kube_context, write_path, report_path, steps_dir, output):
    """Find how many replicas per GPU one canary node takes before tail latency breaks the SLO.

    Plans every step first (the node's sharing with N replicas; the rest of the inventory
    untouched), measures the start from Prometheus, and checks with a dry run that the node
    is as its inventory plans it, so that it can be put back. Nothing changes before that.
    Then, per step: converges that node only (the site playbook as `gpuprov apply -l NODE`
    runs it: drain rules, fail closed, the node's device-plugin config label), waits for the
    window, and reads the workloads' p50/p95/p99 (histogram_quantile over the window), their
    GPU memory and SM activity. It stops at the first step that breaks an SLO or leaves less
    than the memory margin free, and puts the node at the last step that passed, or back
    where it started.

    \b
    The workloads' series must carry the pod's node name as a `node` label (relabel
    __meta_kubernetes_pod_node_name), as must dcgm-exporter's (or its Hostname). The trial
    measures the load the workloads serve; it starts no pod and generates no traffic.

    Ctrl-C (or SIGTERM) or a failure at any step puts the node back where it started and
    says so.

    Exit status: 0 a density passed (the node is at it); 1 none passed, or a step failed
    (the node is back as it was); 2 bad input, nothing changed; 130 interrupted (the node is
    back as it was).
    """
    from gpuprov.diagnose.prometheus import Client, check_url
    from gpuprov.trial import slo as slo_mod
    from gpuprov.trial.steps import TrialInputError, parse_steps, plan_trial

    problems = []
    try:
        step_list = parse_steps(steps)
    except ValueError as exc:
        problems.append(str(exc))
    try:
        window_seconds = slo_mod.parse_window(window)
    except ValueError as exc:
        problems.append(str(exc))
    try:
        margin = _parse_margin(memory_margin)
    except ValueError as exc:
        problems.append(str(exc))
    histograms = []
    for text in metrics or slo_mod.DEFAULT_METRICS:
        try:
            name = slo_mod.metric_name(text)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if name not in histograms:
            histograms.append(name)
    if len(histograms) > slo_mod.MAX_METRICS:
        problems.append("--metric: %d histograms; at most %d" % (len(histograms), slo_mod.MAX_METRICS))
    objectives = []
    if len(slos) > slo_mod.MAX_SLOS:
        problems.append("--slo: %d objectives; at most %d" % (len(slos), slo_mod.MAX_SLOS))
    for text in slos[:slo_mod.MAX_SLOS]:
        try:
            objectives.append(slo_mod.parse_slo(text, histograms))
        except ValueError as exc:
            problems.append(str(exc))
    try:
        url = check_url(prometheus_url)
    except ValueError as exc:
        problems.append("--prometheus: %s" % exc)
    if problems:
        fail_bad_input(problems, header="gpuprov trial: %d problem(s); nothing was changed:" % len(problems))

    try:
        plan = plan_trial(inventory, node, step_list, vault=vault.reader_options(), catalog_file=catalog_file,
                          steps_dir=steps_dir)
    except TrialInputError as exc:
        fail_bad_input(exc.problems, header="gpuprov trial: nothing was changed:")
    try:
        code = _run(plan, inventory, vault, catalog_file, kubeconfig, kube_context, Client(url), histograms,
                    objectives, window_seconds, margin, namespace, write_path, report_path, output)
    finally:
        plan.cleanup()
    sys.exit(code)


def _say(text):
    click.echo("gpuprov trial: %s" % text, err=True)


def _run(plan, inventory, vault, catalog_file, kubeconfig, kube_context, client, histograms, objectives,
         window_seconds, margin, namespace, write_path, report_path, output):
    from gpuprov.output_files import write_atomically
    from gpuprov.trial import html_report, recommend, report
    from gpuprov.trial import slo as slo_mod
    from gpuprov.trial.converge import NodeConverger
    from gpuprov.trial.metrics import WindowReader
    from gpuprov.trial.run import OUTCOME_FOUND, OUTCOME_INTERRUPTED, OUTCOME_NONE, Trial, TrialRefused

    for step in plan.steps:
        _say("step %d planned: %s, advertises %s; changes: %s%s" % (
            step.replicas, step.config_name or "-", step.resources_text(), "; ".join(step.changes(plan.start)) or "-",
            " (gpuprov plan -i ... -i %s)" % step.source if plan.keep else ""))
    converger = NodeConverger(inventory, plan.node, vault, catalog_file, kubeconfig, kube_context, stdout=sys.stderr)
    reader = WindowReader(client, plan.node, histograms, slo_mod.quantiles_for(objectives), namespace)
    runner = Trial(plan, converger, reader, objectives, window_seconds, margin, _say)
    try:
        result = runner.run()
    except TrialRefused as exc:
        if exc.interrupted:
            for problem in exc.problems:
                click.echo("gpuprov trial: %s" % problem, err=True)
            return EXIT_INTERRUPTED
        fail_bad_input(exc.problems, header="gpuprov trial: %s:" % plan.node)

    fit = None
    if result.outcome == OUTCOME_NONE:
        source = report.fit_source(result)
        fit = recommend.fit_proposal(plan.start, source.pods if source else [])
    written = None
    if write_path and result.outcome == OUTCOME_FOUND:
        try:
            write_atomically(write_path, recommend.host_vars_snippet(
                plan.node, result.best, "--slo %s" % " --slo ".join(s.text for s in objectives)))
            written = write_path
        except OSError as exc:
            result.notes.append("%s: cannot write: %s" % (write_path, exc.strerror or exc))
    if report_path:
        try:
            write_atomically(report_path, html_report.render(result, fit))
            result.notes.append("Report: %s" % report_path)
        except OSError as exc:
            result.notes.append("%s: cannot write the report: %s" % (report_path, exc.strerror or exc))
    if output == "json":
        click.echo(render.to_json(report.as_dict(result, fit), depth=1))
    else:
        click.echo(report.text(result, fit, written))
    if result.outcome == OUTCOME_FOUND and result.restored is not False:
        return EXIT_OK
    if result.outcome == OUTCOME_INTERRUPTED:
        return EXIT_INTERRUPTED
    return EXIT_FAILED
