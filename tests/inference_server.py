"""A simulated inference node for the trial tests: vLLM-format latency histograms and
dcgm-exporter series on 127.0.0.1, driven by the node's device-plugin config.

Each workload is one vLLM server as Prometheus scrapes it: its own /metrics port, rendered by
prometheus_client (the library vLLM renders its metrics with) with vLLM's names, HELP texts,
label names and buckets (vllm-project/vllm vllm/v1/metrics/loggers.py PrometheusStatLogger,
commit 005a810bc40f, release UNVERIFIED: labels model_name and engine; no `_created` series,
as in the /metrics sample of vLLM's 0.9.1 docs). The scrape target adds what a PodMonitor with relabelling adds: namespace, pod and node.

Ten times a second the simulation reads how many replicas per GPU the node's config gives
(`replicas_of()`, in the tests the fleet's fake cluster: the node's label and the device
plugin release's config map, so the trial's own converge drives it), fills every slot with the
workloads' pods in turn, and lets each workload serve requests whose latencies are a function
of that count. One dcgm-exporter (the test exporter the diagnose tests use) prints one series
per pod per GPU (as with --kubernetes-virtual-gpus: FB_USED per pod, FB_FREE and SM activity
device-wide), so the memory the pods take grows with the replicas too.
"""
import http.server
import itertools
import sys
import threading

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, disable_created_metrics, generate_latest

from testlib import FAKES

sys.path.insert(0, FAKES)
import dcgm_exporter  # noqa: E402  (the fake node kit's test exporter)

# vllm-project/vllm vllm/v1/metrics/loggers.py (commit 005a810bc40f).
TTFT = ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
        (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
         80.0, 160.0, 640.0, 2560.0))
E2E = ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
       (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
        960.0, 1920.0, 7680.0))
LABELS = ["model_name", "engine"]
TICK_SECONDS = 0.1
GPU_MODEL = "NVIDIA A100-SXM4-80GB"


class Workload:
    """One model served on the node. ``ttft(replicas)`` and ``e2e(replicas)``: the latencies
    (seconds) of the requests one tick serves at that many replicas per GPU; ``memory_mib``:
    what one of its pods holds on a GPU."""

    def __init__(self, namespace, model, ttft, e2e, memory_mib):
        self.namespace, self.model, self.ttft, self.e2e, self.memory_mib = namespace, model, ttft, e2e, memory_mib
        self.registry = CollectorRegistry()
        self.histograms = [Histogram(name, text, LABELS, buckets=buckets, registry=self.registry)
                           .labels(model_name=model, engine="0") for name, text, buckets in (TTFT, E2E)]
        self.httpd = None

    @property
    def port(self):
        return self.httpd.server_address[1]

    def start(self):
        """Serve /metrics in the text format 0.0.4 whatever the scrape accepts: prometheus_client
        0.26.0 writes OpenMetrics sample names with the label-name alphabet (vllm:x_count becomes
        vllm_x_count; openmetrics/exposition.py generate_latest), which would rename vLLM's series."""
        registry = self.registry

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = generate_latest(registry)
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def serve(self, replicas):
        for histogram, latencies in zip(self.histograms, (self.ttft(replicas), self.e2e(replicas))):
            for seconds in latencies:
                histogram.observe(seconds)


class SimulatedNode:
    """The workloads of one node plus its dcgm-exporter. ``gpus``: [(index, UUID, total MiB)]."""

    def __init__(self, node, workloads, gpus, replicas_of, hostname=None):
        disable_created_metrics()
        self.node, self.workloads, self.gpus, self.replicas_of = node, list(workloads), list(gpus), replicas_of
        self.exporter = dcgm_exporter.Exporter(hostname or node, [], "old")
        self.replicas = None
        self.ticks = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.tick()

    def devices(self, replicas):
        """The exporter's series at ``replicas`` per GPU: the slots of each GPU filled by the
        workloads' pods in turn."""
        devices = []
        names = itertools.count()
        for index, uuid, total in self.gpus:
            pods = [self.workloads[slot % len(self.workloads)] for slot in range(replicas)]
            used = sum(w.memory_mib for w in pods)
            sm = min(1.0, 0.2 * len(pods))
            for workload in pods:
                devices.append(dcgm_exporter.Device(index, uuid, GPU_MODEL, {
                    "fb_used": workload.memory_mib, "fb_free": max(0, total - used), "sm_active": sm,
                    "gr_engine_active": sm}, pod="%s-%d" % (workload.model.split("/")[-1].lower(), next(names)),
                    namespace=workload.namespace))
        return devices

    def refresh(self):
        """Print the pods' memory as the workloads hold it now (after a test changed it)."""
        self.replicas = None
        self.tick()

    def tick(self):
        replicas = self.replicas_of()
        if replicas != self.replicas:
            self.exporter.devices = self.devices(replicas)
            self.replicas = replicas
        for workload in self.workloads:
            workload.serve(replicas)
        self.ticks += 1

    def _loop(self):
        while not self._stop.wait(TICK_SECONDS):
            try:
                self.tick()
            except (OSError, ValueError):
                continue  # the cluster state is being rewritten: the next tick reads it

    def start(self):
        for workload in self.workloads:
            workload.start()
        self.exporter.start()
        self._thread.start()
        return self

    def targets(self):
        """Prometheus scrape targets [(job, address, target labels)], as a PodMonitor and the
        exporter's ServiceMonitor with relabelling give them."""
        targets = [("vllm-%s" % w.model.split("/")[-1].lower(), "127.0.0.1:%d" % w.port,
                    {"namespace": w.namespace, "pod": "%s-0" % w.model.split("/")[-1].lower(), "node": self.node})
                   for w in self.workloads]
        targets.append(("dcgm-%s" % self.node, "127.0.0.1:%d" % self.exporter.port, {"node": self.node}))
        return targets

    def stop(self):
        self._stop.set()
        self._thread.join(timeout=5)
        for workload in self.workloads:
            if workload.httpd is not None:
                workload.httpd.shutdown()
                workload.httpd.server_close()
        self.exporter.stop()


def time_slicing_replicas(config):
    """Replicas per GPU a parsed device-plugin config gives nvidia.com/gpu (1: not shared)."""
    sharing = (config or {}).get("sharing") or {}
    for resource in (sharing.get("timeSlicing") or sharing.get("mps") or {}).get("resources") or []:
        if resource.get("name") == "nvidia.com/gpu":
            return int(resource["replicas"])
    return 1


def fleet_replicas(fleet, node):
    """replicas_of for a fleet node: what its device plugin's config gives now."""
    def replicas_of():
        _name, config = fleet.node_device_plugin_config(node)
        return time_slicing_replicas(config)
    return replicas_of
