"""Running gpuprov's playbooks with ansible-playbook, progress streamed per node."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import is_digits
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.start_gate import GATE_FD_VAR, GATE_OPEN

CALLBACK = "gpuprov.gpu.progress"


def ansible_command(name):
    """The Ansible command installed beside this Python (the venv's), else the one on PATH."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    if os.access(local, os.X_OK):
        return local
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError("%s not found: install gpuprov in this environment (pip install gpuprov)" % name)
    return found


def parse_waves(text):
    """'1,10%,100%' -> [1, '10%', '100%'] for Ansible's serial keyword. ValueError if malformed."""
    waves = []
    for part in text.split(","):
        part = part.strip()
        if part.endswith("%"):
            number = part[:-1]
            if not is_digits(number) or len(number) > 3 or not 0 < int(number) <= 100:
                raise ValueError("wave %r: a percentage must be 1%%..100%%" % part)
            waves.append(part)
        elif is_digits(part) and len(part) <= 9 and int(part) > 0:
            waves.append(int(part))
        else:
            raise ValueError("wave %r: use a node count (1) or a percentage (10%%)" % part)
    if not waves:
        raise ValueError("no waves given")
    return waves


def converge_variables(nodes, waves, wave_max_nodes=5, max_fail_percentage=0, catalog_file=None, kubeconfig=None,
                       kube_context=None):
    """The variables `gpuprov apply` (and the trial's converges) give the site playbook.

    Only the planned GPU nodes take part (gpuprov_hosts), so the canary wave is a GPU node,
    not a control-plane host that has nothing to do.
    """
    variables = {"gpuprov_waves": list(waves), "gpuprov_wave_max_nodes": wave_max_nodes,
                 "gpuprov_max_fail_percentage": max_fail_percentage, "gpuprov_hosts": ",".join(nodes)}
    if catalog_file:
        # The node_plan action plans every host with the same models as this plan.
        variables["gpuprov_cli_catalog_file"] = os.path.abspath(catalog_file)
    if kubeconfig:
        variables["gpuprov_kubeconfig"] = kubeconfig
    if kube_context:
        variables["gpuprov_kube_context"] = kube_context
    return variables


def converge_limit(limit, nodes):
    """The --limit for ansible-playbook when the command was limited, else None.

    The cluster side runs on the controller's implicit localhost, which a limit matches only
    when it names it: `-l gpu-a100-01` alone would skip the cluster play, and the node would
    keep its old device-plugin config label. So a limited run names the planned nodes (the
    hosts the node play takes anyway) and localhost.
    """
    if not limit:
        return None
    return ",".join(list(nodes) + ["localhost"])


def run_playbook(playbook, inventories, limit=None, check=False, diff=False, extra_vars=None, forks=None,
                 extra_args=(), env=None, stdout=None, own_session=False, started=None, prepare=None):
    """Run ansible-playbook (argv list, no shell) with the progress callback.

    Output streams to this process's stdout, or to ``stdout`` (a file object, e.g.
    sys.stderr when this process prints JSON). Returns (return code, summary dict or None).
    ``own_session``: the run gets a session (and process group) of its own, so a Ctrl-C at the
    terminal reaches only this process, which decides what the run gets; ``started`` is called
    with the Popen once the run started (to signal it).

    ``prepare``: called once ansible-playbook has started, while the progress callback holds the
    run at its start (GATE_FD_VAR), before its first play: ansible-playbook's own start-up
    (imports, inventory, the playbook's parse) goes on meanwhile, but no host is contacted.
    The run goes on when ``prepare`` returns; when it raises (SystemExit included), the run is
    killed at the gate and the exception goes on. Give none when either side may prompt on the
    terminal (--ask-vault-pass), since both would then read it at once.
    """
    argv = [ansible_command("ansible-playbook")]
    for inventory in inventories:
        argv += ["-i", inventory]
    if limit:
        argv += ["--limit", limit]
    if check:
        argv.append("--check")
    if diff:
        argv.append("--diff")
    if forks:
        argv += ["--forks", str(forks)]
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    argv += list(extra_args)
    argv.append(playbook)

    # The summary lives in a folder only this user can enter (mkdtemp: mode 0700), and the
    # callback opens it with O_NOFOLLOW: no other local user can plant or read it.
    private_dir = tempfile.mkdtemp(prefix="gpuprov-run-")
    summary_path = os.path.join(private_dir, "summary.json")
    run_env = dict(os.environ if env is None else env)
    run_env["ANSIBLE_STDOUT_CALLBACK"] = CALLBACK
    run_env["GPUPROV_SUMMARY_FILE"] = summary_path
    run_env.setdefault("ANSIBLE_FORCE_COLOR", "0")
    gate_read = gate_write = None
    popen_options = {}
    if prepare is not None:
        gate_read, gate_write = os.pipe()  # neither end is inherited unless passed
        run_env[GATE_FD_VAR] = str(gate_read)
        popen_options["pass_fds"] = (gate_read,)
    try:
        with subprocess.Popen(argv, env=run_env, stdout=stdout, start_new_session=own_session,
                              **popen_options) as proc:
            if started is not None:
                started(proc)
            try:
                if prepare is not None:
                    os.close(gate_read)
                    gate_read = None
                    prepare()
                    try:
                        os.write(gate_write, GATE_OPEN)
                    except BrokenPipeError:
                        pass  # the run ended before its gate (a bad option, say): its exit status says why
                proc.wait()
            except BaseException:
                # As subprocess.run does: the run does not outlive this process.
                proc.kill()
                raise
        return proc.returncode, read_summary(summary_path)
    finally:
        for fd in (gate_read, gate_write):
            if fd is not None:
                os.close(fd)
        shutil.rmtree(private_dir, ignore_errors=True)


def read_summary(path):
    """The callback's JSON summary, or None when the run wrote none (or not a readable one)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd) as handle:
        try:
            data = json.load(handle)
        except ValueError:
            return None
    return data if isinstance(data, dict) else None
