"""An untrusted repository's ansible.cfg brings no code into the offline commands.

Ansible reads the first of ANSIBLE_CONFIG, ./ansible.cfg, ~/.ansible.cfg and
/etc/ansible/ansible.cfg (ansible-core config/manager.py find_ini_config_file). The working
folder's file comes with the repository being planned; the others are the runner's. A
setting of the working folder's file that would make the offline read load or run code
(plugin folders, plugins enabled, collections, Jinja extensions, vault scripts) or write a
file (log_path) is refused, exit 2 naming the file and setting, unless --trust-ansible-cfg.

Each case runs gpuprov in its own process, in a copy of such a repository: Ansible reads
its configuration once per process.
"""
import os
import subprocess
import sys
import textwrap

import pytest
import yaml

from testlib import REPO

T4 = {"gpuprov_gpu_model": "T4", "gpuprov_gpu_count": 1}
PAYLOAD = "import pathlib\npathlib.Path(%r).write_text('ran')\n"


def run_gpuprov(cwd, *args, env_extra=None, collections_env=True):
    """gpuprov of this checkout in ``cwd``. ``collections_env``: name this checkout's collection
    in ANSIBLE_COLLECTIONS_PATH, as a runner would (the environment beats the file, so a
    case about the file's collections_path runs without it)."""
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    env.update(PYTHONPATH=REPO, HOME=os.path.join(str(cwd), ".home"))
    if collections_env:
        env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(REPO, "collections")
    env.update(env_extra or {})
    proc = subprocess.run([sys.executable, "-c", "import sys; from gpuprov.cli import main; main(sys.argv[1:])"]
                          + list(args), cwd=str(cwd), env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def _write(path, text, mode=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    if mode:
        path.chmod(mode)


def _repository(tmp_path, hosts, cfg):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".home").mkdir()
    (repo / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    (repo / "ansible.cfg").write_text(textwrap.dedent(cfg))
    return repo


def _fake_collection(repo, marker):
    base = repo / "collections" / "ansible_collections" / "gpuprov" / "gpu"
    _write(base / "galaxy.yml", "namespace: gpuprov\nname: gpu\nversion: 9.9.9\n")
    for package in ("plugins", "plugins/plugin_utils"):
        _write(base / package / "__init__.py", "")
    _write(base / "plugins" / "plugin_utils" / "inventory.py", PAYLOAD % str(marker))
    _write(base / "plugins" / "plugin_utils" / "catalog.py", PAYLOAD % str(marker))


CASES = {
    # setting: (ansible.cfg body, files of the repository, host variables)
    "lookup_plugins": ("[defaults]\nlookup_plugins = ./lookup_plugins\n",
                       {"lookup_plugins/file.py": PAYLOAD + "from ansible.plugins.lookup import LookupBase\n"
                                                            "class LookupModule(LookupBase):\n"
                                                            "    def run(self, terms, variables=None, **kw):\n"
                                                            "        return ['T4']\n"},
                       dict(T4, gpuprov_gpu_model="{{ lookup('file', 'model.txt') }}")),
    "filter_plugins": ("[defaults]\nfilter_plugins = ./filter_plugins\n",
                       {"filter_plugins/evil.py": PAYLOAD + "class FilterModule:\n"
                                                            "    def filters(self):\n"
                                                            "        return {'evil': lambda x: x}\n"},
                       dict(T4, gpuprov_gpu_model="{{ 'T4' | evil }}")),
    "test_plugins": ("[defaults]\ntest_plugins = ./test_plugins\n",
                     {"test_plugins/evil.py": PAYLOAD + "class TestModule:\n"
                                                        "    def tests(self):\n"
                                                        "        return {'evil': lambda x: True}\n"},
                     dict(T4, gpuprov_gpu_model="{{ 'T4' if 'x' is evil else 'A' }}")),
    "vars_plugins": ("[defaults]\nvars_plugins = ./vars_plugins\nvars_plugins_enabled = host_group_vars,evil\n",
                     {"vars_plugins/evil.py": PAYLOAD + "from ansible.plugins.vars import BaseVarsPlugin\n"
                                                        "class VarsModule(BaseVarsPlugin):\n"
                                                        "    REQUIRES_ENABLED = True\n"
                                                        "    def get_vars(self, loader, path, entities, cache=True):\n"
                                                        "        return {}\n"},
                     T4),
    "vars_plugins_enabled": ("[defaults]\nvars_plugins_enabled = host_group_vars,community.general.evil\n", {}, T4),
    "inventory_plugins": ("[defaults]\ninventory_plugins = ./inventory_plugins\n",
                          {"inventory_plugins/constructed.py": PAYLOAD},
                          T4),
    "doc_fragment_plugins": ("[defaults]\ndoc_fragment_plugins = ./doc_fragments\n",
                             {"doc_fragments/constructed.py": PAYLOAD}, T4),
    "collections_path": ("[defaults]\ncollections_path = ./collections\n", None, T4),
    "jinja2_extensions": ("[defaults]\njinja2_extensions = evil_extension.Extension\n",
                          {"evil_extension.py": PAYLOAD}, T4),
    "vault_password_file": ("[defaults]\nvault_password_file = ./vault-pass.sh\n",
                            {"vault-pass.sh": "#!/bin/sh\necho ran > %(marker)s\necho pass\n"}, T4),
    "log_path": ("[defaults]\nlog_path = ./plan.log\n", {}, T4),
    "fact_caching": ("[defaults]\nfact_caching = evil\ncache_plugins = ./cache\n",
                     {"cache/evil.py": PAYLOAD}, T4),
}


@pytest.mark.parametrize("setting", sorted(CASES))
@pytest.mark.parametrize("command", ["plan", "export"])
def test_a_setting_that_brings_code_is_refused(tmp_path, setting, command):
    cfg, files, host = CASES[setting]
    repo = _repository(tmp_path, {"n1": host}, cfg)
    marker = tmp_path / "RAN"
    if files is None:
        _fake_collection(repo, marker)
    for name, text in (files or {}).items():
        text = text % str(marker) if "%r" in text else text % {"marker": marker} if "%(marker)s" in text else text
        _write(repo / name, text, 0o755 if name.endswith(".sh") else None)
    args = [command, "-i", "inventory.yml"] + (["device-plugin"] if command == "export" else [])
    if setting == "vault_password_file":
        _write(repo / "my-pass", "pass\n")
        args += ["--vault-password-file", "my-pass"]
    before = sorted(os.listdir(str(repo)))
    code, out, err = run_gpuprov(repo, *args, collections_env=files is not None)
    assert code == 2, out + err
    assert "%s: %s:" % (repo / "ansible.cfg", setting) in err, err
    assert "--trust-ansible-cfg" in err
    assert "Traceback" not in err and out == ""
    assert not marker.exists()
    assert sorted(os.listdir(str(repo))) == before


@pytest.mark.parametrize("command", [("catalog",), ("fit", "workloads.yaml"), ("pool", "--snapshot", "snap"),
                                     ("diagnose", "--snapshot", "snap")])
def test_every_offline_command_refuses_it(tmp_path, command):
    repo = _repository(tmp_path, {"n1": T4}, CASES["collections_path"][0])
    marker = tmp_path / "RAN"
    _fake_collection(repo, marker)
    code, out, err = run_gpuprov(repo, *command, collections_env=False)
    assert code == 2, out + err
    assert "%s: collections_path:" % (repo / "ansible.cfg") in err, err
    assert not marker.exists()


def test_settings_that_bring_no_code_are_read_as_ansible_reads_them(tmp_path):
    # Callbacks, modules and roles load only when a playbook runs (apply and status); the
    # vault password file only when vault options are given.
    repo = _repository(tmp_path, {"n1": T4}, """
        [defaults]
        vault_password_file = ./vault-pass.sh
        vault_identity_list = dev@./vault-pass.sh
        stdout_callback = yaml
        callbacks_enabled = profile_tasks
        library = ./library
        roles_path = ./roles
        forks = 50
        vars_plugins_enabled = host_group_vars, ansible.builtin.host_group_vars
        [inventory]
        enable_plugins = script, yaml
        """)
    code, out, err = run_gpuprov(repo, "plan", "-i", "inventory.yml", "-o", "json")
    assert code == 0, err


def test_the_opt_in_flag_trusts_the_file(tmp_path):
    cfg, files, host = CASES["filter_plugins"]
    repo = _repository(tmp_path, {"n1": host}, cfg)
    marker = tmp_path / "RAN"
    for name, text in files.items():
        _write(repo / name, text % str(marker))
    code, out, err = run_gpuprov(repo, "plan", "-i", "inventory.yml", "--trust-ansible-cfg")
    assert code == 0, err
    assert marker.exists()  # the filter plugin was imported, as asked


def test_what_the_environment_sets_beats_the_file(tmp_path):
    # ANSIBLE_COLLECTIONS_PATH of the runner wins over the file's collections_path: the
    # repository's collections are not used, so there is nothing to refuse.
    repo = _repository(tmp_path, {"n1": T4}, CASES["collections_path"][0])
    marker = tmp_path / "RAN"
    _fake_collection(repo, marker)
    code, out, err = run_gpuprov(repo, "plan", "-i", "inventory.yml")
    assert code == 0, err
    assert not marker.exists()


def test_a_file_the_runner_names_is_the_runners_choice(tmp_path):
    # ANSIBLE_CONFIG comes before ./ansible.cfg in Ansible's order and is set by the runner.
    cfg, files, host = CASES["filter_plugins"]
    repo = _repository(tmp_path, {"n1": host}, cfg)
    marker = tmp_path / "RAN"
    for name, text in files.items():
        _write(repo / name, text % str(marker))
    code, out, err = run_gpuprov(repo, "plan", "-i", "inventory.yml",
                                 env_extra={"ANSIBLE_CONFIG": str(repo / "ansible.cfg")})
    assert code == 0, err


def test_this_repository_plans_with_its_own_ansible_cfg():
    # collections_path = ./collections names the collection of the gpuprov that runs.
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    proc = subprocess.run([sys.executable, "-m", "gpuprov", "plan", "-i", "examples/inventory.yml"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_a_copy_of_this_repositorys_cfg_with_another_collection_is_refused(tmp_path):
    with open(os.path.join(REPO, "ansible.cfg")) as handle:
        repo = _repository(tmp_path, {"n1": T4}, handle.read())
    marker = tmp_path / "RAN"
    _fake_collection(repo, marker)
    (repo / "examples").mkdir()
    (repo / "examples" / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n1": T4}}}))
    code, out, err = run_gpuprov(repo, "plan", "-i", "examples/inventory.yml", collections_env=False)
    assert code == 2
    assert "%s: collections_path:" % (repo / "ansible.cfg") in err, err
    assert not marker.exists()


def test_every_setting_that_names_code_is_judged():
    """Every setting of this ansible-core's base.yml that names plugins, plugin folders or
    modules is either refused from ./ansible.cfg or one only a playbook run uses, so a new
    plugin type in a later ansible-core cannot pass unjudged (checked on 2.19 and 2.21)."""
    import ansible.config.manager

    from gpuprov import ansible_config

    with open(os.path.join(os.path.dirname(ansible.config.manager.__file__), "base.yml")) as handle:
        settings = yaml.safe_load(handle)
    judged = (set(ansible_config.PLUGIN_FOLDERS) | set(ansible_config.ENABLED_PLUGINS)
              | set(ansible_config.RUNS_OR_WRITES) | ansible_config.PLAYBOOK_ONLY
              | {ansible_config.COLLECTIONS, ansible_config.HOME, ansible_config.JINJA2_EXTENSIONS,
                 ansible_config.VAULT_PASSWORD_FILE})
    names_code = [name for name, spec in settings.items()
                  if name.endswith(("_PLUGIN_PATH", "_MODULE_PATH", "_MODULE_UTILS_PATH"))
                  or (spec.get("type") == "list" and name.endswith("_ENABLED"))
                  or ("CALLBACK" in name and spec.get("ini"))]
    assert names_code and not [name for name in names_code if name not in judged]
    assert not [name for name in judged if name not in settings]
