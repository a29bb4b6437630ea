"""Reading dcgm-exporter's metrics back from Prometheus (`gpuprov diagnose --prometheus`).

One range query per metric name, over HTTP with the standard library (Prometheus HTTP API
`/api/v1/query_range` and `/api/v1/metadata`). Series are joined per node on UUID +
GPU_I_ID: a MIG instance's series carry the *parent* GPU's UUID and its GPU instance id,
a whole GPU's have no GPU_I_ID (dcgm-exporter `devicemonitoring/device_monitoring.go`;
NVIDIA/dcgm-exporter 4.8.2). The MIG profile text is shown but never joined on:
exporters print `7g.79gb` for `7g.80gb` (gpu-operator #687).

Both spellings are accepted (NVIDIA/dcgm-exporter etc/default-counters.csv and
NVIDIA/DCGM dcgm_fields.h 4.6): the names of exporter <= 4.8
(DCGM_FI_PROF_SM_ACTIVE, Hostname) and the canonical names of DCGM 4.6+
(DCGM_FI_PROF_SM_UTIL_RATIO, hostname). Units come from each metric's HELP text where it
states them, not from its name.

Nothing here prints or decides: read() returns plain data, to_samples() turns it into the
snapshot model's UtilizationSample rows that every check reads.
"""
import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import digits_value, is_digits
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import safe_files
from gpuprov.diagnose.snapshot import UtilizationSample

# field -> metric names, preferred first (NVIDIA/dcgm-exporter etc/default-counters.csv; ids
# from NVIDIA/DCGM dcgm_fields.h).
METRICS = {
    "sm_active": ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_UTIL_RATIO"),                  # 1002
    "gr_engine_active": ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"),  # 1001
    "gpu_util": ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO"),                     # 203
    "sm_occupancy": ("DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_OCCUPANCY_RATIO"),       # 1003
    "tensor_active": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO"),  # 1004
    "dram_active": ("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO"),            # 1005
    "fb_used": ("DCGM_FI_DEV_FB_USED",),                                                    # 252, MiB
    "fb_free": ("DCGM_FI_DEV_FB_FREE",),                                                    # 251, MiB
}
# SM activity, best source first: SM_ACTIVE; GR_ENGINE_ACTIVE (on by default, works on MIG);
# GPU_UTIL (whole GPUs only, coarse: "time at least one kernel ran").
SM_SOURCES = ("sm_active", "gr_engine_active", "gpu_util")
RATIO_FIELDS = ("sm_active", "gr_engine_active", "gpu_util", "sm_occupancy", "tensor_active", "dram_active")

# At most this many points per series (Prometheus refuses more than 11,000).
MAX_POINTS = 720
# Below this step a point is the latest sample (instant selector); at or above it, the
# average over the step, so a week read at 14-minute steps still counts every sample.
AVERAGE_FROM_STEP = 60

_DURATION = re.compile(r"^(\d{1,9})([smhdw])\Z", re.ASCII)
# Longer than any Prometheus retention worth reading back (the default is 15 days).
MAX_SINCE_SECONDS = 366 * 86400
# An answer larger than this is refused, not read (a week of 720 points per series for a
# few hundred GPUs is a few MiB); nesting is bounded as for every input file.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
# A `gpu` label above this is no GPU index (nvidia-smi numbers GPUs from 0; gpuprov plans at
# most 64 per node): the series is skipped and counted.
MAX_GPU_INDEX = 63
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class PrometheusError(Exception):
    """Prometheus could not be read or answered with an error."""


