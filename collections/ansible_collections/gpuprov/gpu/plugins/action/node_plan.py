# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Controller side of gpuprov.gpu.node_plan: plan this host with the same planner as
`gpuprov plan`, and, given the node's gpu_facts, say what a converge must change.

With ``read_node: true`` it also reads the node itself, with gpuprov.gpu.node_state, in the
same task, and compares everything the plan governs: one round trip for facts, plan and
comparison, which is all a node already as planned costs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core < 2.19: every string is a template
    def trust_as_template(value):
        return value

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import live
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import node_state_client
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import user_catalog
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import parse_intent
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory import VAR_PREFIX, plain
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.mig_persist import BootStateError, boot_state
from ansible_collections.gpuprov.gpu.plugins.plugin_utils.planner import Planner

# Forked workers plan independently; within one process identical intents plan once.
_PLANNER = Planner()

_COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_GPU_MIG_ROLE = os.path.join(_COLLECTION, "roles", "gpu_mig")
# The check persist.yml makes before writing these paths into a systemd unit.
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./+@:-]*$")
_RESTORE_PATH_VARS = ("gpu_mig_restore_state_file", "gpu_mig_restore_program", "gpu_mig_restore_lib_dir",
                      "gpu_mig_restore_unit_dir")
_FACTS = ("gpuprov_plan", "gpuprov_node_changes", "gpuprov_status")
_RESTORE_TEMPLATES = ("gpuprov-mig-restore.py.j2", "gpuprov-mig-restore.service.j2")
# Every variable the two restore templates name (a unit test holds this to their source).
_RESTORE_TEMPLATE_VARS = ("ansible_managed", "gpu_mig_host_services", "gpu_mig_reset_pending",
                          "gpu_mig_restore_environment", "gpu_mig_restore_lib_dir", "gpu_mig_restore_program",
                          "gpu_mig_restore_python", "gpu_mig_restore_service_name",
                          "gpu_mig_restore_state_file", "gpu_mig_restore_timeout")


