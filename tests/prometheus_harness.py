"""A real Prometheus server for tests: 127.0.0.1 on a free port, a temporary data directory,
a 1 s scrape interval, torn down by stop().

Debian's `prometheus` package provides the binary (scripts/setup.sh installs it); tests
that need it skip with the reason when it is absent.
"""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

BINARY = shutil.which("prometheus") or "/usr/bin/prometheus"
MISSING = None if os.access(BINARY, os.X_OK) else (
    "the prometheus binary is not installed (Debian: apt-get install prometheus; scripts/setup.sh does it as root)")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Prometheus:
    """start(targets): targets is [(job, "127.0.0.1:PORT", {target label: value})]."""

    def __init__(self, targets, scrape_interval="1s"):
        self.directory = tempfile.mkdtemp(prefix="gpuprov-prometheus-")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        config = {"global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
                  "scrape_configs": []}
        for job, address, labels in targets:
            config["scrape_configs"].append({"job_name": job, "static_configs": [
                {"targets": [address], "labels": dict(labels)}]})
        self.config_path = os.path.join(self.directory, "prometheus.yml")
        with open(self.config_path, "w") as handle:
            yaml.safe_dump(config, handle)
        self.process = None

    def start(self, timeout=30):
        # free_port() is a probe, not a reservation: another process can bind the port before
        # Prometheus does. Prometheus then exits with "address already in use"; a new port is
        # the fix (the URL changes with it). Any other exit is an error at once.
        for attempt in range(3):
            try:
                return self._start_once(timeout)
            except RuntimeError as error:
                if attempt == 2 or "address already in use" not in str(error):
                    raise
                self.port = free_port()
                self.url = "http://127.0.0.1:%d" % self.port

    def _start_once(self, timeout):
        if getattr(self, "log", None):
            self.log.close()
        self.log = open(os.path.join(self.directory, "prometheus.log"), "ab")
        self.process = subprocess.Popen(
            [BINARY, "--config.file=%s" % self.config_path,
             "--storage.tsdb.path=%s" % os.path.join(self.directory, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError("prometheus exited %d: %s" % (self.process.returncode, self.log_text()))
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("prometheus did not become ready in %ds" % timeout)

    def query(self, promql):
        url = "%s/api/v1/query?%s" % (self.url, urllib.parse.urlencode({"query": promql}))
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.load(response)["data"]["result"]

    def wait_for_samples(self, metric, count, timeout=30):
        """Until every series of `metric` holds at least `count` samples over the last minute."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.query("count_over_time(%s[1m])" % metric)
            if result and all(float(item["value"][1]) >= count for item in result):
                return result
            time.sleep(0.5)
        raise RuntimeError("%s: fewer than %d samples after %ds; log: %s" % (metric, count, timeout, self.log_text()))

    def log_text(self):
        try:
            with open(os.path.join(self.directory, "prometheus.log"), errors="replace") as handle:
                return handle.read()[-2000:]
        except OSError:
            return ""

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "log", None):
            self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)
