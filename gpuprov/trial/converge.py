"""Converging the canary node: the site playbook, as `gpuprov apply -l NODE` runs it.

The same playbook, variables and limit as apply (gpuprov.runner): the node's own play (the
hardware check, drain rules, fail closed) and the cluster side, which labels only the planned
node and keeps every other node's device-plugin config in the ConfigMap. A step adds its
inventory source; putting the node back runs without one, so the node is converged to its
inventory plan again.

Each run gets a session of its own: a Ctrl-C at the terminal reaches the trial, which lets a
running converge finish (or, on a second Ctrl-C, stops it) before it puts the node back.
"""
import signal

from gpuprov.runner import converge_limit, converge_variables, run_playbook

PLAYBOOK = "gpuprov.gpu.site"


class ConvergeOutcome:
    """``ok``: the node and the cluster side ran without failure; ``changed``: something
    changed (or, in a dry run, would change); ``detail``: what, per host."""

    def __init__(self, rc, summary, node):
        self.rc = rc
        nodes = (summary or {}).get("nodes") or {}
        self.node_status = (nodes.get(node) or {}).get("status", "not run")
        bad = [h for h, n in nodes.items() if n.get("status") in ("failed", "unreachable")]
        self.ok = rc == 0 and not bad and self.node_status != "not run"
        self.changed = any(n.get("status") == "changed" for n in nodes.values())
        self.detail = "; ".join("%s %s: %s" % (host, n.get("status"), _what(n)) for host, n in sorted(nodes.items()))
        if not nodes:
            self.detail = "ansible-playbook exited with %d before any host ran" % rc


def _what(node):
    return node.get("failed") or "; ".join(node.get("changed") or []) or "-"


class NodeConverger:
    """Runs the site playbook for one node. ``running`` is the Popen of the run under way
    (None between runs), so an interrupt handler can signal it."""

    def __init__(self, inventories, node, vault=None, catalog_file=None, kubeconfig=None, kube_context=None,
                 stdout=None):
        self.inventories = list(inventories)
        self.node = node
        self.vault = vault
        self.variables = converge_variables([node], [1], 1, 0, catalog_file, kubeconfig, kube_context)
        self.stdout = stdout
        self.running = None
        self.runs = 0

    def _started(self, proc):
        self.running = proc

    def run(self, source=None, check=False):
        """Converge the node with the step's inventory ``source`` (None: its inventory plan)."""
        inventories = self.inventories + ([source] if source else [])
        extra_args = self.vault.playbook_args() if self.vault else []
        self.runs += 1
        try:
            rc, summary = run_playbook(PLAYBOOK, inventories, limit=converge_limit(self.node, [self.node]),
                                       check=check, extra_vars=self.variables, extra_args=extra_args,
                                       stdout=self.stdout, own_session=True, started=self._started)
        finally:
            self.running = None
        return ConvergeOutcome(rc, summary, self.node)

    def stop_running(self):
        """Ask the run under way to stop (ansible-playbook ends its tasks as on a Ctrl-C)."""
        proc = self.running
        if proc is not None and proc.poll() is None:
            try:
                proc.send_signal(signal.SIGINT)
            except OSError:
                pass