def parse_duration(text):
    """'7d' -> 604800. ValueError with the reason on anything else."""
    match = _DURATION.match(str(text).strip())
    if not match or int(match.group(1)) == 0:
        raise ValueError("%r: use a whole number and one unit of s, m, h, d, w (for example 30m, 7d)" % text[:40])
    seconds = int(match.group(1)) * _SECONDS[match.group(2)]
    if seconds > MAX_SINCE_SECONDS:
        raise ValueError("%r: at most %dd" % (text[:40], MAX_SINCE_SECONDS // 86400))
    return seconds


def check_url(url):
    """The base URL without a trailing slash; ValueError unless it is http(s)://host[:port][/path]."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError("%r: give the server's http:// or https:// address, e.g. http://prometheus:9090" % url)
    if parsed.query or parsed.fragment:
        raise ValueError("%r: no query string or fragment; give the server's base address" % url)
    return url.rstrip("/")


class Client:
    """The few Prometheus HTTP API calls diagnose and trial need."""

    def __init__(self, url, timeout=30):
        self.url = check_url(url)
        self.timeout = timeout

    def _get(self, path, params):
        address = "%s%s?%s" % (self.url, path, urllib.parse.urlencode(params))
        try:
            with urllib.request.urlopen(address, timeout=self.timeout) as response:
                raw = response.read(MAX_ANSWER_BYTES + 1)
            if len(raw) > MAX_ANSWER_BYTES:
                raise PrometheusError("%s%s: the answer is larger than %d MiB; shorten --since"
                                      % (self.url, path, MAX_ANSWER_BYTES // (1024 * 1024)))
            body = safe_files.parse_json(raw.decode("utf-8"), "%s%s" % (self.url, path))
        except urllib.error.HTTPError as error:
            # 400/422/503 carry {"status": "error", "errorType", "error"} (Prometheus HTTP API docs).
            try:
                detail = json.loads(error.read(65536)).get("error") or error.reason
            except (ValueError, AttributeError):
                detail = error.reason
            raise PrometheusError("%s%s: HTTP %d: %s" % (self.url, path, error.code, detail)) from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise PrometheusError("%s: cannot connect: %s" % (self.url, reason)) from None
        except (ValueError, safe_files.FileInputError):  # UnicodeDecodeError is a ValueError
            raise PrometheusError("%s%s: the answer is not JSON; is this a Prometheus server?" % (self.url, path)) from None
        if not isinstance(body, dict) or body.get("status") != "success":
            raise PrometheusError("%s%s: %s" % (self.url, path, (body or {}).get("error") or "unexpected answer"))
        return body.get("data")

    def query_range(self, promql, start, end, step):
        data = self._get("/api/v1/query_range", {"query": promql, "start": "%.3f" % start, "end": "%.3f" % end,
                                                 "step": "%ds" % step})
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            raise PrometheusError("%s: query_range %s: expected a matrix" % (self.url, promql))
        return data["result"]

    def query(self, promql, at):
        """An instant query evaluated at unix time ``at``: [{"metric": labels, "value": [t, "v"]}]."""
        data = self._get("/api/v1/query", {"query": promql, "time": "%.3f" % at})
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            raise PrometheusError("%s: query %s: expected a vector" % (self.url, promql))
        return data["result"]

    def help_text(self, metric):
        """The metric's HELP text as Prometheus stored it from the scrape, or ''."""
        data = self._get("/api/v1/metadata", {"metric": metric})
        entries = (data or {}).get(metric) or []
        return entries[0].get("help", "") if entries else ""


def step_for(seconds):
    return max(1, math.ceil(seconds / MAX_POINTS))


def _scale(field, metric, help_text):
    """Factor that turns the stored value into a 0..1 ratio or MiB. Units from HELP when it says."""
    text = help_text.lower()
    if field in RATIO_FIELDS:
        # The old GPU_UTIL is a percentage ("GPU utilization (in %)."); the _RATIO names are 0..1.
        if "%" in text or "percent" in text or (not text and not metric.endswith("_RATIO") and field == "gpu_util"):
            return 0.01
        return 1.0
    if "byte" in text:
        # dcgm-exporter 4.9.0 moves memory from MiB to bytes (NVIDIA/dcgm-exporter release notes,
        # 4.9.0).
        return 1.0 / (1024 * 1024)
    return 1.0


def _not_a_measurement(field, value, stamp):
    """Why a scaled value (ratio 0..1 or MiB) cannot be a measurement, or None."""
    if math.isnan(stamp) or math.isinf(stamp) or stamp < 0:
        return "timestamp %r" % stamp
    if math.isnan(value):
        return "NaN"
    if math.isinf(value) or value < 0:
        return "%r" % value
    if field in RATIO_FIELDS and value > 1.0:
        return "%g%% (above 100%%)" % (value * 100)
    return None


def _first(labels, *names):
    for name in names:
        if labels.get(name):
            return labels[name]
    return ""


def series_key(labels):
    """(node, UUID, GPU instance id or '') of one series, or None without a UUID."""
    uuid = _first(labels, "UUID", "uuid")         # `uuid` with the exporter's -o (old namespace)
    if not uuid:
        return None
    # A `node` label relabelled from the target (__meta_kubernetes_pod_node_name) beats
    # Hostname/hostname, which newer exporters may fill with their own pod name.
    node = _first(labels, "node", "Hostname", "hostname", "instance")
    return node, uuid, labels.get("GPU_I_ID", "")


def pod_of(labels):
    """'namespace/pod' the exporter mapped this series to, or None.

    With a ServiceMonitor's default honorLabels: false, Prometheus renames the exporter's
    pod/namespace to exported_pod/exported_namespace because the target carries its own
    (Prometheus scrape_config honor_labels; prometheus-operator ServiceMonitor
    honorLabels, default false); a bare `pod` is then the exporter itself. `pod_name` and
    `pod_namespace` are the exporter's -o spellings.
    """
    if labels.get("exported_pod"):
        return "%s/%s" % (labels.get("exported_namespace") or labels.get("namespace") or "default", labels["exported_pod"])
    if labels.get("pod_name"):
        return "%s/%s" % (labels.get("pod_namespace") or "default", labels["pod_name"])
    pod = labels.get("pod")
    if not pod or pod == _first(labels, "hostname", "Hostname"):
        # Newer exporters may put their own pod name in hostname: that pod is no workload.
        return None
    return "%s/%s" % (labels.get("namespace") or "default", pod)


def read(client, since_seconds, end=None, selector=""):
    """Every GPU and MIG instance Prometheus holds DCGM series for, over the last since_seconds.

    Returns {"start", "end", "step", "notes": [...], "devices": [device]}, where a device is
    {"node", "uuid", "gpu_instance_id", "index", "model", "profile", "pods": [ns/pod],
     "sm_source": field or None, "points": [[unix time, {field: value}], ...]} with ratios
    0..1 and memory in MiB. `selector` is extra label matchers, e.g. 'job="dcgm"'.
    """
    end = time.time() if end is None else end
    start = end - since_seconds
    step = step_for(since_seconds)
    notes, devices, found = [], {}, {}
    skipped = {"values": 0, "series": 0, "example": None}
    for field, names in METRICS.items():
        for metric in names:
            inner = "%s{%s}" % (metric, selector)
            promql = "avg_over_time(%s[%ds])" % (inner, step) if step >= AVERAGE_FROM_STEP else inner
            result = client.query_range(promql, start, end, step)
            if not result:
                continue
            found.setdefault(field, []).append(metric)
            scale = _scale(field, metric, client.help_text(metric))
            for series in result:
                labels = series.get("metric", {})
                key = series_key(labels)
                if key is None:
                    continue
                gpu_label = labels.get("gpu", "")
                if is_digits(gpu_label) and (len(gpu_label) > 3 or int(gpu_label) > MAX_GPU_INDEX):
                    skipped["series"] += 1
                    skipped["example"] = skipped["example"] or "GPU index %s" % gpu_label[:12]
                    continue
                device = devices.setdefault(key, {
                    "node": key[0], "uuid": key[1], "gpu_instance_id": key[2], "index": None, "model": "",
                    "profile": "", "pods": set(), "points": {}, "fields": set()})
                if is_digits(labels.get("gpu", "")):
                    device["index"] = int(labels["gpu"])
                device["model"] = device["model"] or labels.get("modelName", "")
                device["profile"] = device["profile"] or labels.get("GPU_I_PROFILE", "")
                pod = pod_of(labels)
                if pod:
                    device["pods"].add(pod)
                device["fields"].add(field)
                for point in series.get("values", []):
                    try:
                        stamp, number = float(point[0]), float(point[1])
                    except (TypeError, ValueError, IndexError, KeyError):
                        continue
                    reason = _not_a_measurement(field, number * scale, stamp)
                    if reason is not None:
                        # NaN is Prometheus' "no value" (stale or 0/0); the others no exporter writes.
                        skipped["values"] += 1
                        skipped["example"] = skipped["example"] or "%s %s" % (metric, reason)
                        continue
                    device["points"].setdefault(stamp, {}).setdefault(field, number * scale)
    if skipped["values"] or skipped["series"]:
        notes.append("Prometheus: %d value(s) and %d series skipped: not measurements (NaN, infinite, negative, "
                     "above 100%%, or an absurd GPU index), e.g. %s"
                     % (skipped["values"], skipped["series"], skipped["example"]))
    for field, metrics in sorted(found.items()):
        if len(metrics) > 1:
            notes.append("Prometheus holds %s under both %s; both were read" % (field, " and ".join(metrics)))
    if devices and "sm_active" not in found:
        notes.append("no DCGM_FI_PROF_SM_ACTIVE series: SM activity comes from %s; enable SM_ACTIVE in the "
                     "exporter's counters (the gpuprov.gpu.dcgm_exporter role does)"
                     % ("DCGM_FI_PROF_GR_ENGINE_ACTIVE" if "gr_engine_active" in found else "DCGM_FI_DEV_GPU_UTIL"))
    if devices and "dram_active" not in found:
        notes.append("no DCGM_FI_PROF_DRAM_ACTIVE series: the memory-bandwidth part of the memory check cannot run")
    result = []
    for key in sorted(devices, key=lambda k: (k[0], k[1], digits_value(k[2], -1))):
        device = devices.pop(key)
        device["sm_source"] = next((f for f in SM_SOURCES if f in device["fields"]), None)
        device["pods"] = sorted(device["pods"])
        device["points"] = [[stamp, values] for stamp, values in sorted(device["points"].items())]
        del device["fields"]
        result.append(device)
    return {"start": start, "end": end, "step": step, "notes": notes, "devices": result}


def to_samples(data, node_names):
    """The snapshot model's samples from read(): ({node: [UtilizationSample]}, notes).

    SM activity becomes utilization_gpu in percent (from SM_ACTIVE, else GR_ENGINE_ACTIVE,
    else GPU_UTIL, per device: see SM_SOURCES), DRAM activity dram_active in percent, and
    memory total is FB_USED + FB_FREE. Devices of nodes the snapshot does not know are left
    out with a note.
    """
    samples, notes, unknown = {}, [], set()
    for device in data["devices"]:
        if device["node"] not in node_names:
            unknown.add(device["node"])
            continue
        source = device["sm_source"]
        name = device["model"] or "GPU"
        if device["gpu_instance_id"]:
            name = "%s MIG %s" % (name, device["profile"] or "GI %s" % device["gpu_instance_id"])
        for stamp, values in device["points"]:
            used, free = values.get("fb_used"), values.get("fb_free")
            sm = values.get(source) if source else None
            dram = values.get("dram_active")
            samples.setdefault(device["node"], []).append(UtilizationSample(
                timestamp=time.strftime("%Y/%m/%d %H:%M:%S", time.gmtime(stamp)) + ".%03d" % int((stamp % 1) * 1000),
                index=device["index"] if device["index"] is not None else -1, name=name,
                memory_used_mib=used, memory_total_mib=(used + free) if used is not None and free is not None else None,
                utilization_gpu=round(sm * 100, 2) if sm is not None else None,
                gpu_instance_id=device["gpu_instance_id"], profile=device["profile"], uuid=device["uuid"],
                dram_active=round(dram * 100, 2) if dram is not None else None, pods=tuple(device["pods"])))
    for node in sorted(unknown):
        notes.append("Prometheus: DCGM series for %s, which is no node of the snapshot; left out (relabel the "
                     "target with a `node` label holding the Kubernetes node name)" % node)
    return samples, notes
