"""The real Helm client and a local chart repository for the cluster-side tests.

`helm_binary()` is helm v3.21.4, built by tests/peers/build.py beside the peers (a `tool` of
tests/peers/go.mod); without it a test skips, or fails under GPUPROV_REQUIRE_PEERS=1, as every
peer test. `helm_env(folder)` keeps helm's repository list, cache and plugins in FOLDER, away
from the user's own (~/.config/helm, ~/.cache/helm).

`ChartRepository` packages charts with the real `helm package`, indexes them with `helm repo
index` and serves the folder over HTTP on 127.0.0.1 (a thread running http.server), as a chart
repository (`helm repo add NAME URL`). From a shell (molecule's gpu_device_plugin scenario):

    python tests/helm_repo.py serve --dir DIR   # detached; DIR/repository.json: url, charts, helm
    python tests/helm_repo.py stop --dir DIR
 The charts come from the Go module cache, where Go keeps
upstream's sources at the versions the tests name:

- NVIDIA's device plugin chart: github.com/NVIDIA/k8s-device-plugin at the version
  tests/peers/go.mod pins (v0.19.3), deployments/helm/nvidia-device-plugin; its Chart.yaml says
  version 0.19.3. gpuprov pins chart 0.20.0, which the module proxy does not serve.
- node-feature-discovery: sigs.k8s.io/node-feature-discovery at v<the role's pinned NFD chart
  version> (0.19.0), deployment/helm/node-feature-discovery, fetched with `go mod download`
  (the peers do not import it). Its Chart.yaml at the tag says version 0.2.1: NFD's release
  packages the folder with the release's version, as the chart NVIDIA bundles shows
  (k8s-device-plugin v0.19.3 deployments/helm/nvidia-device-plugin/charts/
  node-feature-discovery-chart-0.17.3.tgz: version 0.17.3, appVersion v0.17.3), so it is
  packaged here with --version X.Y.Z --app-version vX.Y.Z. UNVERIFIED: that the published chart
  differs from the tag's folder in nothing else.
"""
import functools
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import yaml

if __name__ == "__main__":
    # Run from a shell: what the root conftest.py gives pytest (the collection on sys.path, the
    # Go harness folder for the test helpers).
    _TESTS = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(os.path.dirname(_TESTS), "collections"))
    os.environ.setdefault("GPUPROV_PEERS_DIR", os.path.join(_TESTS, "peers"))

from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.peerlib import peer_binary, unavailable  # noqa: E402
from ansible_collections.gpuprov.gpu.tests.unit.plugins.test_support.upstream_sources import (  # noqa: E402
    module_cache, module_file)
from testlib import REPO  # noqa: E402

DEVICE_PLUGIN_MODULE = "github.com/NVIDIA/k8s-device-plugin"
DEVICE_PLUGIN_CHART = "deployments/helm/nvidia-device-plugin"
NFD_MODULE = "sigs.k8s.io/node-feature-discovery"
NFD_CHART = "deployment/helm/node-feature-discovery"
ROLE_DEFAULTS = os.path.join(REPO, "roles", "gpu_device_plugin", "defaults", "main.yml")


def helm_binary():
    """The helm tests/peers/build.py built; skips (fails under GPUPROV_REQUIRE_PEERS=1) without it."""
    return peer_binary("helm")


def helm_env(folder, base=None):
    """Environment for helm (and kubernetes.core's helm modules) with its own config, cache and
    data homes under FOLDER (helm's XDG variables: helm.sh/helm/v3 pkg/helmpath)."""
    env = dict(base if base is not None else os.environ)
    for name in ("config", "cache", "data"):
        path = os.path.join(str(folder), name)
        os.makedirs(path, exist_ok=True)
        env["HELM_%s_HOME" % name.upper()] = path
    return env


