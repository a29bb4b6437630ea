"""The Prometheus reader refuses or skips what cannot be a measurement (no server needed).

Prometheus' HTTP API writes every sample value as a string, and the special floats as "NaN",
"+Inf" and "-Inf" (prometheus.io/docs/prometheus/latest/querying/api/, "Expression query
result formats"). NaN is also what a stale or 0/0 series holds. None of these, nor a negative
value, a ratio above 100 % or an absurd GPU index, may reach a finding.
"""
import http.server
import json
import math
import threading

import pytest

from gpuprov.diagnose import prometheus

UUID = "GPU-34319582-d595-d1c7-d1d2-179bcfa61660"


class MatrixClient:
    """Answers query_range with a fixed matrix for one metric (the others have no series),
    as Prometheus does: metric -> [{"metric": labels, "values": [[time, "value"], ...]}]."""

    def __init__(self, series_by_metric):
        self.series_by_metric = series_by_metric

    def query_range(self, promql, start, end, step):
        for metric, series in self.series_by_metric.items():
            if metric + "{" in promql:
                return series
        return []

    def help_text(self, metric):
        return ""


def labels(gpu="0"):
    return {"__name__": "DCGM_FI_PROF_SM_ACTIVE", "UUID": UUID, "gpu": gpu, "Hostname": "node-a",
            "modelName": "NVIDIA A100-SXM4-40GB"}


def test_special_negative_and_over_100_percent_values_are_skipped_and_counted():
    values = [[1000, "0.5"], [1001, "NaN"], [1002, "+Inf"], [1003, "-Inf"], [1004, "-0.2"], [1005, "1.5"],
              [1006, "0.25"]]
    client = MatrixClient({"DCGM_FI_PROF_SM_ACTIVE": [{"metric": labels(), "values": values}]})
    data = prometheus.read(client, 3600, end=2000)
    (device,) = data["devices"]
    kept = [(stamp, point["sm_active"]) for stamp, point in device["points"]]
    assert kept == [(1000.0, 0.5), (1006.0, 0.25)]
    note = [n for n in data["notes"] if "skipped" in n]
    assert note and note[0].startswith("Prometheus: 5 value(s) and 0 series skipped: not measurements")
    assert all(math.isfinite(v) for _, p in device["points"] for v in p.values())


def test_memory_may_exceed_one_but_not_go_negative():
    values = [[1000, "40000"], [1001, "-1"]]
    client = MatrixClient({"DCGM_FI_DEV_FB_USED": [{"metric": dict(labels(), __name__="DCGM_FI_DEV_FB_USED"),
                                                    "values": values}]})
    (device,) = prometheus.read(client, 3600, end=2000)["devices"]
    assert [p["fb_used"] for _, p in device["points"]] == [40000.0]


@pytest.mark.parametrize("gpu", ["64", "999999999", "9" * 400])
def test_a_series_with_an_absurd_gpu_index_is_skipped_and_counted(gpu):
    client = MatrixClient({"DCGM_FI_PROF_SM_ACTIVE": [{"metric": labels(gpu), "values": [[1000, "0.5"]]},
                                                      {"metric": dict(labels("1"), UUID=UUID + "x"),
                                                       "values": [[1000, "0.5"]]}]})
    data = prometheus.read(client, 3600, end=2000)
    assert [d["index"] for d in data["devices"]] == [1]
    assert any("0 value(s) and 1 series skipped" in n for n in data["notes"])


def test_parse_duration_is_bounded():
    assert prometheus.parse_duration("366d") == 366 * 86400
    for text in ("367d", "9" * 50 + "w"):
        with pytest.raises(ValueError):
            prometheus.parse_duration(text)


class _Answer(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def answering_server():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_an_oversized_answer_is_refused_not_read(answering_server, monkeypatch):
    monkeypatch.setattr(prometheus, "MAX_ANSWER_BYTES", 1024)
    _Answer.body = json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                             "result": [{"metric": {}, "values": []}] * 200}}).encode()
    client = prometheus.Client("http://127.0.0.1:%d" % answering_server.server_port)
    with pytest.raises(prometheus.PrometheusError, match="larger than"):
        client.query_range("up", 0, 60, 15)


def test_a_deeply_nested_answer_is_refused_as_not_json(answering_server):
    _Answer.body = b"[" * 100000
    client = prometheus.Client("http://127.0.0.1:%d" % answering_server.server_port)
    with pytest.raises(prometheus.PrometheusError, match="not JSON"):
        client.query_range("up", 0, 60, 15)
