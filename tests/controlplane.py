"""A real Kubernetes control plane for the cluster-side tests, and the node agent beside it.

The control plane is the `controlplane` binary of tests/peers (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler of the release tests/peers/go.mod pins) on 127.0.0.1
free ports, with generated certificates, RBAC on and an admin kubeconfig. The node agent
(tests/node_agent.py) plays the kubelets: it keeps the declared Nodes Ready, publishes what
their device plugin advertises, runs and stops the pods bound to them.

In pytest (tests/conftest.py): the session fixture `control_plane` starts one per session
(one per xdist worker) and stops it at the end; the fixture `cluster` gives a test the same
control plane and clears what the test left (its namespaces, pods, nodes) afterwards. Tests
that use them carry `pytest.mark.control_plane`.

    def test_something(cluster):
        cluster.add_node("gpu-a100-01", labels={...}, extended={"nvidia.com/gpu": 8})
        core = cluster.core()                   # kubernetes.client.CoreV1Api, as admin
        run ansible with gpuprov_kubeconfig=cluster.kubeconfig and cluster.ansible_env()

From a shell (molecule scenarios, a fleet started by hand):

    python tests/controlplane.py start --dir DIR   # detached; prints KUBECONFIG=...; DIR/env
    python tests/controlplane.py add-node --dir DIR NAME [--labels JSON] [--extended JSON]
    python tests/controlplane.py stop --dir DIR

Without the binary (tests/peers not built) `peer_binary` skips the tests, or fails them under
GPUPROV_REQUIRE_PEERS=1, as every peer test.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class ControlPlaneError(Exception):
    pass


def controlplane_binary():
    """The built binary, or None (tests/peers/build.py builds it)."""
    sys.path.insert(0, os.path.join(HERE, "peers"))
    try:
        import build
    finally:
        sys.path.pop(0)
    path = os.path.join(build.build_dir(), "controlplane")
    return path if os.access(path, os.X_OK) else None


def _write_json_atomically(path, data):
    folder = os.path.dirname(path)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    with os.fdopen(handle, "w") as out:
        json.dump(data, out, sort_keys=True)
    os.replace(temporary, path)


class ControlPlane:
    """A running control plane and its node agent (start() / stop())."""

    def __init__(self, folder, process, ready, agent):
        self.folder = folder
        self.process = process
        self.ready = ready
        self.agent = agent
        self.kubeconfig = ready["kubeconfig"]
        self.server = ready["server"]
        self.seconds = ready["seconds"]
        self._api_client = None
        self.baseline = {}
        self._dynamic = None

    # -- lifecycle ----------------------------------------------------------------------------
    @classmethod
    def start(cls, folder, binary=None, timeout=300, detach=False):
        """Start etcd, the API server, the controllers, the scheduler and the node agent; returns
        once every one serves. detach=True: they outlive this process (stop with stop_folder)."""
        binary = binary or controlplane_binary()
        if binary is None:
            raise ControlPlaneError("the controlplane binary is not built (python tests/peers/build.py)")
        folder = os.path.abspath(folder)
        os.makedirs(folder, exist_ok=True)
        started = time.monotonic()
        # `up` picks free ports and then binds them; another process can take one in between
        # (it is a probe, not a reservation). That start fails with "address already in use"
        # and a second start, on new ports, is the fix; any other failure is reported at once.
        for attempt in (1, 2):
            process, ready = cls._up(binary, folder, timeout, detach)
            if ready.get("ready") or attempt == 2 or "address already in use" not in str(ready.get("error")):
                break
        if not ready.get("ready"):
            raise ControlPlaneError("control plane did not start: %s" % ready.get("error"))
        agent = NodeAgent.start(os.path.join(folder, "agent"), ready["kubeconfig"], detach=detach)
        plane = cls(folder, process, ready, agent)
        plane.seconds = dict(ready["seconds"], with_agent=time.monotonic() - started)
        # What the cluster has of its own in the system namespaces (reset() keeps it).
        plane.baseline = dict((ns, sorted(c.metadata.name for c in plane.core().list_namespaced_config_map(ns).items))
                              for ns in SYSTEM_NAMESPACES)
        _write_json_atomically(os.path.join(folder, "baseline.json"), plane.baseline)
        with open(os.path.join(folder, "env"), "w") as handle:
            handle.write("KUBECONFIG=%s\n" % plane.kubeconfig)
        _write_json_atomically(os.path.join(folder, "pids.json"),
                               {"controlplane": process.pid, "agent": agent.process.pid})
        return plane

    @staticmethod
    def _up(binary, folder, timeout, detach):
        """One `controlplane up`: (its process, its ready line); the process is ended when the
        line is not ready."""
        log = open(os.path.join(folder, "controlplane.log"), "a")
        args = [binary, "up", "--dir", os.path.join(folder, "cp"), "--ready-timeout", str(timeout)]
        if detach:
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                       start_new_session=True, text=True)
        else:
            # The lifeline: when this process ends (a crashed pytest included), stdin closes
            # and the control plane stops.
            process = subprocess.Popen(args + ["--stdin-lifeline"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=log, text=True)
        log.close()
        line = process.stdout.readline()
        try:
            ready = json.loads(line)
        except ValueError:
            ready = {"error": "no ready line (%r); see %s" % (line[-300:], log.name)}
        if not ready.get("ready"):
            process.kill()
            process.wait()
        return process, ready

    def stop(self):
        self.agent.stop()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def restarts(self):
        """The supervisor's restart notes from the components' logs (`up` restarts a component
        that exits, as the kubelet restarts a static pod), one "name: why" per restart."""
        notes = []
        logs = os.path.join(self.ready["dir"], "logs")
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else ():
            with open(os.path.join(logs, name), errors="replace") as handle:
                for line in handle:
                    if line.startswith("supervise: ") and "starting it again" in line:
                        notes.append(line[len("supervise: "):].split("; starting it again")[0].strip())
        return notes

    @classmethod
    def attach(cls, folder):
        """A control plane another process started in FOLDER (start(..., detach=True), or a
        pytest fixture): its clients and its agent's node files, without owning its processes."""
        folder = os.path.abspath(folder)
        with open(os.path.join(folder, "cp", "ready.json")) as handle:
            ready = json.load(handle)
        return cls(folder, None, ready, NodeAgent(os.path.join(folder, "agent"), None))

    @staticmethod
    def stop_folder(folder):
        """Stop a detached control plane and agent by the pids start() wrote."""
        try:
            with open(os.path.join(folder, "pids.json")) as handle:
                pids = json.load(handle)
        except (OSError, ValueError):
            return False
        for name in ("agent", "controlplane"):
            try:
                os.kill(pids[name], signal.SIGTERM)
            except (OSError, KeyError):
                continue
            for _ in range(300):
                try:
                    os.kill(pids[name], 0)
                except OSError:
                    break
                time.sleep(0.1)
        os.unlink(os.path.join(folder, "pids.json"))
        return True

    def describe(self):
        seconds = self.seconds
        return ("control plane %s (%s): ready in %.1f s (etcd %.1f, kube-apiserver %.1f, controller-manager %.1f, "
                "scheduler %.1f), with the node agent %.1f s; logs in %s"
                % (self.server, self.ready.get("version"), seconds["total"], seconds["etcd"], seconds["kube-apiserver"],
                   seconds["kube-controller-manager"], seconds["kube-scheduler"], seconds["with_agent"],
                   os.path.join(self.folder, "cp", "logs")))

    # -- clients ------------------------------------------------------------------------------
    def api_client(self):
        if self._api_client is None:
            from kubernetes import config
            self._api_client = config.new_client_from_config(config_file=self.kubeconfig)
        return self._api_client

    def core(self):
        from kubernetes import client
        return client.CoreV1Api(self.api_client())

    def apps(self):
        from kubernetes import client
        return client.AppsV1Api(self.api_client())

    def policy(self):
        from kubernetes import client
        return client.PolicyV1Api(self.api_client())

    def create(self, manifest):
        """Create one object from a manifest dict (any kind the API serves), as admin. The
        dict goes to the API server as it is (the dynamic client), so the server, not the
        client's models, judges it: quantities may be numbers, as in kubectl apply."""
        from kubernetes import dynamic
        if self._dynamic is None:
            self._dynamic = dynamic.DynamicClient(self.api_client())
        resource = self._dynamic.resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
        namespace = (manifest.get("metadata") or {}).get("namespace")
        if resource.namespaced:
            return resource.create(body=manifest, namespace=namespace or "default")
        return resource.create(body=manifest)

    def ansible_env(self, base=None):
        """Environment for ansible-playbook against this cluster: the real kubernetes.core
        (the pinned `ansible` package's) and this repository's collection."""
        env = dict(base if base is not None else os.environ)
        env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(REPO, "collections")
        env["K8S_AUTH_KUBECONFIG"] = self.kubeconfig
        for name in ("GPUPROV_FAKE_K8S_STATE", "GPUPROV_FAKE_CALL_LOG"):
            env.pop(name, None)
        return env

    def run_playbook(self, playbook, tmp_path, hosts, variables=None, on_line=None, extra_args=(), timeout=600,
                     env=None):
        """ansible-playbook against this cluster on local-connection HOSTS ({name: vars}), with
        gpuprov_kubeconfig set for each; on_line(line) sees its output as it comes; ENV: more
        environment variables (e.g. helm's homes). Returns a CompletedProcess with stdout and
        stderr together in stdout."""
        import yaml
        inventory = os.path.join(str(tmp_path), "inventory.yml")
        with open(inventory, "w") as handle:
            yaml.safe_dump({"all": {"hosts": dict(
                (name, dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                             "gpuprov_kubeconfig": self.kubeconfig}, **(host_vars or {})))
                for name, host_vars in hosts.items())}}, handle)
        run_env = self.ansible_env()
        run_env.update(env or {})
        run_env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
                       ANSIBLE_LOCAL_TEMP=os.path.join(str(tmp_path), "tmp"))
        args = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory, playbook,
                "-e", json.dumps(variables or {}), *extra_args]
        process = subprocess.Popen(args, cwd=REPO, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines = []
        for line in process.stdout:
            lines.append(line)
            if on_line is not None:
                on_line(line)
        process.wait(timeout=timeout)
        return subprocess.CompletedProcess(args, process.returncode, "".join(lines), "")

    def service_account_kubeconfig(self, path, namespace, name):
        """A kubeconfig that authenticates as ServiceAccount NAMESPACE/NAME (a token from the
        TokenRequest API): a user with exactly the RBAC the test grants it."""
        from kubernetes import client
        core = self.core()
        try:
            core.create_namespace({"metadata": {"name": namespace}})
        except client.ApiException as error:
            if error.status != 409:
                raise
        try:
            core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
        except client.ApiException as error:
            if error.status != 409:
                raise
        token = core.create_namespaced_service_account_token(
            name, namespace, {"spec": {"expirationSeconds": 3600}}).status.token
        with open(self.ready["ca_cert"], "rb") as handle:
            import base64
            ca = base64.b64encode(handle.read()).decode()
        user = "system:serviceaccount:%s:%s" % (namespace, name)
        text = {"apiVersion": "v1", "kind": "Config",
                "clusters": [{"name": "gpuprov-test", "cluster": {"server": self.server,
                                                                  "certificate-authority-data": ca}}],
                "users": [{"name": user, "user": {"token": token}}],
                "contexts": [{"name": "sa", "context": {"cluster": "gpuprov-test", "user": user}}],
                "current-context": "sa"}
        with open(path, "w") as handle:
            json.dump(text, handle)
        os.chmod(path, 0o600)
        return path

    # -- nodes --------------------------------------------------------------------------------
    def add_node(self, name, wait=60, **spec):
        """Declare a node to the agent and wait until it is Ready and schedulable by taints
        (the node lifecycle controller removed the not-ready taint). See node_agent.py for the
        spec keys (labels, taints, unschedulable, cpu, memory, extended, plugin, address)."""
        self.agent.add_node(name, **spec)
        return self.wait_for_node(name, wait)

    def remove_node(self, name):
        self.agent.remove_node(name)

    def update_node(self, name, **changes):
        """Change keys of a declared node's spec (e.g. what its device plugin advertises when it
        next starts); the Node itself stays."""
        self.agent.update_node(name, **changes)

    def wait_for_node(self, name, timeout=60):
        core = self.core()
        deadline = time.monotonic() + timeout
        node = None
        while time.monotonic() < deadline:
            self.agent.check_alive()
            try:
                node = core.read_node(name)
            except Exception:
                node = None
            if node is not None:
                ready = [c for c in node.status.conditions or [] if c.type == "Ready" and c.status == "True"]
                taints = [t.key for t in node.spec.taints or [] if t.key.startswith("node.kubernetes.io/")]
                if ready and not taints:
                    return node
            time.sleep(0.2)
        raise ControlPlaneError("node %s not Ready and untainted after %ss: %s" % (name, timeout, node))

    # -- between tests ------------------------------------------------------------------------
    def reset(self, timeout=120):
        """Remove what tests made: workloads and pods everywhere (at once), non-system
        namespaces, PodDisruptionBudgets, ConfigMaps and events in the system namespaces, the
        agent's nodes, and cluster-wide RBAC objects labelled gpuprov.test/owned."""
        from kubernetes import client
        core, apps, policy = self.core(), self.apps(), self.policy()
        rbac = client.RbacAuthorizationV1Api(self.api_client())
        batch = client.BatchV1Api(self.api_client())
        namespaces = [ns.metadata.name for ns in core.list_namespace().items]
        for namespace in namespaces:
            for delete in (apps.delete_collection_namespaced_daemon_set, apps.delete_collection_namespaced_deployment,
                           apps.delete_collection_namespaced_replica_set, apps.delete_collection_namespaced_stateful_set,
                           batch.delete_collection_namespaced_job,
                           policy.delete_collection_namespaced_pod_disruption_budget):
                delete(namespace, propagation_policy="Background")
            core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
            core.delete_collection_namespaced_event(namespace)
            if namespace in SYSTEM_NAMESPACES:
                for config_map in core.list_namespaced_config_map(namespace).items:
                    if config_map.metadata.name not in self.baseline.get(namespace, ()):
                        core.delete_namespaced_config_map(config_map.metadata.name, namespace)
            else:
                try:
                    core.delete_namespace(namespace)
                except client.ApiException as error:
                    if error.status not in (404, 409):
                        raise
        for binding in rbac.list_cluster_role_binding(label_selector="gpuprov.test/owned").items:
            rbac.delete_cluster_role_binding(binding.metadata.name)
        for role in rbac.list_cluster_role(label_selector="gpuprov.test/owned").items:
            rbac.delete_cluster_role(role.metadata.name)
        self.agent.remove_all()
        for node in core.list_node().items:
            try:
                core.delete_node(node.metadata.name)
            except client.ApiException as error:
                if error.status != 404:
                    raise
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = [ns.metadata.name for ns in core.list_namespace().items if ns.metadata.name not in SYSTEM_NAMESPACES]
            if not left and not core.list_node().items:
                break
            time.sleep(0.2)
        else:
            raise ControlPlaneError("reset: namespaces %s still there after %ss" % (left, timeout))
        self.agent.clear_events()


def wait_for(predicate, timeout=60, what="condition", interval=0.2):
    """predicate()'s first true value within timeout seconds; AssertionError naming WHAT otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


class NodeAgent:
    """The node agent process (tests/node_agent.py) and the node files it reads."""

    def __init__(self, folder, process):
        self.folder = folder
        self.process = process

    @classmethod
    def start(cls, folder, kubeconfig, detach=False, timeout=60):
        os.makedirs(os.path.join(folder, "nodes"), exist_ok=True)
        ready = os.path.join(folder, "ready")
        if os.path.exists(ready):
            os.unlink(ready)
        log = open(os.path.join(folder, "agent.log"), "w")
        args = [sys.executable, os.path.join(HERE, "node_agent.py"), "--kubeconfig", kubeconfig, "--dir", folder]
        if detach:
            process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        else:
            process = subprocess.Popen(args + ["--stdin-lifeline"], stdin=subprocess.PIPE, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while not os.path.exists(ready):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                with open(log.name) as handle:
                    raise ControlPlaneError("node agent did not start: %s" % handle.read()[-2000:])
            time.sleep(0.05)
        return cls(folder, process)

    def check_alive(self):
        if self.process is not None and self.process.poll() is not None:
            with open(os.path.join(self.folder, "agent.log")) as handle:
                raise ControlPlaneError("the node agent exited (%s): %s" % (self.process.returncode, handle.read()[-3000:]))

    def add_node(self, name, **spec):
        _write_json_atomically(os.path.join(self.folder, "nodes", name + ".json"), dict(spec, name=name))

    def update_node(self, name, **changes):
        path = os.path.join(self.folder, "nodes", name + ".json")
        with open(path) as handle:
            spec = json.load(handle)
        spec.update(changes)
        _write_json_atomically(path, spec)

    def remove_node(self, name):
        path = os.path.join(self.folder, "nodes", name + ".json")
        if os.path.exists(path):
            os.unlink(path)

    def remove_all(self, timeout=30):
        """Forget every node, and wait until the agent's loop has seen it (it writes known.json):
        a node declared again at once under the same name is then created again."""
        for entry in os.listdir(os.path.join(self.folder, "nodes")):
            if entry.endswith(".json"):
                os.unlink(os.path.join(self.folder, "nodes", entry))
        deadline = time.monotonic() + timeout
        while self.known():
            self.check_alive()
            if time.monotonic() > deadline:
                raise ControlPlaneError("the node agent still plays %s after %ss" % (self.known(), timeout))
            time.sleep(0.05)

    def known(self):
        """The nodes the agent plays now (none before its first one)."""
        try:
            with open(os.path.join(self.folder, "known.json")) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return []

    def events(self):
        """What the agent saw (node_agent.py: pod start/stop, cordoned nodes), oldest first."""
        path = os.path.join(self.folder, "events.jsonl")
        if not os.path.exists(path):
            return []
        with open(path) as handle:
            return [json.loads(line) for line in handle if line.strip()]

    def clear_events(self):
        path = os.path.join(self.folder, "events.jsonl")
        if os.path.exists(path):
            os.unlink(path)

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def main(argv=None):
    parser = argparse.ArgumentParser(description="Start or stop a test control plane with its node agent.")
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("start", help="start detached; prints KUBECONFIG=... (also in DIR/env)")
    start.add_argument("--dir", required=True)
    stop = sub.add_parser("stop", help="stop what start started in DIR")
    stop.add_argument("--dir", required=True)
    node = sub.add_parser("add-node", help="declare a node to the agent and wait until it is Ready")
    node.add_argument("--dir", required=True)
    node.add_argument("name")
    node.add_argument("--spec", default="{}", help="JSON of the node's spec (node_agent.py): labels, extended, ...")
    args = parser.parse_args(argv)
    if args.command == "start":
        try:
            plane = ControlPlane.start(args.dir, detach=True)
        except ControlPlaneError as error:
            print("controlplane: %s" % error, file=sys.stderr)
            return 1
        print(plane.describe(), file=sys.stderr)
        print("KUBECONFIG=%s" % plane.kubeconfig)
        return 0
    if args.command == "stop":
        return 0 if ControlPlane.stop_folder(os.path.abspath(args.dir)) else 1
    plane = ControlPlane.attach(args.dir)
    plane.add_node(args.name, **json.loads(args.spec))
    print("node %s Ready" % args.name, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
