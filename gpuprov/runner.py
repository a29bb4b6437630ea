"""Running gpuprov's playbooks with ansible-playbook, progress streamed per node."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

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
            if not number.isdigit() or not 0 < int(number) <= 100:
                raise ValueError("wave %r: a percentage must be 1%%..100%%" % part)
            waves.append(part)
        elif part.isdigit() and int(part) > 0:
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
                 extra_args=(), env=None, stdout=None, own_session=False, started=None):
    """Run ansible-playbook (argv list, no shell) with the progress callback.

    Output streams to this process's stdout, or to ``stdout`` (a file object, e.g.
    sys.stderr when this process prints JSON). Returns (return code, summary dict or None).
    ``own_session``: the run gets a session (and process group) of its own, so a Ctrl-C at the
    terminal reaches only this process, which decides what the run gets; ``started`` is called
    with the Popen once the run started (to signal it).
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
    try:
        with subprocess.Popen(argv, env=run_env, stdout=stdout, start_new_session=own_session) as proc:
            if started is not None:
                started(proc)
            try:
                proc.wait()
            except BaseException:
                # As subprocess.run does: the run does not outlive this process.
                proc.kill()
                raise
        return proc.returncode, read_summary(summary_path)
    finally:
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
