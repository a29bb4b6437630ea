"""Inventory hosts -> SSH sessions streaming the sampling program (paramiko).

Hosts and their connection variables come from Ansible's own InventoryManager, as every
other gpuprov command reads the inventory: ansible_host, ansible_port, ansible_user,
ansible_ssh_private_key_file, and the interpreter in ansible_python_interpreter. Host keys
are checked against known_hosts with paramiko's RejectPolicy: an unknown host is refused,
never added, and a changed key is refused and named. The known_hosts files are those given
with --known-hosts, else the UserKnownHostsFile in the host's ansible_ssh_common_args or
ansible_ssh_extra_args (as ssh itself would use), else ~/.ssh/known_hosts.
"""
import os
import re
import shlex
import threading
import time

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory import InventoryError

from gpuprov.top.node_script import SCRIPT, BadLine, parse_line

_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./+@-]+\Z")
_KNOWN_HOSTS_ARG = re.compile(r"UserKnownHostsFile=(\S+)")


class Target:
    def __init__(self, name, host, port, user, key_file, python, known_hosts):
        self.name, self.host, self.port, self.user = name, host, port, user
        self.key_file, self.python, self.known_hosts = key_file, python, known_hosts


# The variables `top` connects with; rendered like gpuprov_* ones (offline, lookups limited).
CONNECTION_VARS = ("ansible_host", "ansible_port", "ansible_user", "ansible_ssh_private_key_file",
                   "ansible_private_key_file", "ansible_python_interpreter", "ansible_ssh_common_args",
                   "ansible_ssh_extra_args")


def load_targets(sources, limit=None, known_hosts=None, vault=None, reading=None):
    """[Target] for the hosts of the inventory (matching limit). InventoryError on bad input.

    The inventory is read by the same offline reader as `gpuprov plan` (offline inventory
    plugins, lookups limited to file/env/vars, vault options): a template in a connection
    variable cannot run a command on the controller.
    """
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.terminal_text import escape
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory import load_inventory

    hosts, _ = load_inventory(list(sources), limit, vault=vault, names=CONNECTION_VARS, every_host=True,
                              reading=reading)
    if not hosts:
        raise InventoryError("inventory %s: no hosts%s" % (", ".join(sources), " match %r" % limit if limit else ""))
    targets, problems = [], []
    for host_vars in hosts:
        host = host_vars.host
        if host_vars.problems:
            problems.extend("%s: %s: %s" % (escape(host), escape(name), escape(reason))
                            for name, reason in host_vars.problems)
            continue

        def var(name, default=None, _vars=host_vars.variables):
            return _vars.get(name, default)

        port = var("ansible_port", 22)
        try:
            port = int(port)
            if not 0 < port < 65536:
                raise ValueError
        except (TypeError, ValueError):
            problems.append("%s: ansible_port: %s is not a TCP port" % (escape(host), escape(repr(port)[:60])))
            continue
        python = var("ansible_python_interpreter") or "python3"
        if python != "python3" and not _SAFE_PATH.match(str(python)):
            # auto/auto_silent or a templated value: the PATH's python3 is the honest guess.
            python = "python3"
        files = list(known_hosts or [])
        if not files:
            args = " ".join(str(var(name) or "") for name in ("ansible_ssh_common_args", "ansible_ssh_extra_args"))
            files = [os.path.expanduser(path) for path in _KNOWN_HOSTS_ARG.findall(args)]
        files = files or [os.path.expanduser("~/.ssh/known_hosts")]
        key_file = var("ansible_ssh_private_key_file") or var("ansible_private_key_file")
        targets.append(Target(host, str(var("ansible_host") or host), port,
                              str(var("ansible_user") or os.environ.get("USER") or "root"),
                              os.path.expanduser(str(key_file)) if key_file else None, str(python), files))
    if problems:
        raise InventoryError("\n".join(problems))
    return targets


def command(target, interval):
    """The remote command line: the fixed program, quoted for the node's shell."""
    return shlex.join([target.python, "-c", SCRIPT, "%g" % float(interval)])


class Stream:
    """One node's latest samples, filled by a thread reading its channel."""

    def __init__(self, target, interval):
        self.target, self.interval = target, interval
        self.status, self.message = "connecting", ""
        self.samples, self.updated, self.frames = [], None, 0
        self.client = None
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="top-%s" % target.name, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _set(self, status, message=""):
        with self.lock:
            self.status, self.message = status, message

    def _connect(self):
        import paramiko

        target = self.target
        client = paramiko.SSHClient()
        loaded = []
        for path in target.known_hosts:
            if os.path.isfile(path):
                client.get_host_keys().load(path)
                loaded.append(path)
        # Never trust a key on first sight, never add one.
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        self.client = client
        where = "[%s]:%d" % (target.host, target.port) if target.port != 22 else target.host
        try:
            client.connect(target.host, port=target.port, username=target.user, key_filename=target.key_file,
                           look_for_keys=target.key_file is None, allow_agent=target.key_file is None,
                           timeout=10, banner_timeout=10, auth_timeout=10)
        except paramiko.BadHostKeyException as error:
            raise HostKeyRefused("host key of %s (%s) does not match known_hosts (%s): refused; if the node was "
                                 "reinstalled, check and replace its entry" % (where, error.key.get_name(),
                                                                                ", ".join(loaded))) from None
        except paramiko.SSHException as error:
            if "not found in known_hosts" in str(error):
                raise HostKeyRefused("%s is not in known_hosts (%s): refused, never added; add its key after "
                                     "checking it (ssh-keyscan + fingerprint)" % (where, ", ".join(loaded) or
                                                                                 "none found")) from None
            raise
        return client

    def _run(self):
        import paramiko

        try:
            client = self._connect()
            channel = client.get_transport().open_session()
            channel.exec_command(command(self.target, self.interval))
            # A node that vanishes without closing the connection: no line for this long.
            channel.settimeout(max(15.0, 5 * self.interval))
            self._set("streaming")
            reader = channel.makefile("r")
            for line in reader:
                try:
                    samples = parse_line(line)
                except BadLine as error:
                    self._set("error", str(error))
                    continue
                with self.lock:
                    self.samples, self.updated, self.status, self.message = samples, time.time(), "ok", ""
                    self.frames += 1
            status = channel.recv_exit_status() if channel.exit_status_ready() else None
            channel.settimeout(2.0)
            try:
                errors = channel.makefile_stderr("r").read().decode(errors="replace").strip().splitlines()
            except (TimeoutError, OSError):
                errors = []
            self._set("unreachable", "the sampling command ended%s%s" % (
                " (exit %s)" % status if status is not None else "", ": " + errors[-1] if errors else
                "; the connection closed"))
        except HostKeyRefused as error:
            self._set("refused", str(error))
        except TimeoutError:
            self._set("unreachable", "no sample for %.0f s" % max(15.0, 5 * self.interval))
        except (paramiko.SSHException, OSError, EOFError) as error:
            self._set("unreachable", "%s: %s" % (type(error).__name__, error or "connection lost"))
        finally:
            self.close()

    def snapshot(self):
        with self.lock:
            return {"status": self.status, "message": self.message, "samples": list(self.samples),
                    "updated": self.updated, "frames": self.frames}

    def close(self):
        if self.client is not None:
            self.client.close()


class HostKeyRefused(Exception):
    """The node's host key is unknown or does not match known_hosts."""
