"""Roles that create directories as root never follow a link another user planted.

Runs the gpu_mps role's directory tasks and start-program install and the gpu_mig role's
boot-restore install with ansible-playbook against localhost, every path under tmp_path.
"""
import json
import os
import shutil
import stat
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAYBOOK = shutil.which("ansible-playbook", path=os.path.dirname(sys.executable))

pytestmark = [
    pytest.mark.skipif(PLAYBOOK is None, reason="ansible-playbook is not installed beside this Python"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the roles run as root (they create root-owned directories)"),
]


def run_role(tmp_path, role, tasks_from, variables, check=False):
    play = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": {"ansible_python_interpreter": sys.executable},
             "tasks": [{"ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from},
                        "vars": variables}]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    # --check, not the play's check_mode: the roles read ansible_check_mode, which only the
    # command line sets.
    proc = subprocess.run([PLAYBOOK, "-i", "localhost,", str(path)] + (["--check"] if check else []), cwd=REPO, env=env, capture_output=True,
                          text=True, check=False)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError(proc.stdout + proc.stderr)
    stats = result["stats"]["localhost"]
    messages = [h.get("msg", "") for play in result["plays"] for task in play["tasks"]
                for h in task["hosts"].values() if h.get("failed")]
    return stats, " ".join(str(m) for m in messages)


def mps_dir(path, mode="0750"):
    return {"_gpu_mps_dir": {"path": str(path), "owner": "root", "group": "root", "mode": mode}}


@pytest.fixture
def sticky(tmp_path):
    """A world-writable sticky folder, like /tmp."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


def test_mps_directory_is_created_exactly_once(tmp_path, sticky):
    target = sticky / "nvidia-mps" / "pipe"
    stats, failed = run_role(tmp_path, "gpuprov.gpu.gpu_mps", "directory.yml", mps_dir(target))
    assert stats["failures"] == 0, failed
    info = os.lstat(str(target))
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o750 and info.st_uid == 0
    stats, failed = run_role(tmp_path, "gpuprov.gpu.gpu_mps", "directory.yml", mps_dir(target))
    assert stats["failures"] == 0 and stats["changed"] == 0, failed


def test_mps_directory_planted_as_a_link_is_refused_and_its_target_untouched(tmp_path, sticky):
    victim = tmp_path / "victim"
    victim.mkdir()
    victim.chmod(0o700)
    os.chown(str(victim), 65534, 65534)
    os.symlink(str(victim), str(sticky / "nvidia-mps"))
    stats, failed = run_role(tmp_path, "gpuprov.gpu.gpu_mps", "directory.yml", mps_dir(sticky / "nvidia-mps", "0755"))
    assert stats["failures"] == 1
    assert "nvidia-mps is a symbolic link" in failed
    info = os.stat(str(victim))
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == 65534


def test_mps_directory_under_a_world_writable_folder_without_sticky_bit_is_refused(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    stats, failed = run_role(tmp_path, "gpuprov.gpu.gpu_mps", "directory.yml", mps_dir(shared / "nvidia-mps"))
    assert stats["failures"] == 1 and "shared is writable by other users and not sticky" in failed
    assert not (shared / "nvidia-mps").exists()


def test_mps_directory_owned_by_someone_else_is_refused(tmp_path, sticky):
    (sticky / "nvidia-mps").mkdir()
    os.chown(str(sticky / "nvidia-mps"), 65534, 65534)
    stats, failed = run_role(tmp_path, "gpuprov.gpu.gpu_mps", "directory.yml", mps_dir(sticky / "nvidia-mps"))
    assert stats["failures"] == 1 and "neither root nor root" in failed


MODULE_UTILS = os.path.join(REPO, "collections", "ansible_collections", "gpuprov", "gpu", "plugins", "module_utils")


def restore_vars(root):
    """restore_install.yml's inputs (persist.yml sets the private ones)."""
    return {"gpu_mig_restore_state_file": str(root / "etc" / "gpuprov" / "mig-state.json"),
            "gpu_mig_restore_program": str(root / "libexec" / "gpuprov-mig-restore"),
            "_gpu_mig_restore_module_utils": str(root / "lib" / "module_utils"),
            "_gpu_mig_restore_unit_file": str(root / "systemd" / "gpuprov-mig-restore.service"),
            "_gpu_mig_restore_sources": ["nvml.py"],
            "_gpu_mig_restore_source_files": [os.path.join(MODULE_UTILS, "nvml.py")],
            "_gpu_mig_restore_state_text": "{}\n"}


def mps_start_vars(root):
    """start_install.yml's inputs (main.yml and present.yml set the private ones)."""
    return {"gpu_mps_start_config": str(root / "etc" / "gpuprov" / "mps-start.json"),
            "gpu_mps_start_program": str(root / "libexec" / "gpuprov-mps-start"),
            "gpu_mps_lib_dir": str(root / "lib"),
            "_gpu_mps_module_utils": str(root / "lib" / "module_utils"),
            "_gpu_mps_start_sources": ["nvml.py", "mps/__init__.py"],
            "_gpu_mps_settings": {"replicas": 2}}


# The installs of code root runs, the boot-time MIG restore and the MPS unit's start program:
# each one file_set with require_root_folders (the rule from lstat(2)), run in check mode so
# that a pass writes nothing either.
ROOT_CODE_CHECKS = {
    "mig-restore": ("gpuprov.gpu.gpu_mig", "restore_install.yml", restore_vars),
    "mps-start": ("gpuprov.gpu.gpu_mps", "start_install.yml", mps_start_vars),
}


@pytest.mark.parametrize("check", sorted(ROOT_CODE_CHECKS))
def test_root_code_paths_owned_by_root_pass(tmp_path, check):
    role, tasks, variables = ROOT_CODE_CHECKS[check]
    (tmp_path / "node" / "etc" / "gpuprov").mkdir(parents=True)
    stats, failed = run_role(tmp_path, role, tasks, variables(tmp_path / "node"), check=True)
    assert stats["failures"] == 0, failed


@pytest.mark.parametrize("check", sorted(ROOT_CODE_CHECKS))
@pytest.mark.parametrize("hostile", ["writable", "not-root", "link", "open-parent", "link-to-theirs"])
def test_root_code_paths_another_user_could_change_are_refused(tmp_path, sticky, hostile, check):
    role, tasks, variables = ROOT_CODE_CHECKS[check]
    root = tmp_path / "node"
    state_dir = root / "etc" / "gpuprov"
    state_dir.mkdir(parents=True)
    if hostile == "writable":
        state_dir.chmod(0o1777)   # sticky or not, the code's own folder may not be shared
        expected = "gpuprov can be written by other users"
    elif hostile == "not-root":
        os.chown(str(state_dir), 65534, 65534)
        expected = "gpuprov belong(s) to another user than root"
    elif hostile == "link":
        os.rmdir(str(state_dir))
        os.symlink(str(sticky), str(state_dir))
        expected = "gpuprov is a symbolic link"
    elif hostile == "link-to-theirs":
        # A link of root's above the code's folders, to a folder another user owns: the link and
        # the folders below it are root's, but that user can swap what lies under the link.
        theirs = tmp_path / "theirs"
        (theirs / "gpuprov").mkdir(parents=True)
        os.chown(str(theirs), 65534, 65534)
        os.rmdir(str(state_dir))
        os.rmdir(str(root / "etc"))
        os.symlink(str(theirs), str(root / "etc"))
        expected = "theirs belong(s) to another user than root"
    else:
        (root / "etc").chmod(0o777)
        expected = "etc can be written by other users"
    stats, failed = run_role(tmp_path, role, tasks, variables(root), check=True)
    assert stats["failures"] == 1
    assert expected in failed
    # Refused before anything was written.
    files = [value for key, value in variables(root).items() if key.endswith(("_program", "_file", "_config"))]
    assert [path for path in files if os.path.lexists(path)] == []


@pytest.mark.parametrize("check", sorted(ROOT_CODE_CHECKS))
def test_root_code_paths_that_cannot_be_read_fail_the_check(tmp_path, check):
    """A folder on the way that is a file: "Not a directory" is not a missing path; the check
    fails instead of taking the paths below as absent."""
    role, tasks, variables = ROOT_CODE_CHECKS[check]
    root = tmp_path / "node"
    root.mkdir()
    (root / "etc").write_text("not a folder\n")
    stats, failed = run_role(tmp_path, role, tasks, variables(root), check=True)
    assert stats["failures"] == 1, failed
    assert "could not read every folder" in failed and "Not a directory" in failed, failed
