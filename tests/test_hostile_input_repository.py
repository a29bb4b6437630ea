"""A repository with every vector at once, planned as CI plans a pull request: gpuprov in
the repository's folder, in its own process. It refuses in bounded time (the subprocess
timeout is a watchdog, not a timing assertion), runs nothing, reads nothing of the runner,
prints nothing raw and leaves the folder as it was."""
import os
import re
import subprocess
import sys

import yaml

from testlib import REPO

SECRET = "s3cr3t-of-the-runner"
PAYLOAD = "import pathlib\npathlib.Path(%r).write_text('ran')\n"
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
SLOW = "{% for i in range(10**9) %}x{% endfor %}"


def _tree(root):
    """Every path under ``root``, except the empty ~/.ansible/tmp that any Ansible command makes
    in the runner's home (ansible-core's local_tmp; its per-process folder is removed at exit)."""
    paths = sorted(os.path.relpath(os.path.join(folder, name), root)
                   for folder, dirs, files in os.walk(root) for name in dirs + files)
    return [p for p in paths if p not in (os.path.join("home", ".ansible"), os.path.join("home", ".ansible", "tmp"))]


def _plan(repo, *args, collections_env=True):
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env.update(PYTHONPATH=REPO, HOME=str(repo.parent / "home"), CI_DEPLOY_TOKEN=SECRET)
    if collections_env:
        env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(REPO, "collections")
    proc = subprocess.run([sys.executable, "-c", "import sys; from gpuprov.cli import main; main(sys.argv[1:])",
                           "plan", "-i", "inventory"] + list(args), cwd=str(repo), env=env, capture_output=True,
                          text=True, timeout=180)
    return proc.returncode, proc.stdout, proc.stderr


def _repository(tmp_path, marker):
    home = tmp_path / "home"
    home.mkdir()
    (home / "token").write_text(SECRET)
    repo = tmp_path / "repo"
    (repo / "inventory").mkdir(parents=True)
    hosts = dict(("slow-%02d" % i, {"gpuprov_gpu_model": SLOW}) for i in range(12))
    hosts.update({
        "pipe": {"gpuprov_gpu_model": "{{ lookup('pipe', 'touch %s') }}" % marker},
        "file-out": {"gpuprov_gpu_model": "{{ lookup('file', '%s') }}" % (home / "token")},
        "environ": {"gpuprov_gpu_model": "{{ lookup('file', '/proc/self/environ') }}"},
        "env": {"gpuprov_gpu_model": "{{ lookup('env', 'CI_DEPLOY_TOKEN') }}"},
        "expandvars": {"gpuprov_gpu_model": "{{ '$CI_DEPLOY_TOKEN' | expandvars }}"},
        "include": {"gpuprov_gpu_model": "{% include 'notes.txt' %}"},
        "digits": {"gpuprov_gpu_model": "T4", "gpuprov_kubelet": {"cpu_manager_policy": "static",
                                                                  "reserved_system_cpus": "0-\u0663"}},
        "newline": {"gpuprov_gpu_model": "T4", "gpuprov_node_name": "worker-1\n"},
        "tiny": {"gpuprov_gpu_model": "L20", "gpuprov_sharing": {"strategy": "hami", "hami": {"memory_scaling": 1e-300}}},
        "title\x1b]0;PWNED\x07\u202e": {"ansible_host": "10.0.0.1"},
    })
    (repo / "inventory" / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    # In the folder gpuprov runs in, but not in the inventory's: Jinja's include would read it.
    (repo / "notes.txt").write_text(SECRET)
    return repo


def test_a_repository_with_every_vector_refuses_in_bounded_time_and_leaves_no_trace(tmp_path):
    marker = tmp_path / "RAN"
    repo = _repository(tmp_path, marker)
    # First its ansible.cfg: code of the repository, refused before anything is read.
    (repo / "ansible.cfg").write_text("[defaults]\nlookup_plugins = ./plugins\nfilter_plugins = ./plugins\n"
                                      "vars_plugins = ./plugins\nvars_plugins_enabled = host_group_vars,evil\n"
                                      "log_path = ./plan.log\n")
    (repo / "plugins").mkdir()
    for name in ("file.py", "evil.py"):
        (repo / "plugins" / name).write_text(PAYLOAD % str(marker))
    before = _tree(str(tmp_path))
    code, out, err = _plan(repo)
    assert code == 2 and out == ""
    for key in ("lookup_plugins", "filter_plugins", "vars_plugins", "vars_plugins_enabled", "log_path"):
        assert "%s: %s:" % (repo / "ansible.cfg", key) in err, err
    assert not marker.exists() and "Traceback" not in err and RAW.search(err) is None
    assert _tree(str(tmp_path)) == before

    # Then the inventory alone: every host refused, in one budget, nothing of the runner shown.
    os.unlink(str(repo / "ansible.cfg"))
    before = _tree(str(tmp_path))
    code, out, err = _plan(repo, "--time-budget", "8")
    assert code == 2 and out == ""
    assert "reading the inventory took longer than its time budget of 8 s" in err, err
    code, out, err = _plan(repo, "-l", "all:!slow-*")
    assert code == 2 and out == ""
    for host, reason in (("pipe", "lookup 'pipe' is not allowed"), ("file-out", "outside the inventory's folder"),
                         ("environ", "outside the inventory's folder"), ("env", "lookup 'env' of 'CI_DEPLOY_TOKEN'"),
                         ("expandvars", "filter 'expandvars' is not allowed"),
                         ("include", "include, import or extends"),
                         ("digits", "reserved_system_cpus: invalid cpuset"),
                         ("newline", "is not a valid Kubernetes node name"),
                         ("tiny", "gpuprov_sharing.hami.memory_scaling: must be a number above 0")):
        assert "\n%s: " % host in err and reason in err.split("\n%s: " % host, 1)[1].split("\n", 1)[0], (host, err)
    assert SECRET not in out + err
    assert not marker.exists() and "Traceback" not in err and RAW.search(err) is None
    assert _tree(str(tmp_path)) == before
