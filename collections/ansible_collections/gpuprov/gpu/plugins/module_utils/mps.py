# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Host MPS control daemon: directories, compute mode, default limits.

One ``nvidia-cuda-mps-control`` daemon serves a set of GPUs through its pipe directory.
The daemon is told what to do by running ``nvidia-cuda-mps-control`` again as a client,
with the same ``CUDA_MPS_PIPE_DIRECTORY``, and writing commands to its stdin.

Facts this code relies on (NVIDIA MPS documentation, k8s-device-plugin
``cmd/mps-control-daemon/mps/daemon.go``):

* ``-d`` forks the daemon and returns; the pipe directory then holds the ``control``
  endpoint. A client without an answering daemon prints "Cannot find MPS control daemon
  process" and exits non-zero.
* ``set_default_active_thread_percentage`` and ``set_default_device_pinned_mem_limit``
  apply to MPS servers started afterwards only; running servers keep their limits. The
  defaults are lost when the daemon quits, so they are set again after every start.
* Devices named in the daemon's ``CUDA_VISIBLE_DEVICES`` are remapped: ordinal N is the
  N-th entry. This code always starts the daemon with the GPU UUIDs in NVML index order
  and addresses per-device limits by that ordinal.
* A rejected command prints an error but the client still exits 0, so every change is
  read back and compared.
* MPS on MIG devices is out of scope here (the device plugin refuses it as well).

Nothing here imports Ansible: the module passes in a runner built on
``AnsibleModule.run_command``; ``tests/device/mps_real.py`` passes a subprocess runner.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import grp
import json
import os
import pwd
import re
import stat
import subprocess
import tempfile
import time

from ansible_collections.gpuprov.gpu.plugins.module_utils.nvml import NvmlError

MPS_CONTROL = "nvidia-cuda-mps-control"
DEFAULT_PIPE_DIRECTORY = "/tmp/nvidia-mps"
DEFAULT_LOG_DIRECTORY = "/var/log/nvidia-mps"
CONTROL_ENDPOINT = "control"
PID_FILE = "nvidia-cuda-mps-control.pid"
# What this code started the daemon with: lets a later run see that the GPU set changed.
METADATA_FILE = ".gpuprov-mps.json"

COMPUTE_MODE_DEFAULT = "DEFAULT"
COMPUTE_MODE_EXCLUSIVE_PROCESS = "EXCLUSIVE_PROCESS"

# sun_path of a Unix socket holds 108 bytes including the terminating NUL.
UNIX_SOCKET_PATH_MAX = 107
# Directories shared with everything else on the host: cleaning a stale pipe directory
# removes its files, which must never happen to these.
SHARED_DIRECTORIES = frozenset([
    "/", "/bin", "/boot", "/dev", "/dev/shm", "/etc", "/home", "/lib", "/opt", "/proc",
    "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/var/lib",
    "/var/log", "/var/run", "/var/tmp",
])
# Variables that would silently change what a freshly started daemon uses as defaults.
DAEMON_ENV_OVERRIDES = ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT")

_MEMORY_RE = re.compile(r"^\s*([0-9]+)\s*([MG]?)(?:i?B)?\s*$", re.IGNORECASE)
_UUID_RE = re.compile(r"^(GPU|MIG)-[0-9A-Za-z-]+$")


class MpsError(Exception):
    """A failure to report to the user; the message names the GPU, path or daemon."""


# ------------------------------------------------------------------------------ parsing


def parse_memory_limit(text):
    """``'20G'`` / ``'20350M'`` -> MiB; ``'0'`` or nothing (no limit) -> None.

    The reply format of ``get_default_device_pinned_mem_limit`` is not fully documented
    (seen as ``3G`` and ``20350M``); a bare number is taken as MiB. UNVERIFIED beyond that.
    """
    text = (text or "").strip()
    if not text:
        return None
    match = _MEMORY_RE.match(text)
    if not match:
        raise MpsError("unexpected pinned memory limit reply %r from %s" % (text, MPS_CONTROL))
    value = int(match.group(1))
    if match.group(2).upper() == "G":
        value *= 1024
    return value or None


def format_memory_limit(mib):
    """MiB -> the ``<N>M`` form that ``set_default_device_pinned_mem_limit`` takes."""
    return "%dM" % mib


def parse_percentage(text):
    text = (text or "").strip()
    try:
        return float(text)
    except ValueError:
        raise MpsError("unexpected active thread percentage reply %r from %s" % (text, MPS_CONTROL))


def parse_server_list(text):
    pids = []
    for line in (text or "").split():
        if not line.isdigit():
            raise MpsError("unexpected get_server_list reply %r from %s" % (text, MPS_CONTROL))
        pids.append(int(line))
    return pids


