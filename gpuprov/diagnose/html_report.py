"""One self-contained HTML page for a diagnose run: charts, the allocation picture, findings.

Everything is inline (SVG charts, CSS, one small script); the page's Content-Security-Policy
forbids every network fetch, so it looks the same offline, attached to a ticket or mailed.
Per node and GPU (and MIG instance): SM activity and memory used over time, from the same
snapshot model the checks read (nvidia-smi samples, a baseline, or DCGM via Prometheus).
Every text that came from the input is escaped.
"""
import datetime
import html

from gpuprov.diagnose.sizing import format_gib

MAX_POINTS = 600          # per series: longer recordings are averaged into this many buckets
WIDTH, HEIGHT, PAD = 640, 150, 34
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin:16px 0 4px}.charts{display:flex;flex-wrap:wrap;gap:16px}
.finding{border-left:4px solid #d62728;padding:4px 12px;margin:8px 0;background:#fafafa}
.finding.ok{border-color:#2ca02c}.remedy{color:#0b5394}.muted{color:#777;font-size:13px}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}
svg text{font-size:11px;fill:#444}.legend span{margin-right:12px;font-size:12px}
"""

# Records any script error in the page itself, so a headless browser's DOM dump shows it,
# then marks the page rendered with the number of chart lines it found.
_SCRIPT = """
window.gpuprovErrors = [];
window.addEventListener('error', function (e) {
  window.gpuprovErrors.push(String(e.message));
  document.documentElement.setAttribute('data-errors', window.gpuprovErrors.join(' | '));
});
document.addEventListener('DOMContentLoaded', function () {
  var lines = document.querySelectorAll('svg path.series').length;
  document.documentElement.setAttribute('data-rendered', String(lines));
});
"""


def _epoch(timestamp):
    """nvidia-smi's 'YYYY/MM/DD HH:MM:SS.mmm' (UTC as written by the recorders) -> seconds."""
    stamp = datetime.datetime.strptime(timestamp.split(".")[0], "%Y/%m/%d %H:%M:%S")
    fraction = float("0." + timestamp.split(".")[1]) if "." in timestamp else 0.0
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp() + fraction


def series_by_device(samples):
    """{(index, gpu instance id): {"label", "points": [(t, sm %, used MiB, total MiB)]}}."""
    devices = {}
    for sample in samples:
        key = (sample.index, sample.gpu_instance_id)
        label = "GPU %d" % sample.index + (" / GI %s%s" % (sample.gpu_instance_id, " %s" % sample.profile
                                                          if sample.profile else "") if sample.gpu_instance_id else "")
        device = devices.setdefault(key, {"label": label, "points": []})
        device["points"].append((_epoch(sample.timestamp), sample.utilization_gpu, sample.memory_used_mib,
                                 sample.memory_total_mib))
    for device in devices.values():
        device["points"].sort(key=lambda point: point[0])
        device["points"] = _bucket(device["points"])
    return dict(sorted(devices.items(), key=lambda item: (item[0][0], int(item[0][1] or -1))))


def _bucket(points):
    if len(points) <= MAX_POINTS:
        return points
    size = len(points) / MAX_POINTS
    out = []
    for number in range(MAX_POINTS):
        chunk = points[int(number * size):int((number + 1) * size)] or points[-1:]

        def mean(values):
            values = [v for v in values if v is not None]
            return sum(values) / len(values) if values else None
        out.append((chunk[0][0], mean(p[1] for p in chunk), mean(p[2] for p in chunk), max(
            (p[3] for p in chunk if p[3] is not None), default=None)))
    return out


def _path(points, t0, t1, top):
    """SVG path data; a gap (None) starts a new segment."""
    parts, pen = [], "M"
    span = (t1 - t0) or 1.0
    for stamp, value in points:
        if value is None:
            pen = "M"
            continue
        x = PAD + (stamp - t0) / span * (WIDTH - PAD - 8)
        y = HEIGHT - 20 - min(max(value / top, 0.0), 1.0) * (HEIGHT - 30)
        parts.append("%s%.1f %.1f" % (pen, x, y))
        pen = "L"
    return " ".join(parts)


def _chart(title, devices, pick, top, unit, t0, t1):
    lines = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="%s">'
             % (WIDTH, HEIGHT, html.escape(title)),
             '<rect x="%d" y="10" width="%d" height="%d" fill="none" stroke="#ccc"/>' % (PAD, WIDTH - PAD - 8,
                                                                                         HEIGHT - 30),
             '<text x="2" y="16">%s</text><text x="2" y="%d">0</text>' % (html.escape(unit), HEIGHT - 20)]
    lines[-1] = lines[-1].replace(">%s<" % html.escape(unit), ">%s%s<" % (
        "100" if unit == "%" else format_gib(top), html.escape(unit)), 1)
    for number, (key, device) in enumerate(devices.items()):
        data = _path([(p[0], pick(p)) for p in device["points"]], t0, t1, top)
        if data:
            lines.append('<path class="series" d="%s" fill="none" stroke="%s" stroke-width="1.5"><title>%s</title>'
                         '</path>' % (data, COLOURS[number % len(COLOURS)], html.escape(device["label"])))
    layout = "%m-%d %H:%M" if t1 - t0 >= 3600 else "%m-%d %H:%M:%S"
    when = lambda t: datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(layout)  # noqa: E731
    lines.append('<text x="%d" y="%d">%s</text><text x="%d" y="%d" text-anchor="end">%s UTC</text>'
                 % (PAD, HEIGHT - 4, when(t0), WIDTH - 8, HEIGHT - 4, when(t1)))
    lines.append("</svg>")
    return "<div><h3>%s</h3>%s</div>" % (html.escape(title), "".join(lines))


def _allocation_svg(resources):
    rows = [r for r in resources if r["allocatable"] or r["capacity"]]
    height = 22 * len(rows) + 6
    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" aria-label="allocation">'
           % (WIDTH, height)]
    for number, resource in enumerate(rows):
        y = 4 + 22 * number
        total = max(resource["allocatable"], 1)
        used = min(resource["allocated"], total) / total * (WIDTH - 330)
        out.append('<rect class="alloc" x="200" y="%d" width="%d" height="16" fill="#eee" stroke="#bbb"/>'
                   '<rect x="200" y="%d" width="%.1f" height="16" fill="#d62728"/>'
                   '<text x="2" y="%d">%s</text><text x="%d" y="%d">%d/%d allocated</text>'
                   % (y, WIDTH - 330, y, used, y + 12, html.escape(resource["name"]), WIDTH - 122, y + 12,
                      resource["allocated"], resource["allocatable"]))
    out.append("</svg>")
    return "".join(out)


def _remedy_html(remedy):
    if not remedy:
        return ""
    parts = ['<div class="remedy">Remedy: %s</div>' % html.escape(remedy.get("summary") or "")]
    if remedy.get("inventory"):
        parts.append("<pre>%s</pre>" % html.escape(remedy["inventory"]))
    for alternative in remedy.get("alternatives") or []:
        parts.append('<div class="remedy">Instead: %s</div>' % html.escape(alternative["summary"]))
    for command in remedy.get("commands") or []:
        parts.append("<pre>%s</pre>" % html.escape(command))
    return "".join(parts)


def render(report, snapshot):
    """The page, as one string."""
    esc = html.escape
    body = ["<h1>gpuprov diagnose: %s</h1>" % esc(report["source"] or "snapshot"),
            '<p class="muted">%d GPU node(s) of %d, %d GPU(s), %d Pending GPU pod(s). Generated by gpuprov; no '
            'network is used to view this page.</p>' % (report["summary"]["gpu_nodes"], report["summary"]["nodes"],
                                                        report["summary"]["gpus"],
                                                        report["summary"]["pending_gpu_pods"])]
    for node in report["nodes"]:
        body.append("<h2>%s</h2>" % esc(node["name"]))
        css = "finding ok" if not node["check"] else "finding"
        body.append('<div class="%s"><b>%s</b> %s%s</div>' % (
            css, esc(node["check"] or node.get("status") or "ok"), esc(node["summary"]),
            "".join("<div class=\"muted\">%s</div>" % esc(line) for line in node["evidence"])
            + _remedy_html(node["remedy"])))
        body.append("<h3>Allocation</h3>" + _allocation_svg(node["resources"]))
        devices = series_by_device(snapshot.utilization.get(node["name"]) or [])
        if devices:
            stamps = [p[0] for d in devices.values() for p in d["points"]]
            t0, t1 = min(stamps), max(stamps)
            legend = "".join('<span style="color:%s">&#9632; %s</span>' % (COLOURS[n % len(COLOURS)], esc(d["label"]))
                             for n, d in enumerate(devices.values()))
            top_mib = max((p[3] or p[2] or 0) for d in devices.values() for p in d["points"]) or 1
            body.append('<div class="legend">%s</div><div class="charts">%s%s</div>' % (
                legend, _chart("SM activity, %", devices, lambda p: p[1], 100.0, "%", t0, t1),
                _chart("Memory used, GiB (top %s GiB)" % format_gib(top_mib), devices, lambda p: p[2], top_mib,
                       "GiB", t0, t1)))
        else:
            body.append('<p class="muted">No utilisation samples for this node.</p>')
    if report.get("dra"):
        rows = "".join("<tr><td>%s</td><td>%s %s</td><td>%s</td><td>%s</td><td>%d/%d</td><td>%d</td></tr>" % (
            esc(node["name"]), esc(kind["driver"]), esc(kind["kind"]), esc(kind["product"] or "-"),
            "-" if kind["memory_gib"] is None else "%g GiB" % kind["memory_gib"], kind["allocated"], kind["devices"],
            kind["free"]) for node in report["dra"]["nodes"] for kind in node["kinds"])
        body.append("<h2>DRA devices</h2><table><tr><th>node</th><th>device</th><th>product</th><th>memory</th>"
                    "<th>allocated</th><th>free</th></tr>%s</table>" % rows)
    if report["pods"]:
        body.append("<h2>Pending GPU pods</h2>")
        for pod in report["pods"]:
            body.append('<div class="finding"><b>%s/%s</b> [%s] %s%s</div>' % (
                esc(pod["namespace"]), esc(pod["name"]), esc(pod["check"] or pod.get("status") or "-"),
                esc(pod["summary"]), _remedy_html(pod["remedy"])))
    notes = report["notes"] + ["%s check not run for %s: %s" % (item["check"], ", ".join(
        item.get("nodes") or item.get("pods") or []), item["reason"]) for item in report["not_run"]]
    if notes:
        body.append("<h2>Notes</h2><ul>%s</ul>" % "".join("<li>%s</li>" % esc(note) for note in notes))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            "<title>gpuprov diagnose</title><style>%s</style><script>%s</script></head><body>%s</body></html>\n"
            % (_STYLE, _SCRIPT, "\n".join(body)))
