#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mig_restore_unit
short_description: Check that the installed boot-time MIG restore runs, then enable its unit
version_added: "0.2.0"
description:
  - Runs the installed C(gpuprov-mig-restore) program as its systemd unit will at boot (the
    same interpreter, program, state file and environment) with C(--dry-run), which changes
    nothing. Exit 0 (the node is as the state file says) and exit 4 (some GPU differs, for
    example a MIG mode change pending a GPU reset) pass; any other exit fails the module,
    naming the exit code's meaning, and the unit is left as it was, so that a restore that
    could not run at boot is never enabled.
  - Then, with O(daemon_reload), reloads systemd's units (after the unit file changed), and
    enables O(service) unless C(systemctl is-enabled) already says C(enabled). A masked unit is
    refused.
  - The gpu_mig role installs the restore with M(gpuprov.gpu.file_set) and runs this module
    after it; one module run instead of a command and M(ansible.builtin.systemd_service).
author: gpuprov maintainers (@gpuprov)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Runs the dry run (it changes nothing) and reports whether the unit would be enabled; reloads and enables nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  python:
    description: The interpreter the unit runs the program with (its C(ExecStart=)).
    type: path
    required: true
  program:
    description: The installed restore program.
    type: path
    required: true
  state_file:
    description: The MIG state file the program restores.
    type: path
    required: true
  environment:
    description: Environment variables the unit sets (its C(Environment=)), added to the module's.
    type: dict
    default: {}
  service:
    description: The restore's systemd unit.
    type: str
    required: true
  daemon_reload:
    description: Run C(systemctl daemon-reload) before enabling (the unit file was just written).
    type: bool
    default: false
requirements:
  - systemd on the node
"""

EXAMPLES = r"""
- name: Check that the MIG restore runs and enable it at boot
  become: true
  gpuprov.gpu.mig_restore_unit:
    python: /usr/bin/python3
    program: /usr/local/libexec/gpuprov/gpuprov-mig-restore
    state_file: /etc/gpuprov/mig-state.json
    service: gpuprov-mig-restore.service
    daemon_reload: "{{ '/etc/systemd/system/gpuprov-mig-restore.service' in installed.changed_files }}"
"""

RETURN = r"""
dry_run:
  description: The program's dry run.
  returned: always
  type: dict
  contains:
    rc:
      description: Its exit code (0 as planned, 4 some GPU differs).
      type: int
    stdout:
      description: What it printed.
      type: str
    stderr:
      description: What it printed on standard error.
      type: str
changes_pending:
  description: The dry run found a GPU that differs from the state file (exit 4).
  returned: always
  type: bool
enabled_before:
  description: What C(systemctl is-enabled) said before (V(enabled), V(disabled), ...).
  returned: when the dry run passed
  type: str
daemon_reloaded:
  description: Whether systemd's units were reloaded.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuprov.gpu.plugins.module_utils.systemd_unit import unit_name

# gpuprov-mig-restore's exit codes that mean it can run at boot (module_utils/mig_restore.py:
# EXIT_OK, EXIT_CHANGES_NEEDED).
PASSING_EXITS = (0, 4)
CHANGES_PENDING = 4


def _exit_meaning(rc):
    """The program's own words for exit RC (imported only on a failure: the module_utils it
    needs are NVML's, which this module does not use otherwise)."""
    from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_restore import EXIT_CODES

    return dict(EXIT_CODES).get(rc, "not one of the program's exit codes (killed, or not the program)")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            program=dict(type="path", required=True),
            state_file=dict(type="path", required=True),
            environment=dict(type="dict", default={}),
            service=dict(type="str", required=True),
            daemon_reload=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        service = unit_name(params["service"])
    except ValueError as exc:
        module.fail_json(msg="mig_restore_unit: service: %s" % exc)
    environment = dict((str(key), str(value)) for key, value in params["environment"].items())
    argv = [params["python"], params["program"], "--state-file", params["state_file"], "--dry-run"]
    rc, out, err = module.run_command(argv, environ_update=environment)
    dry_run = dict(rc=rc, stdout=out, stderr=err)
    result = dict(changed=False, dry_run=dry_run, changes_pending=rc == CHANGES_PENDING, daemon_reloaded=False)
    if rc not in PASSING_EXITS:
        module.fail_json(msg="the boot-time MIG restore would not run at boot: %s exited %d (%s): %s; its unit %s "
                             "is left as it was" % (" ".join(argv), rc, _exit_meaning(rc),
                                                    (err or out).strip() or "no output", service), **result)

    systemctl = module.get_bin_path("systemctl", required=True)

    def run(*args):
        code, text, error = module.run_command([systemctl] + list(args))
        if code != 0:
            module.fail_json(msg="systemctl %s exited %d: %s" % (" ".join(args), code, (error or text).strip()),
                             **result)
        return text

    if params["daemon_reload"] and not module.check_mode:
        # Not a change of its own: the unit file that needs it was (reported) written before.
        run("daemon-reload")
        result["daemon_reloaded"] = True
    # is-enabled exits non-zero for every state but the enabled ones; its output names the state.
    code, text, error = module.run_command([systemctl, "is-enabled", service])
    state = text.strip() or (error.strip() if code != 0 else "")
    result["enabled_before"] = state
    if state.startswith("masked"):
        module.fail_json(msg="%s is masked; unmask it (systemctl unmask %s) to have the MIG state restored at boot"
                             % (service, service), **result)
    if state != "enabled":
        if not module.check_mode:
            run("enable", service)
        result["changed"] = True
    module.exit_json(**result)


if __name__ == "__main__":
    main()
