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


def run_playbook(playbook, inventories, limit=None, check=False, diff=False, extra_vars=None, forks=None,
                 extra_args=(), env=None, stdout=None):
    """Run ansible-playbook (argv list, no shell) with the progress callback.

    Output streams to this process's stdout, or to ``stdout`` (a file object, e.g.
    sys.stderr when this process prints JSON). Returns (return code, summary dict or None).
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

    handle, summary_path = tempfile.mkstemp(prefix="gpuprov-summary-", suffix=".json")
    os.close(handle)
    os.unlink(summary_path)
    run_env = dict(os.environ if env is None else env)
    run_env["ANSIBLE_STDOUT_CALLBACK"] = CALLBACK
    run_env["GPUPROV_SUMMARY_FILE"] = summary_path
    run_env.setdefault("ANSIBLE_FORCE_COLOR", "0")
    try:
        proc = subprocess.run(argv, env=run_env, check=False, stdout=stdout)
        summary = None
        if os.path.exists(summary_path):
            with open(summary_path) as summary_file:
                summary = json.load(summary_file)
        return proc.returncode, summary
    finally:
        if os.path.exists(summary_path):
            os.unlink(summary_path)
