"""A test stand-in for NVIDIA dcgm-exporter's /metrics endpoint.

It serves the Prometheus text exposition format with the metric and label names the real
exporter prints, so that a real Prometheus server can scrape it and `gpuprov diagnose
--prometheus` runs real PromQL against what it stored. What the real exporter does and this
one copies (sources: NVIDIA/dcgm-exporter 4.8.2 pkg/dcgmexporter and etc/default-counters.csv,
and the A100 MIG sample in NVIDIA's cloud-native docs, gpu-telemetry/dcgm-exporter):

- one series per whole GPU, labelled gpu, UUID, pci_bus_id, device (nvidia<N>), modelName,
  and Hostname (exporter <= 4.8.2) or hostname (>= 4.6.0-4.8.3);
- a GPU with MIG on is reported per GPU instance: the same labels plus GPU_I_PROFILE and
  GPU_I_ID, and UUID is the *parent* GPU's UUID (never the MIG device's);
- DCGM_FI_DEV_GPU_UTIL is not reported for MIG instances (dcgm-exporter #50, #105, #216);
  the DCGM_FI_PROF_* ratios and FB_USED/FB_FREE are;
- device-wide fields (clocks, temperature) stay on a parent row without GPU_I_* labels;
- pods mapped through the kubelet pod-resources API add pod, namespace, container;
- style "old" prints the names of exporter <= 4.8 (DCGM_FI_PROF_SM_ACTIVE, GPU_UTIL in %),
  style "new" the names DCGM 4.6's dcgm_fields.h makes canonical (DCGM_FI_PROF_SM_UTIL_RATIO,
  DCGM_FI_DEV_GPU_UTIL_RATIO as 0..1) and the lower-case hostname label. The new names of
  FB_USED/FB_FREE are not known here (UNVERIFIED against NVIDIA/DCGM dcgm_fields.h 4.6), so both styles
  print FB_USED/FB_FREE in MiB, as the exporter's counters CSV describes them.

Values may be constants or callables of the scrape count, so a test can make an instance
cycle between idle and busy from one scrape to the next.
"""
import http.server
import threading

# Field -> (old name, new name, HELP text of the old counters CSV, unit scale new/old)
FIELDS = {
    "sm_active": ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_UTIL_RATIO",
                  "The ratio of cycles an SM has at least 1 warp assigned."),
    "sm_occupancy": ("DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_OCCUPANCY_RATIO",
                     "The ratio of number of warps resident on an SM."),
    "gr_engine_active": ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO",
                         "Ratio of time the graphics engine is active."),
    "tensor_active": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
                      "Ratio of cycles the tensor (HMMA) pipe is active."),
    "dram_active": ("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO",
                    "Ratio of cycles the device memory interface is active sending or receiving data."),
    "fb_used": ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    "fb_free": ("DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
}
GPU_UTIL = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO")
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"


class Device:
    """One whole GPU (gi_id None) or one MIG GPU instance, with its values."""

    def __init__(self, gpu, uuid, model, values, gi_id=None, profile=None, pod=None, namespace=None,
                 container=None):
        self.gpu, self.uuid, self.model = gpu, uuid, model
        self.values = values          # field -> number or callable(scrape_count) -> number
        self.gi_id, self.profile = gi_id, profile
        self.pod, self.namespace, self.container = pod, namespace, container

    def value(self, field, scrape):
        value = self.values.get(field)
        return value(scrape) if callable(value) else value


def _labels(pairs):
    escaped = []
    for key, value in pairs:
        text = str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        escaped.append('%s="%s"' % (key, text))
    return "{" + ",".join(escaped) + "}"


def render(hostname, devices, style="old", scrape=0):
    """The /metrics text for one node's exporter."""
    if style not in ("old", "new"):
        raise ValueError("style must be old or new")
    host_label = "Hostname" if style == "old" else "hostname"
    lines = []

    def base(device, with_instance):
        pairs = [("gpu", device.gpu), ("UUID", device.uuid), ("pci_bus_id", "00000000:%02X:00.0" % (0x10 + device.gpu)),
                 ("device", "nvidia%d" % device.gpu), ("modelName", device.model)]
        if with_instance and device.gi_id is not None:
            pairs += [("GPU_I_PROFILE", device.profile), ("GPU_I_ID", device.gi_id)]
        pairs.append((host_label, hostname))
        if with_instance and device.pod:
            pairs += [("container", device.container or "main"), ("namespace", device.namespace or "default"),
                      ("pod", device.pod)]
        return pairs

    for field, (old, new, help_text) in FIELDS.items():
        name = old if style == "old" else new
        rows = [(device, device.value(field, scrape)) for device in devices]
        rows = [(device, value) for device, value in rows if value is not None]
        if not rows:
            continue
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s gauge" % name)
        for device, value in rows:
            lines.append("%s%s %s" % (name, _labels(base(device, True)), _number(value)))
    # GPU_UTIL: whole GPUs only; percent under the old name, a 0..1 ratio under the new one.
    name = GPU_UTIL[0] if style == "old" else GPU_UTIL[1]
    whole = [device for device in devices if device.gi_id is None and device.value("gpu_util", scrape) is not None]
    if whole:
        lines.append("# HELP %s %s" % (name, "GPU utilization (in %)." if style == "old" else "GPU utilization ratio."))
        lines.append("# TYPE %s gauge" % name)
        for device in whole:
            value = device.value("gpu_util", scrape)
            lines.append("%s%s %s" % (name, _labels(base(device, True)), _number(value if style == "old" else value / 100)))
    # A device-wide field on the parent row only (never summed over instances).
    parents = sorted({device.gpu: device for device in devices}.values(), key=lambda device: device.gpu)
    lines.append("# HELP %s SM clock frequency (in MHz)." % SM_CLOCK)
    lines.append("# TYPE %s gauge" % SM_CLOCK)
    for device in parents:
        lines.append("%s%s 1410" % (SM_CLOCK, _labels(base(device, False))))
    return "\n".join(lines) + "\n"


def _number(value):
    return ("%d" % value) if float(value).is_integer() else ("%.6f" % value)


class Exporter:
    """Serves render(...) on 127.0.0.1:PORT/metrics from a thread; counts scrapes."""

    def __init__(self, hostname, devices, style="old"):
        self.hostname, self.devices, self.style = hostname, devices, style
        self.scrapes = 0
        exporter = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                body = render(exporter.hostname, exporter.devices, exporter.style, exporter.scrapes).encode()
                exporter.scrapes += 1
                self.send_response(200)
                # The content type of the text format 0.0.4 (prometheus/common expfmt).
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
