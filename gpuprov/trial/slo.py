"""What a trial judges by: service level objectives on latency histograms, and its window.

An SLO is ``[METRIC:]pNN<=DURATION``: ``p99<=300ms``, ``ttft:p95<=200ms``,
``e2e:p99<=4s``, ``vllm:e2e_request_latency_seconds:p99<=4s``. A bare one applies to every
histogram the trial reads. Durations are Prometheus-style: ``300ms``, ``2s``, ``1m30s``.
Histograms are read in seconds, Prometheus' base unit (and vLLM's: every vLLM latency
histogram name ends in ``_seconds``).
"""
import math
import re

# vLLM's request latency histograms (vllm-project/vllm vllm/v1/metrics/loggers.py,
# PrometheusStatLogger, read at commit 005a810bc40f, release UNVERIFIED; the same names in the
# 0.9.1 docs' metrics list): end-to-end request latency and time to first token, in seconds.
E2E = "vllm:e2e_request_latency_seconds"
TTFT = "vllm:time_to_first_token_seconds"
DEFAULT_METRICS = (E2E, TTFT)
ALIASES = {"e2e": E2E, "ttft": TTFT}
SHORT_NAMES = dict((name, alias) for alias, name in ALIASES.items())
# The quantiles every step records; an SLO on another one adds it.
RECORDED_QUANTILES = (0.5, 0.95, 0.99)

# A Prometheus metric name (data model: [a-zA-Z_:][a-zA-Z0-9_:]*).
_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_SLO = re.compile(r"^(?:(?P<metric>[a-zA-Z_:][a-zA-Z0-9_:]*):)?p(?P<q>\d{1,2}(?:\.\d{1,3})?)\s*<=\s*(?P<limit>\S+)$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
MAX_WINDOW_SECONDS = 24 * 3600
MAX_METRICS = 8
MAX_SLOS = 16


def parse_duration(text, where):
    """'300ms' -> 0.3, '1m30s' -> 90.0: one or more number+unit parts (ms, s, m, h).
    ValueError naming ``where`` on anything else."""
    value = str(text).strip()
    position, total = 0, 0.0
    for match in _DURATION_PART.finditer(value):
        if match.start() != position:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position = match.end()
    if not value or position != len(value) or len(value) > 32:
        raise ValueError("%s: %r is not a duration; use a number and a unit of ms, s, m or h (300ms, 5s, 10m, "
                         "1m30s)" % (where, value[:40]))
    if total <= 0:
        raise ValueError("%s: %r: must be longer than 0" % (where, value))
    return total


def parse_window(text):
    """The measuring window of each step, in whole seconds (1s to 24h)."""
    seconds = parse_duration(text, "--window")
    if seconds != int(seconds) or seconds < 1:
        raise ValueError("--window: %r: whole seconds, at least 1s (Prometheus range selectors and a scrape interval "
                         "below that measure nothing)" % text)
    if seconds > MAX_WINDOW_SECONDS:
        raise ValueError("--window: %r: at most 24h" % text)
    return int(seconds)


def metric_name(text, where="--metric"):
    """A histogram's name (an alias ttft/e2e, or a Prometheus metric name without _bucket)."""
    name = ALIASES.get(text, text)
    if not _METRIC_NAME.match(name) or len(name) > 200:
        raise ValueError("%s: %r is not a Prometheus metric name" % (where, text[:80]))
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix):
            raise ValueError("%s: %r: give the histogram's name without %s (e.g. %s)"
                             % (where, text, suffix, name[:-len(suffix)]))
    return name


class Slo:
    """One objective: ``quantile`` (0..1) of ``metric`` (None: every histogram read) at most ``limit`` seconds."""

    __slots__ = ("metric", "quantile", "limit", "text")

    def __init__(self, metric, quantile, limit, text):
        self.metric, self.quantile, self.limit, self.text = metric, quantile, limit, text

    def applies_to(self, metric):
        return self.metric is None or self.metric == metric

    def as_dict(self):
        return {"text": self.text, "metric": self.metric, "quantile": self.quantile, "limit_seconds": self.limit}


def parse_slo(text, metrics):
    """'ttft:p99<=300ms' -> Slo. ``metrics``: the histograms the trial reads (a named metric
    must be one of them)."""
    raw = str(text).strip()
    match = _SLO.match(raw)
    if not match:
        raise ValueError("--slo: %r: write [METRIC:]pNN<=DURATION, e.g. p99<=300ms or ttft:p95<=200ms" % raw[:80])
    quantile = round(float(match.group("q")) / 100.0, 6)
    if not 0 < quantile < 1:
        raise ValueError("--slo: %r: the quantile must be above p0 and below p100" % raw)
    limit = parse_duration(match.group("limit"), "--slo %s" % raw)
    metric = None
    if match.group("metric"):
        metric = metric_name(match.group("metric"), "--slo %s" % raw)
        if metric not in metrics:
            raise ValueError("--slo: %r: the trial reads %s; add --metric %s to judge by it"
                             % (raw, ", ".join(short_name(m) for m in metrics), match.group("metric")))
    return Slo(metric, quantile, limit, raw)


def quantiles_for(slos):
    """The quantiles each step reads: p50, p95, p99 and those the SLOs name."""
    return tuple(sorted(set(RECORDED_QUANTILES) | set(s.quantile for s in slos)))


def quantile_key(quantile):
    """0.99 -> 'p99', 0.995 -> 'p99.5'."""
    return "p%s" % ("%g" % round(quantile * 100, 3))


def short_name(metric):
    return SHORT_NAMES.get(metric, metric)


def breaches(slos, latencies):
    """The SLO texts a workload's latencies break: ``latencies`` {metric: {quantile: seconds}}.
    A quantile Prometheus could not compute (no request in the window) breaks the SLO: a step
    is judged on requests it served, never on silence."""
    broken = []
    for slo in slos:
        for metric, values in sorted(latencies.items()):
            if not slo.applies_to(metric):
                continue
            value = values.get(slo.quantile)
            if value is None or math.isnan(value) or value > slo.limit:
                broken.append("%s %s %s" % (short_name(metric), quantile_key(slo.quantile),
                                            "no data" if value is None or math.isnan(value) else
                                            "%s > %s" % (duration_text(value), duration_text(slo.limit))))
    return broken


def duration_text(seconds):
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    if math.isinf(seconds):
        return "+Inf"
    if seconds < 1:
        return "%dms" % round(seconds * 1000)
    return "%.2fs" % seconds