def parse_mode(value, field):
    """``'0755'`` / ``'755'`` / 493 -> 0o755, rejecting anything that is not an octal mode."""
    if isinstance(value, int) and not isinstance(value, bool):
        mode = value
    elif isinstance(value, str) and re.match(r"^0?[0-7]{3,4}$", value.strip()):
        mode = int(value.strip(), 8)
    else:
        raise MpsError("%s must be an octal mode such as '0755', got %r" % (field, value))
    if not 0 <= mode <= 0o7777:
        raise MpsError("%s must be an octal mode such as '0755', got %r" % (field, value))
    return mode


# ------------------------------------------------------------------------------ runners


class CommandRunner:
    """Runs the MPS control binary. ``run`` is a short client call, ``launch`` starts ``-d``.

    ``launch`` captures output in a file rather than a pipe: a daemon that keeps the
    launcher's stdout open would otherwise make the caller wait for EOF until it exits.
    """

    def __init__(self, timeout=30):
        self.timeout = timeout

    def run(self, argv, data, environ_update):
        raise NotImplementedError

    def launch(self, argv, environ_update, remove_env=()):
        env = dict(os.environ)
        for name in remove_env:
            env.pop(name, None)
        env.update(environ_update)
        with tempfile.TemporaryFile() as output:
            try:
                proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=output,
                                      stderr=subprocess.STDOUT, env=env, timeout=self.timeout,
                                      check=False)
            except OSError as exc:
                return 127, "", str(exc)
            except subprocess.TimeoutExpired:
                return 124, "", "%s did not return within %d seconds" % (" ".join(argv), self.timeout)
            output.seek(0)
            text = output.read().decode("utf-8", "replace")
        return proc.returncode, text, ""


class SubprocessRunner(CommandRunner):
    """Plain subprocess runner, for scripts that run outside Ansible."""

    def run(self, argv, data, environ_update):
        env = dict(os.environ)
        env.update(environ_update)
        try:
            proc = subprocess.run(argv, input=data, capture_output=True, text=True, env=env,
                                  timeout=self.timeout, check=False)
        except OSError as exc:
            return 127, "", str(exc)
        except subprocess.TimeoutExpired:
            return 124, "", "%s did not return within %d seconds" % (" ".join(argv), self.timeout)
        return proc.returncode, proc.stdout, proc.stderr


class ModuleRunner(CommandRunner):
    """Client calls through ``AnsibleModule.run_command`` (argv list, stdin data, no shell)."""

    def __init__(self, module, timeout=30):
        super(ModuleRunner, self).__init__(timeout)
        self.module = module

    def run(self, argv, data, environ_update):
        return self.module.run_command(argv, data=data, environ_update=environ_update,
                                       check_rc=False)


# ---------------------------------------------------------------------- control client


class MpsControl:
    """One MPS control daemon, addressed by its pipe directory."""

    def __init__(self, runner, pipe_directory, log_directory, binary=MPS_CONTROL,
                 sleep=time.sleep, clock=time.monotonic):
        self.runner = runner
        self.pipe_directory = pipe_directory
        self.log_directory = log_directory
        self.binary = binary
        self._sleep = sleep
        self._clock = clock

    @property
    def environment(self):
        return {"CUDA_MPS_PIPE_DIRECTORY": self.pipe_directory,
                "CUDA_MPS_LOG_DIRECTORY": self.log_directory}

    @property
    def endpoint(self):
        return os.path.join(self.pipe_directory, CONTROL_ENDPOINT)

    def describe(self):
        return "the MPS control daemon on %s" % self.pipe_directory

    def endpoint_exists(self):
        return os.path.lexists(self.endpoint)

    def client(self, command):
        """Send one command; returns (rc, stdout, stderr) as they came."""
        return self.runner.run([self.binary], command, self.environment)

    def command(self, command):
        """Send one command to an answering daemon; its reply, or MpsError."""
        rc, out, err = self.client(command)
        if rc != 0:
            raise MpsError("%s did not accept %r (rc=%d): %s" % (
                self.describe(), command, rc, (out + err).strip() or "no output"))
        return out

    def server_list(self):
        """PIDs of the running MPS servers, or None when no daemon answers."""
        if not self.endpoint_exists():
            return None
        rc, out, _err = self.client("get_server_list")
        if rc != 0:
            return None
        return parse_server_list(out)

    def pid(self):
        try:
            with open(os.path.join(self.pipe_directory, PID_FILE)) as handle:
                text = handle.read().strip()
        except (IOError, OSError):
            return None
        return int(text) if text.isdigit() else None

    def start(self, visible_devices):
        env = dict(self.environment)
        env["CUDA_VISIBLE_DEVICES"] = ",".join(visible_devices)
        rc, out, err = self.runner.launch([self.binary, "-d"], env, remove_env=DAEMON_ENV_OVERRIDES)
        if rc != 0:
            raise MpsError("could not start %s: %s -d exited %d: %s; see %s" % (
                self.describe(), self.binary, rc, (out + err).strip() or "no output",
                os.path.join(self.log_directory, "control.log")))
        return self.wait(True)

    def quit(self):
        self.command("quit")
        return self.wait(False)

    def wait(self, answering):
        """Wait until the daemon answers (or stops answering); the server list or None."""
        deadline = self._clock() + self.runner.timeout
        while True:
            servers = self.server_list()
            if (servers is not None) == answering:
                return servers
            if self._clock() >= deadline:
                if answering:
                    raise MpsError("%s was started but does not answer after %d seconds; see %s" % (
                        self.describe(), self.runner.timeout,
                        os.path.join(self.log_directory, "control.log")))
                raise MpsError("%s still answers %d seconds after quit: it waits for its MPS "
                               "servers' clients to finish; stop those clients and run again"
                               % (self.describe(), self.runner.timeout))
            self._sleep(0.2)

    def get_active_thread_percentage(self):
        return parse_percentage(self.command("get_default_active_thread_percentage"))

    def set_active_thread_percentage(self, value):
        self.command("set_default_active_thread_percentage %s" % _format_percentage(value))
        current = self.get_active_thread_percentage()
        if not _same_percentage(current, value):
            raise MpsError("%s kept active thread percentage %s after set_default_active_thread_"
                           "percentage %s (MPS limits need a Volta or newer GPU)"
                           % (self.describe(), current, _format_percentage(value)))

    def get_pinned_memory_limit(self, ordinal):
        return parse_memory_limit(self.command("get_default_device_pinned_mem_limit %d" % ordinal))

    def set_pinned_memory_limit(self, ordinal, mib):
        reply = self.command("set_default_device_pinned_mem_limit %d %s" % (ordinal, format_memory_limit(mib)))
        current = self.get_pinned_memory_limit(ordinal)
        if current != mib:
            raise MpsError("%s kept pinned memory limit %s MiB on device %d after setting %d MiB: %s"
                           % (self.describe(), current, ordinal, mib, reply.strip() or "no reply"))