def _trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((key, _trusted(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("gpu_facts", "fail_on_mismatch", "read_node", "sysfs_root", "kubelet_config_path",
                             "kubelet_config_dir", "kubelet_service",
                             "mps", "mig_restore"))
    # Planning alone needs no connection; read_node uses the task's connection like any module.
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        host = task_vars.get("inventory_hostname")
        args = self._task.args
        fail_on_mismatch = args.get("fail_on_mismatch", True)
        read_node = args.get("read_node", False)
        if read_node and args.get("gpu_facts") is not None:
            result.update(failed=True, msg="gpu_facts and read_node are mutually exclusive: read_node reads them")
            return result

        plan, problems, models_catalog, error = self._plan(host, task_vars)
        if error:
            result.update(failed=True, msg=error)
            return result
        if problems:
            result.update(failed=True, problems=[str(p) for p in problems],
                          msg="%s: the inventory's GPU settings do not plan (`gpuprov plan` shows the same): %s"
                          % (host, "; ".join("%s: %s" % (p.field, p.reason) for p in problems)))
            return result

        result["ansible_facts"] = {"gpuprov_plan": plan}
        result["changed"] = False
        answer = None
        if read_node:
            answer = self._read_node(plan, task_vars, models_catalog)
            if answer.get("failed"):
                failed = dict((k, v) for k, v in answer.items() if not k.startswith("_"))
                failed["msg"] = "%s: reading the node failed: %s" % (host, answer.get("msg", "no message"))
                return failed
            facts = answer["ansible_facts"]["gpu_facts"]
            result["ansible_facts"].update(answer["ansible_facts"])
            result["warnings"] = answer.get("warnings", [])
        else:
            facts = args.get("gpu_facts")
            if facts is None:
                return result

        mismatch = live.hardware_mismatch(plan, facts, models_catalog)
        if mismatch:
            result["ansible_facts"]["gpuprov_node_changes"] = None
            if read_node:
                result["ansible_facts"]["gpuprov_status"] = node_state_client.compare(
                    plan, facts, answer, [], answer["_restore_unit"], unread=answer["_unread"],
                    models_catalog=models_catalog)
            if fail_on_mismatch:
                result.update(failed=True, msg="%s: GPU hardware does not match the inventory: %s" % (host, mismatch))
            else:
                result["mismatch"] = mismatch
            return result
        mig = live.mig_differences(plan, facts)
        changes = {
            "mig_mode": mig["mode"],
            "mig_pending_reset": mig["pending_reset"],
            "mig_layout": mig["layout"],
            "mig": bool(mig["mode"] or mig["pending_reset"] or mig["layout"]),
        }
        result["ansible_facts"]["gpuprov_node_changes"] = changes
        if read_node:
            status = node_state_client.compare(plan, facts, answer, answer["_expected_restore_files"],
                                               answer["_restore_unit"], unread=answer["_unread"],
                                               models_catalog=models_catalog)
            result["ansible_facts"]["gpuprov_status"] = status
            # A converge may stop here only when nothing differs. The host MPS daemon's unit and
            # environment files are templates only the gpu_mps role renders, so a node with
            # host MPS always runs that role.
            changes["in_sync"] = status["status"] == "in-sync" and node_state_client.host_mps(plan) is None
        return result

    def _plan(self, host, task_vars):
        """(plan, problems, the host's GPU models catalog, error message)."""
        variables = {}
        for key in task_vars:
            if key.startswith(VAR_PREFIX) and key not in _FACTS:
                variables[key] = plain(self._templar.template(task_vars[key]))
        # `gpuprov apply --catalog FILE` passes its file for every host (user_catalog.CLI_CATALOG_VAR).
        cli_catalog = variables.pop(user_catalog.CLI_CATALOG_VAR, None)
        user_models = None
        if cli_catalog:
            try:
                user_models = user_catalog.UserCatalog(user_catalog.load_file(cli_catalog))
            except user_catalog.CatalogFileError as exc:
                return None, [], None, "%s: %s" % (host, "; ".join(exc.problems))
        intent, problems = parse_intent(host, variables, task_vars.get("inventory_dir"), user_models=user_models)
        plan = None
        models_catalog = None
        if intent is not None:
            plan, problems = _PLANNER.plan_node(intent)
            models_catalog = intent.models_catalog
        return plan, problems, models_catalog, None

    def _read_node(self, plan, task_vars, models_catalog):
        """Run gpuprov.gpu.node_state with arguments from the plan; its result, plus what to compare."""
        args = self._task.args
        module_args = {"sysfs_root": args.get("sysfs_root") or "/sys"}
        settings = node_state_client.kubelet_settings(plan)
        if settings:
            module_args["kubelet"] = {"path": args.get("kubelet_config_path"), "settings": settings,
                                      "service": args.get("kubelet_service") or "kubelet.service",
                                      "config_dir": args.get("kubelet_config_dir")}
        mps = dict(args.get("mps") or {})
        mps_args = node_state_client.mps_args(plan, mps.get("service", "gpuprov-mps.service"),
                                              mps.get("pipe_directory", "/tmp/nvidia-mps"),
                                              mps.get("log_directory", "/var/log/nvidia-mps"))
        if mps_args:
            module_args["mps"] = mps_args
        restore = None
        unread = []
        if args.get("mig_restore", True) and node_state_client.has_mig_gpus(plan):
            restore, problem = self._restore_paths(plan, task_vars)
            if problem:
                unread.append(problem)
            else:
                module_args["mig_restore"] = dict((k, restore[k]) for k in ("unit", "unit_path", "state_file", "paths"))

        answer = self._execute_module(module_name="gpuprov.gpu.node_state", module_args=module_args,
                                      task_vars=task_vars)
        answer["_restore_unit"] = restore["unit"] if restore else node_state_client.DEFAULT_RESTORE_UNIT
        answer["_expected_restore_files"] = []
        answer["_unread"] = unread
        if answer.get("failed") or "mig_restore" not in module_args:
            return answer
        facts = answer["ansible_facts"]["gpu_facts"]
        if live.hardware_mismatch(plan, facts, models_catalog):
            return answer
        try:
            answer["_expected_restore_files"] = self._restore_expected(plan, facts, restore, task_vars)
        except AnsibleError as exc:
            unread.append("the boot-time MIG restore's files cannot be worked out: %s" % exc)
        return answer

    def _restore_templar(self, plan, task_vars, facts=None):
        """A templar over the gpu_mig role's defaults, overridden by the host's variables."""
        defaults = self._loader.load_from_file(os.path.join(_GPU_MIG_ROLE, "defaults", "main.yml")) or {}
        # The role's own defaults are templates, as Ansible treats them when the role runs.
        variables = dict((name, _trusted(value)) for name, value in defaults.items())
        variables.update(task_vars)
        variables["gpuprov_plan"] = plan
        ansible_facts = dict(task_vars.get("ansible_facts") or {})
        if facts is not None:
            ansible_facts["gpu_facts"] = facts
        variables["ansible_facts"] = ansible_facts
        return self._templar.copy_with_new_env(available_variables=variables)

    def _restore_paths(self, plan, task_vars):
        """(paths of the boot-time MIG restore, None) or (None, why they are not read)."""
        templar = self._restore_templar(plan, task_vars)
        names = _RESTORE_PATH_VARS + ("gpu_mig_restore_service_name",)
        try:
            # One template for all: each template string is compiled on its own.
            values = templar.template(trust_as_template("{{ [%s] }}" % ", ".join(names)))
            paths = dict(zip(_RESTORE_PATH_VARS, values))
            service = values[-1]
        except AnsibleError as exc:
            return None, "the gpu_mig role's restore variables do not template: %s" % exc
        for name, path in paths.items():
            if not isinstance(path, str) or not _SAFE_PATH.match(path):
                # persist.yml refuses it with its own message; the converge must get there.
                return None, "%s is not a safe absolute path" % name
        module_utils = paths["gpu_mig_restore_lib_dir"] + "/ansible_collections/gpuprov/gpu/plugins/module_utils"
        unit = "%s.service" % service
        unit_path = "%s/%s" % (paths["gpu_mig_restore_unit_dir"], unit)
        directories = [os.path.dirname(paths["gpu_mig_restore_state_file"]),
                       os.path.dirname(paths["gpu_mig_restore_program"]), module_utils]
        files = ["%s/%s" % (module_utils, name) for name in node_state_client.RESTORE_SOURCES]
        files += [paths["gpu_mig_restore_program"], paths["gpu_mig_restore_state_file"], unit_path]
        return {"unit": unit, "unit_path": unit_path, "state_file": paths["gpu_mig_restore_state_file"],
                "program": paths["gpu_mig_restore_program"], "directories": directories,
                "module_utils": module_utils, "paths": directories + files}, None

    def _restore_expected(self, plan, facts, restore, task_vars):
        """What persist.yml compares the installed restore with: "path mode is-directory sha1" lines.

        Rendered from the same templates, defaults and filters as persist.yml; empty when the
        plan enables MIG on no GPU (nothing is then installed).
        """
        templar = self._restore_templar(plan, task_vars, facts)
        # The plan and facts the state file is made from, and every variable the templates name,
        # in one template. The state is built with the mig_boot_state filter's own function:
        # looking a collection's filter up makes ansible-core import every filter plugin of the
        # collection, in every worker. The template lookup deep-copies all of its templar's
        # variables for each template, so the templates are rendered over these values alone;
        # ansible_managed is left to the lookup when the host does not set it, as it does.
        names = [name for name in _RESTORE_TEMPLATE_VARS
                 if name != "ansible_managed" or name in templar.available_variables]
        values = templar.template(trust_as_template("{{ [gpu_mig_plan, gpu_mig_gpu_facts, %s] }}" % ", ".join(names)))
        try:
            state = boot_state(values[0], values[1])
        except BootStateError as exc:
            raise AnsibleError("mig_boot_state: %s" % exc)
        if not any(gpu["mig_enabled"] for gpu in state["gpus"]):
            return []
        render_variables = dict(zip(names, values[2:]))
        render_variables["gpuprov_boot_state"] = state
        # The state file's text as persist.yml writes it, and the two templates.
        state_text, program, unit_text = self._templar.copy_with_new_env(available_variables=render_variables).template(
            trust_as_template("{{ [gpuprov_boot_state | to_nice_json(indent=2), %s] }}" % ", ".join(
                "lookup('ansible.builtin.template', '%s')" % os.path.join(_GPU_MIG_ROLE, "templates", name)
                for name in _RESTORE_TEMPLATES)))
        state_text += "\n"
        expected = [node_state_client.expected_entry(path, "0755", True, None) for path in restore["directories"]]
        for name in node_state_client.RESTORE_SOURCES:
            with open(os.path.join(_COLLECTION, "plugins", "module_utils", name), "rb") as handle:
                expected.append(node_state_client.expected_entry("%s/%s" % (restore["module_utils"], name), "0644", False,
                                                                 node_state_client.sha1(handle.read())))
        expected.append(node_state_client.expected_entry(restore["program"], "0755", False, node_state_client.sha1(program)))
        expected.append(node_state_client.expected_entry(restore["state_file"], "0644", False, node_state_client.sha1(state_text)))
        expected.append(node_state_client.expected_entry(restore["unit_path"], "0644", False, node_state_client.sha1(unit_text)))
        return expected
