"""What one window of a trial measured, read back from Prometheus with instant queries.

Latency: ``histogram_quantile`` over the window of each histogram, per workload, where a
workload is a (namespace, model_name) pair: vLLM labels every series with ``model_name`` (the
served model name) and ``engine`` (vllm-project/vllm vllm/v1/metrics/loggers.py,
PrometheusStatLogger, commit 005a810bc40f, whose release is UNVERIFIED; the 0.9.1 docs'
sample shows model_name alone), and the scrape adds the pod's namespace. Only the series of
the canary node count: the scrape must carry the pod's node name as a ``node`` label
(relabel ``__meta_kubernetes_pod_node_name``; GKE's managed collection adds it, as
GoogleCloudPlatform/ai-on-gke PR #937 shows on vLLM series), as `gpuprov diagnose` expects
of dcgm-exporter's targets.

Memory and SM activity: dcgm-exporter's series of the node's GPUs (``node`` target label, else
the exporter's ``Hostname``/``hostname``), read with the names both exporter generations use
(gpuprov.diagnose.prometheus.METRICS). Per GPU: the least framebuffer free over the window,
the most used (summed over a GPU's series: with ``--kubernetes-virtual-gpus`` the exporter
splits FB_USED per pod, PR #594), and the mean SM activity. Per pod, where the exporter maps
series to pods: the most it used, which is what `fit` packs when no time-slicing step passes.
"""
import math

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import digits_value

from gpuprov.diagnose.prometheus import METRICS, pod_of

SM_FIELDS = ("sm_active", "gr_engine_active")
WORKLOAD_LABELS = ("namespace", "model_name")


def _quote(value):
    return '"%s"' % str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


class WindowReader:
    """Reads one window (``seconds`` ending at ``end``) for ``node``."""

    def __init__(self, client, node, metrics, quantiles, namespace=None):
        self.client, self.node, self.metrics, self.quantiles = client, node, tuple(metrics), tuple(quantiles)
        self.namespace = namespace

    def _query(self, promql, end):
        return self.client.query(promql, end)

    def _workload_selector(self):
        parts = ["node=%s" % _quote(self.node)]
        if self.namespace:
            parts.append("namespace=%s" % _quote(self.namespace))
        return "{%s}" % ",".join(parts)

    def _gpu_series(self, function, metric, seconds):
        """``function(metric[window])`` of every series of the node's GPUs: by the target's node
        label, or by the exporter's own host label (`or` keeps a series found both ways once)."""
        return " or ".join("%s(%s{%s=%s}[%ds])" % (function, metric, label, _quote(self.node), seconds)
                           for label in ("node", "Hostname", "hostname"))

    def latency(self, end, seconds):
        """{(namespace, model_name): {"requests": {metric: n}, "quantiles": {metric: {q: seconds or None}}}}."""
        selector = self._workload_selector()
        by = ", ".join(WORKLOAD_LABELS)
        workloads = {}
        for metric in self.metrics:
            counts = self._query("sum by (%s) (increase(%s_count%s[%ds]))" % (by, metric, selector, seconds), end)
            for series in counts:
                key = tuple(series["metric"].get(label, "") for label in WORKLOAD_LABELS)
                entry = workloads.setdefault(key, {"requests": {}, "quantiles": {}})
                entry["requests"][metric] = _number(series["value"][1]) or 0.0
            for quantile in self.quantiles:
                result = self._query("histogram_quantile(%g, sum by (le, %s) (rate(%s_bucket%s[%ds])))"
                                     % (quantile, by, metric, selector, seconds), end)
                for series in result:
                    key = tuple(series["metric"].get(label, "") for label in WORKLOAD_LABELS)
                    entry = workloads.setdefault(key, {"requests": {}, "quantiles": {}})
                    entry["quantiles"].setdefault(metric, {})[quantile] = _number(series["value"][1])
        for entry in workloads.values():
            for metric in self.metrics:
                entry["requests"].setdefault(metric, 0.0)
                values = entry["quantiles"].setdefault(metric, {})
                for quantile in self.quantiles:
                    values.setdefault(quantile, None)
        return workloads

    def gpus(self, end, seconds, memory_mib):
        """[{"gpu", "uuid", "used_mib", "free_mib", "total_mib", "free_ratio", "sm_active"}] per GPU
        of the node, ``memory_mib`` {GPU index: MiB} from its plan (the denominator of the margin)."""
        # FB_FREE is device-wide (a copy on every pod's series), FB_USED may be split per pod:
        # the least free is exact, the most used sums each series' most (an upper bound).
        free = self._by_gpu(self._query("min by (UUID, gpu) (%s)" % self._gpu_series(
            "min_over_time", METRICS["fb_free"][0], seconds), end))
        used = self._by_gpu(self._query("sum by (UUID, gpu) (%s)" % self._gpu_series(
            "max_over_time", METRICS["fb_used"][0], seconds), end))
        sm, sm_metric = {}, None
        for field in SM_FIELDS:
            for metric in METRICS[field]:
                # Device-wide on time-sliced GPUs (one copy per pod): the copies agree.
                sm = self._by_gpu(self._query("max by (UUID, gpu) (%s)" % self._gpu_series(
                    "avg_over_time", metric, seconds), end))
                if sm:
                    sm_metric = metric
                    break
            if sm:
                break
        rows = []
        for key in sorted(set(free) | set(used), key=lambda k: (digits_value(k[1], 999), k[0])):
            index = digits_value(key[1])
            total = memory_mib.get(index)
            if total is None and key in free and key in used:
                total = free[key] + used[key]
            row = {"gpu": index, "uuid": key[0], "used_mib": used.get(key), "free_mib": free.get(key),
                   "total_mib": total, "sm_active": sm.get(key), "sm_metric": sm_metric}
            row["free_ratio"] = (row["free_mib"] / total) if total and row["free_mib"] is not None else None
            rows.append(row)
        return rows

    def pods(self, end, seconds):
        """[{"pod": "ns/name", "gpu", "used_mib"}]: the most each pod the exporter maps used."""
        result = self._query(self._gpu_series("max_over_time", METRICS["fb_used"][0], seconds), end)
        pods = {}
        for series in result:
            labels = series["metric"]
            pod = pod_of(labels)
            value = _number(series["value"][1])
            if not pod or value is None:
                continue
            if self.namespace and pod.split("/", 1)[0] != self.namespace:
                continue
            gpu = labels.get("gpu", "")
            key = (pod, digits_value(gpu))
            pods[key] = max(pods.get(key, 0.0), value)
        return [{"pod": pod, "gpu": gpu, "used_mib": mib} for (pod, gpu), mib in sorted(pods.items(), key=str)]

    @staticmethod
    def _by_gpu(result):
        values = {}
        for series in result:
            labels = series["metric"]
            value = _number(series["value"][1])
            if value is not None:
                values[(labels.get("UUID", ""), labels.get("gpu", ""))] = value
        return values