def _format_percentage(value):
    return ("%d" % value) if float(value).is_integer() else ("%g" % value)


def _same_percentage(a, b):
    return a is not None and b is not None and abs(float(a) - float(b)) < 0.05


# ------------------------------------------------------------------------- directories


class DirectorySpec:
    """A directory the daemon needs, with the owner, group and mode it must have."""

    def __init__(self, path, field, mode, owner=None, group=None):
        self.field = field
        self.path = validate_directory_path(path, field)
        self.mode = parse_mode(mode, field + "_mode")
        if self.mode & stat.S_IWOTH:
            raise MpsError("%s_mode %s makes %s world-writable, which lets any user replace the "
                           "daemon's files; give the MPS users a group (%s_group) and a mode such "
                           "as 0770 instead" % (field, oct(self.mode), self.path, field))
        self.owner = owner
        self.group = group
        self.uid = _resolve_user(owner, field + "_owner") if owner is not None else None
        self.gid = _resolve_group(group, field + "_group") if group is not None else None


def validate_directory_path(path, field):
    if not isinstance(path, str) or not path:
        raise MpsError("%s must be an absolute path" % field)
    if "\x00" in path or "\n" in path:
        raise MpsError("%s %r contains a NUL or newline character" % (field, path))
    if not os.path.isabs(path) or os.path.normpath(path) != path.rstrip("/") or ".." in path.split("/"):
        raise MpsError("%s must be an absolute, normalized path without '..', got %r (use %r)"
                       % (field, path, os.path.normpath(path)))
    path = os.path.normpath(path)
    if path in SHARED_DIRECTORIES:
        raise MpsError("%s %s is a shared system directory; give MPS a directory of its own, "
                       "such as %s" % (field, path, os.path.join(path, "nvidia-mps")))
    return path


def _resolve_user(name, field):
    try:
        if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
            return int(name)
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise MpsError("%s: no user %r on this host" % (field, name))


def _resolve_group(name, field):
    try:
        if isinstance(name, int) or (isinstance(name, str) and name.isdigit()):
            return int(name)
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise MpsError("%s: no group %r on this host" % (field, name))


