"""A trial as one self-contained HTML page (`gpuprov trial --report FILE`).

Per workload and histogram: p99 and p95 against the replicas of each step, with the SLO's
limit as a line; then the least free GPU memory of each step against the margin. Inline SVG
and CSS only, with a Content-Security-Policy that forbids every fetch, like the diagnose
report; every text that came from Prometheus or the inventory is escaped.
"""
import html
import math

from gpuprov.diagnose.html_report import COLOURS
from gpuprov.trial import slo as slo_mod
from gpuprov.trial.report import recommendation, where_now
from gpuprov.trial.run import workload_name
from gpuprov.trial.steps import advertised_replicas

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 220, 56, 16, 14, 36
# p99, p95 and memory lines; red is the limits' colour only.
P99, P95, MEMORY = COLOURS[0], COLOURS[4], COLOURS[2]

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1300px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:28px}
h3{font-size:15px;margin:12px 0 4px}.charts{display:flex;flex-wrap:wrap;gap:16px}.muted{color:#777;font-size:13px}
.verdict{border-left:4px solid #2ca02c;padding:4px 12px;margin:8px 0;background:#fafafa}.verdict.bad{border-color:#d62728}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
svg text{font-size:11px;fill:#444}.legend span{margin-right:12px;font-size:12px}pre{background:#f4f4f4;padding:8px}
"""

# Records script errors in the page itself (a headless browser's DOM dump shows them) and
# marks the page rendered with the number of chart lines found in the live DOM.
_SCRIPT = """
window.gpuprovErrors = [];
window.addEventListener('error', function (e) {
  window.gpuprovErrors.push(String(e.message));
  document.documentElement.setAttribute('data-errors', window.gpuprovErrors.join(' | '));
});
document.addEventListener('DOMContentLoaded', function () {
  document.documentElement.setAttribute('data-rendered', String(document.querySelectorAll('svg path.series').length));
  document.documentElement.setAttribute('data-limits', String(document.querySelectorAll('svg line.limit').length));
});
"""


def _records(result):
    return ([result.start] if result.start else []) + result.steps


def _x_labels(result):
    start_replicas = advertised_replicas(result.plan.start)
    return [("start (%d)" % start_replicas) if r.replicas is None else str(r.replicas) for r in _records(result)]


def _scale(value, top):
    return TOP + (HEIGHT - TOP - BOTTOM) * (1.0 - min(max(value / top, 0.0), 1.0)) if top else HEIGHT - BOTTOM


def _x(number, count):
    span = WIDTH - LEFT - RIGHT
    return LEFT + (span * number / (count - 1) if count > 1 else span / 2.0)


def _axis(labels, top, unit_text):
    count = len(labels)
    parts = ['<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#ccc"/>'
             % (LEFT, TOP, WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM),
             '<text x="4" y="%d">%s</text><text x="4" y="%d">0</text>' % (TOP + 4, html.escape(unit_text),
                                                                          HEIGHT - BOTTOM)]
    for number, label in enumerate(labels):
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                     % (_x(number, count), HEIGHT - BOTTOM + 16, html.escape(label)))
    parts.append('<text x="%d" y="%d" text-anchor="middle">replicas per GPU</text>'
                 % ((WIDTH + LEFT) // 2, HEIGHT - 4))
    return parts


def _series(points, count, top, colour, title, dash=""):
    """A polyline through (index, value) points; a gap (None) starts a new segment."""
    data, pen = [], "M"
    for number, value in points:
        if value is None:
            pen = "M"
            continue
        data.append("%s%.1f %.1f" % (pen, _x(number, count), _scale(value, top)))
        pen = "L"
    if not data:
        return ""
    dots = "".join('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (_x(n, count), _scale(v, top), colour)
                   for n, v in points if v is not None)
    return ('<path class="series" d="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></path>%s'
            % (" ".join(data), colour, ' stroke-dasharray="5 3"' if dash else "", html.escape(title), dots))


def _limit(value, top, text):
    y = _scale(value, top)
    return ('<line class="limit" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#d62728" stroke-dasharray="3 3"/>'
            '<text x="%d" y="%.1f" fill="#d62728">%s</text>'
            % (LEFT, WIDTH - RIGHT, y, y, WIDTH - RIGHT - 150, y - 4, html.escape(text)))


def _finite(value):
    return value if value is not None and not math.isinf(value) else None


def latency_chart(result, key, metric):
    """p99 and p95 of one workload's histogram against replicas, with the SLOs that apply."""
    records = _records(result)
    labels = _x_labels(result)
    quantiles = (0.99, 0.95)
    values = {}
    for quantile in quantiles:
        values[quantile] = [(n, _finite(((r.workloads.get(key) or {}).get("quantiles", {}).get(metric) or {}).get(
            quantile))) for n, r in enumerate(records)]
    limits = [s for s in result.slos if s.applies_to(metric)]
    seen = [v for q in quantiles for _, v in values[q] if v is not None] + [s.limit for s in limits]
    top = max(seen) * 1.15 if seen else 1.0
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">'
             % (WIDTH, HEIGHT, html.escape("%s %s" % (workload_name(key), metric)))]
    parts += _axis(labels, top, slo_mod.duration_text(top))
    for number, quantile in enumerate(quantiles):
        parts.append(_series(values[quantile], len(records), top, (P99, P95)[number],
                             "%s %s" % (slo_mod.quantile_key(quantile), workload_name(key)), dash=number))
    for slo in limits:
        parts.append(_limit(slo.limit, top, "SLO %s" % slo.text))
    parts.append("</svg>")
    title = "%s: %s" % (workload_name(key), slo_mod.short_name(metric))
    legend = '<div class="legend"><span style="color:%s">&#9632; p99</span><span style="color:%s">&#9632; p95 ' \
             '(dashed)</span><span style="color:#d62728">- - SLO</span></div>' % (P99, P95)
    return "<div><h3>%s</h3>%s%s</div>" % (html.escape(title), legend, "".join(parts))


def memory_chart(result):
    """The least free GPU memory of each step (percent of the GPU), against the margin."""
    records = _records(result)
    points = []
    for number, record in enumerate(records):
        ratios = [g["free_ratio"] for g in record.gpus if g["free_ratio"] is not None]
        points.append((number, 100.0 * min(ratios) if ratios else None))
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="memory headroom">'
             % (WIDTH, HEIGHT)]
    parts += _axis(_x_labels(result), 100.0, "100%")
    parts.append(_series(points, len(records), 100.0, MEMORY, "least free GPU memory"))
    parts.append(_limit(100.0 * result.margin, 100.0, "margin %.0f%%" % (100 * result.margin)))
    parts.append("</svg>")
    return "<div><h3>GPU memory free (least of the node's GPUs), %</h3>" + "".join(parts) + "</div>"


def render(result, fit=None):
    esc = html.escape
    node = result.plan.node
    good = result.outcome == "found"
    rec = recommendation(result)
    body = ["<h1>gpuprov trial: %s</h1>" % esc(node),
            '<p class="muted">SLO %s; %ds window per step; memory margin %.0f%%. Generated by gpuprov; no network is '
            'used to view this page.</p>' % (esc(", ".join(s.text for s in result.slos)), result.window,
                                             100 * result.margin)]
    if good:
        verdict = "%d replicas per GPU pass; vLLM --gpu-memory-utilization %.2f per pod." % (
            rec["replicas"], rec["gpu_memory_utilization"])
    elif result.outcome == "none":
        verdict = "No step passed."
    else:
        verdict = "The trial stopped: %s" % (result.error or result.outcome)
    body.append('<div class="verdict%s"><b>%s</b> %s</div>'
                % ("" if good else " bad", esc(verdict), esc(where_now(result))))
    keys = sorted(set(k for r in _records(result) for k in r.workloads))
    charts = [latency_chart(result, key, metric) for key in keys
              for metric in sorted(set(m for r in _records(result) for m in (r.workloads.get(key) or {}).get(
                  "quantiles", {})))]
    body.append("<h2>Latency against replicas</h2><div class=\"charts\">%s</div>" % "".join(charts))
    body.append("<h2>Memory headroom</h2><div class=\"charts\">%s</div>" % memory_chart(result))
    rows = []
    for record in _records(result):
        rows.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>" % (
            esc(record.label), esc(record.config_name or "-"), esc(record.verdict), esc("; ".join(record.reasons))))
    body.append("<h2>Steps</h2><table><tr><th>step</th><th>config</th><th>result</th><th>why</th></tr>%s</table>"
                % "".join(rows))
    if fit and not fit.get("error"):
        body.append("<h2>%s layout fit proposes</h2><pre>%s</pre>" % (
            "MIG" if fit["method"] == "mig" else "MPS",
            esc("\n".join("GPU %s (%s): %s" % (g["gpu"], g["sharing"], ", ".join(g["workloads"]))
                          for g in fit["gpus"]))))
    if result.notes:
        body.append("<h2>Notes</h2><ul>%s</ul>" % "".join("<li>%s</li>" % esc(n) for n in result.notes))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            "<title>gpuprov trial %s</title><style>%s</style><script>%s</script></head><body>%s</body></html>\n"
            % (esc(node), _STYLE, _SCRIPT, "\n".join(body)))