def helm(args, env, check=True, timeout=120):
    """Run helm; returns the CompletedProcess (stdout and stderr as text)."""
    proc = subprocess.run([helm_binary(), *args], env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError("helm %s: exit %d\n%s%s" % (" ".join(args), proc.returncode, proc.stdout, proc.stderr))
    return proc


def role_default(name):
    with open(ROLE_DEFAULTS) as handle:
        return yaml.safe_load(handle)[name]


def device_plugin_chart_dir():
    return os.path.dirname(module_file(DEVICE_PLUGIN_MODULE, DEVICE_PLUGIN_CHART + "/Chart.yaml"))


def nfd_chart_dir(version):
    """NFD's chart folder at vVERSION in the module cache, downloaded through the module proxy
    when it is not there yet."""
    folder = os.path.join(module_cache(), "%s@v%s" % (NFD_MODULE, version), NFD_CHART)
    if not os.path.isfile(os.path.join(folder, "Chart.yaml")):
        go = shutil.which("go") or "/usr/local/go/bin/go"
        env = dict(os.environ, GOFLAGS="")
        proc = subprocess.run([go, "mod", "download", "-json", "%s@v%s" % (NFD_MODULE, version)], cwd="/",
                              env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not os.path.isfile(os.path.join(folder, "Chart.yaml")):
            unavailable("%s@v%s is not in the Go module cache and `go mod download` failed: %s"
                         % (NFD_MODULE, version, (proc.stdout + proc.stderr)[-500:]))
    return folder


class ChartRepository:
    """A chart repository in FOLDER served on 127.0.0.1 (start() / stop())."""

    def __init__(self, folder, env):
        self.folder = str(folder)
        self.env = env
        self.charts = {}        # chart name -> version packaged
        self._server = None
        self._thread = None
        os.makedirs(self.folder, exist_ok=True)

    def package(self, chart_dir, version=None, app_version=None):
        """`helm package` CHART_DIR into the repository (optionally with another version)."""
        args = ["package", "-d", self.folder, chart_dir]
        if version:
            args += ["--version", version]
        if app_version:
            args += ["--app-version", app_version]
        helm(args, self.env)
        with open(os.path.join(chart_dir, "Chart.yaml")) as handle:
            name = yaml.safe_load(handle)["name"]
        self.charts[name] = version or self._chart_yaml_version(chart_dir)
        return self.charts[name]

    @staticmethod
    def _chart_yaml_version(chart_dir):
        with open(os.path.join(chart_dir, "Chart.yaml")) as handle:
            return str(yaml.safe_load(handle)["version"])

    def index(self):
        """`helm repo index`: index.yaml with URLs relative to the repository."""
        helm(["repo", "index", self.folder], self.env)
        with open(os.path.join(self.folder, "index.yaml")) as handle:
            return yaml.safe_load(handle)

    def start(self):
        handler = functools.partial(_QuietHandler, directory=self.folder)
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="chart-repository", daemon=True)
        self._thread.start()
        return self

    @property
    def url(self):
        return "http://127.0.0.1:%d/" % self._server.server_address[1]

    def stop(self):
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=10)
            self._server = None


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # helm's requests are not test output
        pass


def gpu_charts_repository(folder, start=True):
    """A started repository with NVIDIA's device plugin chart and NFD's chart (see the module
    docstring for where each comes from and at which version)."""
    env = helm_env(os.path.join(str(folder), "helm"))
    repository = ChartRepository(os.path.join(str(folder), "charts"), env)
    repository.package(device_plugin_chart_dir())
    nfd_version = str(role_default("gpu_device_plugin_nfd_chart_version"))
    repository.package(nfd_chart_dir(nfd_version), version=nfd_version, app_version="v" + nfd_version)
    repository.index()
    return repository.start() if start else repository


def releases(env, kubeconfig):
    """{(namespace, name): release} of `helm list -A`."""
    out = helm(["list", "-A", "-a", "-o", "json", "--kubeconfig", kubeconfig], env).stdout
    return dict(((r["namespace"], r["name"]), r) for r in json.loads(out or "[]"))


def history(env, kubeconfig, namespace, name):
    """The release's revisions, oldest first (`helm history -o json`)."""
    out = helm(["history", name, "-n", namespace, "-o", "json", "--kubeconfig", kubeconfig], env).stdout
    return json.loads(out)


def values(env, kubeconfig, namespace, name, revision=None):
    """The user-supplied values of a release (revision), `helm get values -o json`."""
    args = ["get", "values", name, "-n", namespace, "-o", "json", "--kubeconfig", kubeconfig]
    if revision is not None:
        args += ["--revision", str(revision)]
    return json.loads(helm(args, env).stdout) or {}


def serve_detached(folder):
    """Package and index the charts, then serve them from a detached process; returns once
    FOLDER/repository.json names the URL (and the pid that `stop` ends)."""
    folder = os.path.abspath(folder)
    os.makedirs(folder, exist_ok=True)
    answer = os.path.join(folder, "repository.json")
    if os.path.exists(answer):
        os.unlink(answer)
    repository = gpu_charts_repository(folder, start=False)
    if os.fork():
        for _attempt in range(200):
            if os.path.exists(answer):
                return 0
            time.sleep(0.05)
        sys.stderr.write("helm_repo: the server did not write %s\n" % answer)
        return 1
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    repository.start()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    with open(answer + ".tmp", "w") as handle:
        json.dump({"url": repository.url, "charts": repository.charts, "helm": helm_binary(), "pid": os.getpid()}, handle)
    os.replace(answer + ".tmp", answer)
    while True:
        time.sleep(3600)


def stop_detached(folder):
    try:
        with open(os.path.join(os.path.abspath(folder), "repository.json")) as handle:
            pid = json.load(handle)["pid"]
    except (OSError, ValueError, KeyError):
        return 0
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    return 0


def main(argv=None):
    import argparse
    parser = argparse.ArgumentParser(description="A local chart repository with NVIDIA's and NFD's charts.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("serve", "stop"):
        sub.add_parser(name).add_argument("--dir", required=True)
    args = parser.parse_args(argv)
    return serve_detached(args.dir) if args.command == "serve" else stop_detached(args.dir)


if __name__ == "__main__":
    sys.exit(main())