def directory_state(path):
    """{exists, mode, uid, gid} of a directory, refusing anything that is not one."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return {"exists": False, "mode": None, "uid": None, "gid": None}
        raise MpsError("cannot inspect %s: %s" % (path, exc))
    if stat.S_ISLNK(st.st_mode):
        raise MpsError("%s is a symbolic link; MPS directories must be real directories "
                       "(remove the link or point the option at its target)" % path)
    if not stat.S_ISDIR(st.st_mode):
        raise MpsError("%s exists but is not a directory; remove it or choose another path" % path)
    return {"exists": True, "mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid, "gid": st.st_gid}


def plan_directory(spec):
    """What has to change for ``spec``: a dict with before, after, actions and warnings."""
    before = directory_state(spec.path)
    warnings = []
    if before["exists"] and before["uid"] not in (0, os.getuid(), spec.uid):
        raise MpsError("%s %s belongs to uid %d, neither root nor the configured owner: "
                       "someone else created it; inspect and remove it, then run again"
                       % (spec.field, spec.path, before["uid"]))
    after = {
        "exists": True,
        "mode": spec.mode,
        "uid": spec.uid if spec.uid is not None else (before["uid"] if before["exists"] else os.getuid()),
        "gid": spec.gid if spec.gid is not None else (before["gid"] if before["exists"] else os.getgid()),
    }
    actions = []
    if not before["exists"]:
        actions.append("create")
    else:
        if before["mode"] != after["mode"]:
            actions.append("chmod")
            if before["mode"] & stat.S_IWOTH:
                warnings.append("%s %s was world-writable (mode %s); set to %s"
                                % (spec.field, spec.path, _octal(before["mode"]), _octal(spec.mode)))
        if before["uid"] != after["uid"] or before["gid"] != after["gid"]:
            actions.append("chown")
    return {"path": spec.path, "before": _public_dir(before), "after": _public_dir(after),
            "actions": actions, "warnings": warnings, "spec": spec}


def apply_directory(plan):
    spec = plan["spec"]
    try:
        if "create" in plan["actions"]:
            parent = os.path.dirname(spec.path)
            if not os.path.isdir(parent):
                os.makedirs(parent, 0o755)
            os.mkdir(spec.path, spec.mode)
        os.chmod(spec.path, spec.mode)  # mkdir's mode is filtered by the umask
        if spec.uid is not None or spec.gid is not None:
            os.chown(spec.path, -1 if spec.uid is None else spec.uid, -1 if spec.gid is None else spec.gid)
    except OSError as exc:
        raise MpsError("cannot set up %s %s: %s" % (spec.field, spec.path, exc))


def _octal(mode):
    return None if mode is None else "%04o" % mode


def _public_dir(state):
    return {"exists": state["exists"], "mode": _octal(state["mode"]), "uid": state["uid"], "gid": state["gid"]}


def leftover_entries(pipe_directory):
    """Files a dead daemon left in its pipe directory (never subdirectories)."""
    try:
        names = sorted(os.listdir(pipe_directory))
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return []
        raise MpsError("cannot list %s: %s" % (pipe_directory, exc))
    return [n for n in names if not os.path.isdir(os.path.join(pipe_directory, n))
            or os.path.islink(os.path.join(pipe_directory, n))]


def remove_entries(pipe_directory, names):
    for name in names:
        try:
            os.unlink(os.path.join(pipe_directory, name))
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise MpsError("cannot remove stale %s: %s" % (os.path.join(pipe_directory, name), exc))


def read_metadata(pipe_directory):
    try:
        with open(os.path.join(pipe_directory, METADATA_FILE)) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_metadata(pipe_directory, data):
    """Atomic write: temp file in the same directory, then rename over the old one."""
    fd, tmp = tempfile.mkstemp(dir=pipe_directory, prefix=".gpuprov-mps.")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, sort_keys=True)
        os.chmod(tmp, 0o644)
        os.replace(tmp, os.path.join(pipe_directory, METADATA_FILE))
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise MpsError("cannot record the daemon's GPUs in %s: %s" % (pipe_directory, exc))


# --------------------------------------------------------------------------------- GPUs


class Gpu:
    """What the daemon manager needs to know of one GPU."""

    def __init__(self, index, uuid, name=None, memory_total_mib=None, mig_current=False,
                 mig_pending=False, compute_mode=None, compute_capability=None):
        self.index = index
        self.uuid = uuid
        self.name = name
        self.memory_total_mib = memory_total_mib
        self.mig_current = bool(mig_current)
        self.mig_pending = bool(mig_pending)
        self.compute_mode = compute_mode
        self.compute_capability = compute_capability

    def describe(self):
        return "GPU %d (%s)" % (self.index, self.uuid)

    @property
    def volta_or_newer(self):
        """MPS limits (thread percentage, pinned memory) exist from Volta (7.0) on."""
        if not self.compute_capability:
            return True  # unknown: let the daemon refuse
        return int(str(self.compute_capability).split(".", maxsplit=1)[0]) >= 7


class NvmlGpus:
    """GPU backend over module_utils.nvml: an open ``Nvml`` session goes in."""

    def __init__(self, nvml):
        self.nvml = nvml

    def gpus(self):
        result = []
        for index in range(self.nvml.device_count()):
            info = self.nvml.gpu_info(index)
            current, pending = self.nvml.mig_mode(index)
            result.append(Gpu(index, info["uuid"], info["name"], info["memory_total_mib"],
                              mig_current=current, mig_pending=pending,
                              compute_mode=self.nvml.compute_mode(index),
                              compute_capability=info["compute_capability"]))
        return result

    def set_compute_mode(self, gpu, mode):
        self.nvml.set_compute_mode(gpu.index, mode)


def select_gpus(all_gpus, wanted):
    """GPUs named by index or UUID (``all`` for every GPU), in NVML index order."""
    if not all_gpus:
        raise MpsError("NVML reports no GPUs on this host")
    wanted = [str(w).strip() for w in (wanted or ["all"])]
    if "all" in wanted:
        if len(wanted) > 1:
            raise MpsError("gpus: 'all' cannot be combined with other entries, got %s" % ", ".join(wanted))
        return sorted(all_gpus, key=lambda g: g.index)
    by_index = dict((str(g.index), g) for g in all_gpus)
    by_uuid = dict((g.uuid.lower(), g) for g in all_gpus)
    chosen = {}
    for entry in wanted:
        gpu = by_index.get(entry) or by_uuid.get(entry.lower())
        if gpu is None:
            if entry.isdigit() or _UUID_RE.match(entry):
                raise MpsError("gpus: no GPU %s on this host (present: %s)" % (
                    entry, ", ".join("%d=%s" % (g.index, g.uuid) for g in sorted(all_gpus, key=lambda g: g.index))))
            raise MpsError("gpus: %r is neither a GPU index nor a GPU UUID" % entry)
        chosen[gpu.index] = gpu
    return [chosen[i] for i in sorted(chosen)]


def resolve_pinned_limits(gpus, pinned_memory_limit, replicas):
    """{gpu index: MiB} from the option (one number, or a map keyed by index or UUID)."""
    if pinned_memory_limit is None:
        if replicas:
            limits = {}
            for gpu in gpus:
                if not gpu.memory_total_mib:
                    raise MpsError("cannot derive a pinned memory limit for %s: NVML reports no "
                                   "memory size; set pinned_memory_limit" % gpu.describe())
                limits[gpu.index] = gpu.memory_total_mib // replicas
            return limits
        return {}
    if isinstance(pinned_memory_limit, dict):
        by_key = {}
        for gpu in gpus:
            by_key[str(gpu.index)] = gpu
            by_key[gpu.uuid.lower()] = gpu
        limits = {}
        for key, value in pinned_memory_limit.items():
            gpu = by_key.get(str(key).strip().lower())
            if gpu is None:
                raise MpsError("pinned_memory_limit: %s is not one of the selected GPUs (%s)"
                               % (key, ", ".join("%d=%s" % (g.index, g.uuid) for g in gpus)))
            limits[gpu.index] = _positive_mib(value, "pinned_memory_limit[%s]" % key, gpu)
        return limits
    return dict((gpu.index, _positive_mib(pinned_memory_limit, "pinned_memory_limit", gpu)) for gpu in gpus)


def _positive_mib(value, field, gpu):
    if isinstance(value, str):
        mib = parse_memory_limit(value) if value.strip() else None
    elif isinstance(value, int) and not isinstance(value, bool):
        mib = value
    else:
        mib = None
    if not mib or mib <= 0:
        raise MpsError("%s must be a positive number of MiB (or a string like '20G'), got %r" % (field, value))
    if gpu.memory_total_mib and mib > gpu.memory_total_mib:
        raise MpsError("%s: %d MiB is more than the %d MiB of %s" % (field, mib, gpu.memory_total_mib, gpu.describe()))
    return mib


# ------------------------------------------------------------------------------ manager


class MpsDaemonManager:
    """Converge one host MPS daemon to ``params``; ``run()`` returns the module result."""

    def __init__(self, params, gpu_backend, runner, check_mode=False, warn=None, binary=MPS_CONTROL):
        self.params = params
        self.backend = gpu_backend
        self.check_mode = check_mode
        self._warnings = []
        self._warn = warn
        self.pipe = DirectorySpec(params["pipe_directory"], "pipe_directory", params.get("pipe_directory_mode", "0755"),
                                  params.get("pipe_directory_owner"), params.get("pipe_directory_group"))
        self.log = DirectorySpec(params["log_directory"], "log_directory", params.get("log_directory_mode", "0755"),
                                 params.get("log_directory_owner"), params.get("log_directory_group"))
        if self.pipe.path == self.log.path:
            raise MpsError("pipe_directory and log_directory must differ (both are %s)" % self.pipe.path)
        if len(os.path.join(self.pipe.path, CONTROL_ENDPOINT).encode("utf-8")) > UNIX_SOCKET_PATH_MAX:
            raise MpsError("pipe_directory %s is too long: the daemon's socket %s must fit in %d bytes"
                           % (self.pipe.path, os.path.join(self.pipe.path, CONTROL_ENDPOINT), UNIX_SOCKET_PATH_MAX))
        self.control = MpsControl(runner, self.pipe.path, self.log.path, binary=binary)
        self.service = params.get("service")
        self.state = params.get("state", "started")
        self.manage_compute_mode = params.get("manage_compute_mode", True)
        percentage = params.get("active_thread_percentage")
        replicas = params.get("replicas")
        if replicas is not None and replicas < 1:
            raise MpsError("replicas must be at least 1, got %r" % replicas)
        if percentage is None and replicas:
            percentage = 100 // replicas
        if percentage is not None and not 0 < float(percentage) <= 100:
            raise MpsError("active_thread_percentage must be greater than 0 and at most 100, got %r" % percentage)
        self.percentage = percentage
        self.replicas = replicas
        # what this run changed, newest last, so a failure can put it back
        self._undo = []
        self.changed = False

    # ---------------------------------------------------------------- helpers

    def warn(self, message):
        self._warnings.append(message)
        if self._warn:
            self._warn(message)

    def _resolve_gpus(self):
        gpus = select_gpus(self.backend.gpus(), self.params.get("gpus"))
        for gpu in gpus:
            if gpu.mig_current or gpu.mig_pending:
                raise MpsError("%s has MIG mode enabled%s: MPS on MIG devices is out of scope for this "
                               "module; disable MIG on it (gpuprov.gpu.mig_mode) or leave it out of gpus"
                               % (gpu.describe(), "" if gpu.mig_current else " (pending a GPU reset)"))
        if self.state == "started" and (self.percentage is not None or self.params.get("pinned_memory_limit")
                                        is not None or self.replicas):
            for gpu in gpus:
                if not gpu.volta_or_newer:
                    raise MpsError("%s, a %s of compute capability %s, predates Volta: MPS thread and memory "
                                   "limits need compute capability 7.0 or newer; leave the limits unset "
                                   "for it" % (gpu.describe(), gpu.name, gpu.compute_capability))
        return gpus

    def _detect(self):
        """'running' (with the server list), 'stale' (leftover files) or 'absent'."""
        if not os.path.isdir(self.pipe.path):
            return "absent", None, []
        servers = self.control.server_list()
        if servers is not None:
            return "running", servers, []
        leftovers = leftover_entries(self.pipe.path)
        if leftovers:
            return "stale", None, leftovers
        return "absent", None, []

    def _set_compute_modes(self, gpus, mode):
        """Set ``mode`` where it differs; returns {index: (before, after)}."""
        result = {}
        for gpu in gpus:
            before = gpu.compute_mode
            after = before
            if self.manage_compute_mode and before != mode:
                after = mode
                if not self.check_mode:
                    try:
                        self.backend.set_compute_mode(gpu, mode)
                    except NvmlError as exc:
                        raise MpsError("could not set compute mode %s on %s: %s" % (mode, gpu.describe(), exc))
                    self._undo.append(("compute_mode", gpu, before))
                self.changed = True
            result[gpu.index] = (before, after)
        return result

    def _directories(self):
        plans = [plan_directory(self.pipe), plan_directory(self.log)]
        for plan in plans:
            for message in plan["warnings"]:
                self.warn(message)
            if plan["actions"]:
                self.changed = True
                if not self.check_mode:
                    apply_directory(plan)
        return plans

    def _read_limits(self, gpus, served=None):
        """The running daemon's defaults. ``served``: the UUIDs it serves, in ordinal order
        (None: the selected GPUs); a selected GPU it does not serve has no limit."""
        served = [gpu.uuid for gpu in gpus] if served is None else served
        percentage = self.control.get_active_thread_percentage()
        pinned = {}
        for gpu in gpus:
            pinned[gpu.uuid] = None
            if gpu.uuid in served:
                pinned[gpu.uuid] = self.control.get_pinned_memory_limit(served.index(gpu.uuid))
        return {"active_thread_percentage": percentage, "pinned_memory_limit_mib": pinned}

    @staticmethod
    def _fresh_limits(gpus):
        """The defaults of a daemon that has just started: full threads, no memory limit."""
        return {"active_thread_percentage": 100.0,
                "pinned_memory_limit_mib": dict((gpu.uuid, None) for gpu in gpus)}

    @staticmethod
    def _no_limits(gpus):
        """A daemon that does not run has no limits at all."""
        return {"active_thread_percentage": None,
                "pinned_memory_limit_mib": dict((gpu.uuid, None) for gpu in gpus)}

    def _apply_limits(self, gpus, baseline, pinned_wanted):
        """Set the limits that differ from ``baseline``; returns the limits afterwards."""
        after = {"active_thread_percentage": baseline["active_thread_percentage"],
                 "pinned_memory_limit_mib": dict(baseline["pinned_memory_limit_mib"])}
        changes = []
        if self.percentage is not None and not _same_percentage(baseline["active_thread_percentage"], self.percentage):
            changes.append(("active_thread_percentage", None, float(self.percentage),
                            baseline["active_thread_percentage"]))
            after["active_thread_percentage"] = float(self.percentage)
        for ordinal, gpu in enumerate(gpus):
            wanted = pinned_wanted.get(gpu.index)
            current = baseline["pinned_memory_limit_mib"].get(gpu.uuid)
            if wanted is not None and current != wanted:
                changes.append(("pinned_memory_limit", ordinal, wanted, current))
                after["pinned_memory_limit_mib"][gpu.uuid] = wanted
        if changes:
            self.changed = True
        if self.check_mode:
            return after, bool(changes)
        for kind, ordinal, value, old in changes:
            if kind == "active_thread_percentage":
                self.control.set_active_thread_percentage(value)
            else:
                self.control.set_pinned_memory_limit(ordinal, value)
            self._undo.append((kind, ordinal, old))
        return after, bool(changes)

    def _rollback(self):
        """Undo this run's changes, newest first; returns what could not be undone."""
        left = []
        for kind, target, old in reversed(self._undo):
            try:
                if kind == "compute_mode":
                    self.backend.set_compute_mode(target, old)
                elif kind == "daemon":
                    self.control.quit()
                elif old is None:
                    # MPS has no command that removes a default limit again
                    raise MpsError("the daemon keeps the new value until it restarts")
                elif kind == "active_thread_percentage":
                    self.control.set_active_thread_percentage(old)
                else:
                    self.control.set_pinned_memory_limit(target, old)
            except (MpsError, NvmlError, OSError) as exc:  # keep undoing the rest; say what stayed
                what = target.describe() if isinstance(target, Gpu) else target
                left.append("%s%s (%s)" % (kind, "" if what is None else " of %s" % what, exc))
        self._undo = []
        return left

    # ---------------------------------------------------------------- converge

    def run(self):
        gpus = self._resolve_gpus()
        try:
            if self.state == "stopped":
                result = self._stop(gpus)
            else:
                result = self._start(gpus)
        except MpsError as exc:
            undone = bool(self._undo)
            left = self._rollback() if not self.check_mode else []
            message = str(exc)
            if left:
                message += "; could not undo: " + "; ".join(left)
            elif undone:
                message += "; the changes of this run to compute mode, daemon and limits were undone"
            raise MpsError(message)
        result["warnings"] = list(self._warnings)
        return result

    def _daemon_info(self, status):
        return {"running": status == "running", "pid": None, "pipe_directory": self.pipe.path,
                "log_directory": self.log.path, "service": self.service, "started": False,
                "stopped": False, "restarted": False, "stale_recovered": False, "removed_files": []}

    def _start(self, gpus):
        pinned_wanted = resolve_pinned_limits(gpus, self.params.get("pinned_memory_limit"), self.replicas)
        status, servers, leftovers = self._detect()
        was_running = status == "running"
        daemon = self._daemon_info(status)
        visible = [gpu.uuid for gpu in gpus]
        served = None
        restart = False

        if self.service and status != "running":
            if not self.check_mode:
                raise MpsError("%s does not answer: service %s should run it; check `systemctl status "
                               "%s` and %s" % (self.control.describe(), self.service, self.service,
                                               os.path.join(self.log.path, "control.log")))
            self.warn("%s does not answer yet; service %s is expected to start it"
                      % (self.control.describe(), self.service))
        elif not self.service and status == "running":
            recorded = read_metadata(self.pipe.path)
            if recorded is None:
                self.warn("%s was not started by gpuprov: its GPU set is unknown and left as it is"
                          % self.control.describe())
            elif recorded.get("visible_devices") != visible:
                served = list(recorded.get("visible_devices") or [])
                if not self.params.get("allow_restart"):
                    raise MpsError("%s serves GPUs %s but gpus selects %s: changing them needs a daemon "
                                   "restart, which ends its MPS servers %s; set allow_restart or stop "
                                   "the daemon first" % (
                                       self.control.describe(), ", ".join(recorded.get("visible_devices") or []),
                                       ", ".join(visible), ", ".join(str(p) for p in servers) or "(none now)"))
                restart = True

        plans = self._directories()

        if status == "stale" and not self.service:
            daemon["stale_recovered"] = True
            daemon["removed_files"] = leftovers
            self.changed = True
            self.warn("%s had no answering daemon but held %s (left by a daemon that died); removed "
                      "them and started a new daemon" % (self.pipe.path, ", ".join(leftovers)))
            if not self.check_mode:
                remove_entries(self.pipe.path, leftovers)

        modes = self._set_compute_modes(gpus, COMPUTE_MODE_EXCLUSIVE_PROCESS)

        before_limits = self._read_limits(gpus, served) if was_running else self._no_limits(gpus)
        baseline = before_limits
        if restart or (status != "running" and not self.service):
            self.changed = True
            daemon["started"] = True
            daemon["restarted"] = restart
            if restart and servers:
                self.warn("restarting %s for the new GPU set ends its MPS servers %s"
                          % (self.control.describe(), ", ".join(str(p) for p in servers)))
            servers = []
            if not self.check_mode:
                if restart:
                    self.control.quit()
                servers = self.control.start(visible)
                self._undo.append(("daemon", self.pipe.path, None))
                write_metadata(self.pipe.path, {"visible_devices": visible})
            daemon["running"] = True
            baseline = self._fresh_limits(gpus)
        elif status != "running":
            baseline = self._fresh_limits(gpus)  # check mode, the service starts it later

        after_limits, limits_changed = self._apply_limits(gpus, baseline, pinned_wanted)
        if limits_changed and was_running and not restart and servers:
            self.warn("MPS servers %s of %s keep their old limits: defaults apply to servers started "
                      "later only; restart those servers' clients (or the daemon) to apply the new "
                      "limits" % (", ".join(str(p) for p in servers), self.control.describe()))

        if daemon["running"] and not self.check_mode:
            daemon["pid"] = self.control.pid()
        self._undo = []
        return self._result(daemon, was_running, gpus, modes, before_limits, after_limits, servers or [], plans)

    def _stop(self, gpus):
        status, servers, leftovers = self._detect()
        was_running = status == "running"
        daemon = self._daemon_info(status)
        before_limits = self._no_limits(gpus)
        if was_running:
            daemon["pid"] = self.control.pid()
            recorded = read_metadata(self.pipe.path) or {}
            try:
                before_limits = self._read_limits(gpus, recorded.get("visible_devices"))
            except MpsError as exc:  # only reported; it must not keep the daemon from stopping
                self.warn("could not read the limits of %s before stopping it: %s" % (self.control.describe(), exc))
            if self.service and not self.check_mode:
                raise MpsError("%s still answers although service %s should have stopped it; stop the "
                               "service (systemctl stop %s) and run again"
                               % (self.control.describe(), self.service, self.service))
            if self.service:
                self.warn("%s still answers; service %s is expected to stop it"
                          % (self.control.describe(), self.service))
            self.changed = True
            daemon["stopped"] = True
            if servers and not self.service:
                self.warn("stopping %s ends its MPS servers %s and their clients"
                          % (self.control.describe(), ", ".join(str(p) for p in servers)))
            if not self.check_mode and not self.service:
                self.control.quit()
                # the daemon removes its own files; ours (and anything it left) go here
                leftovers = leftover_entries(self.pipe.path)
        elif status == "stale":
            daemon["stale_recovered"] = True
            self.warn("%s had no answering daemon but held %s (left by a daemon that died); removed them"
                      % (self.pipe.path, ", ".join(leftovers)))
        if leftovers:
            daemon["removed_files"] = leftovers
            self.changed = True
            if not self.check_mode:
                remove_entries(self.pipe.path, leftovers)
        if not self.check_mode:
            daemon["running"] = False
            daemon["pid"] = None
        modes = self._set_compute_modes(gpus, COMPUTE_MODE_DEFAULT)
        self._undo = []
        return self._result(daemon, was_running, gpus, modes, before_limits, self._no_limits(gpus), [], [])

    def _result(self, daemon, was_running, gpus, modes, before_limits, after_limits, servers, plans):
        gpu_rows = []
        for ordinal, gpu in enumerate(gpus):
            before, after = modes[gpu.index]
            gpu_rows.append({"index": gpu.index, "uuid": gpu.uuid, "name": gpu.name, "ordinal": ordinal,
                             "memory_total_mib": gpu.memory_total_mib,
                             "compute_mode_before": before, "compute_mode_after": after})
        directories = dict((p["spec"].field, {"path": p["path"], "before": p["before"], "after": p["after"],
                                              "changed": bool(p["actions"])}) for p in plans)
        running_after = self.state == "started"
        diff = {
            "before": {"daemon_running": was_running,
                       "compute_mode": dict((r["uuid"], r["compute_mode_before"]) for r in gpu_rows),
                       "limits": before_limits,
                       "directories": dict((k, v["before"]) for k, v in directories.items())},
            "after": {"daemon_running": running_after,
                      "compute_mode": dict((r["uuid"], r["compute_mode_after"]) for r in gpu_rows),
                      "limits": after_limits,
                      "directories": dict((k, v["after"]) for k, v in directories.items())},
        }
        return {"changed": self.changed, "daemon": daemon, "gpus": gpu_rows, "servers": servers,
                "limits": {"before": before_limits, "after": after_limits},
                "directories": directories, "diff": diff}
