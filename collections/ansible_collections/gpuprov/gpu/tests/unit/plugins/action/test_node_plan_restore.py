# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""node_plan's expected boot-time MIG restore files against the gpu_mig role's own rendering.

node_plan renders the restore's templates over the variables they name, worked out first with
all of the host's variables; the role renders them with the template lookup over all of them
(persist.yml, restore_install.yml). Each case here renders both ways with a real templar and
compares the checksums node_plan expects with those of the role's texts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import jinja2
import jinja2.meta
import pytest

from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template

from ansible_collections.gpuprov.gpu.plugins.action import node_plan
from ansible_collections.gpuprov.gpu.plugins.filter.mig_boot_state import FilterModule
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import node_state_client
from ansible_collections.gpuprov.gpu.tests.unit.plugins.plugin_utils.test_drift import (
    H100_MIG,
    facts_as_planned,
    plan_for,
)

TEMPLATES = os.path.join(node_plan._GPU_MIG_ROLE, "templates")
# The role's two templates, as persist.yml and restore_install.yml render them: the template
# lookup over all of the host's variables.
ROLE_TEMPLATES = "{{ [gpu_mig_plan, gpu_mig_gpu_facts, %s] }}" % ", ".join(
    "lookup('ansible.builtin.template', '%s')" % os.path.join(TEMPLATES, name) for name in node_plan._RESTORE_TEMPLATES)


@pytest.fixture(scope="module")
def action():
    init_plugin_loader()
    loader = DataLoader()
    return node_plan.ActionModule(task=Task(), connection=None, play_context=PlayContext(), loader=loader,
                                  templar=Templar(loader=loader), shared_loader_obj=None)


def host_vars(**extra):
    variables = {"inventory_hostname": "gpu01", "gpuprov_sharing": H100_MIG["gpuprov_sharing"]}
    # As an inventory file gives them: every string a template, nested ones too.
    variables.update(node_plan._trusted(extra))
    return variables


def both_ways(action, task_vars, plan=None):
    """(node_plan's expected checksums, the role's) for the program, state file and unit."""
    plan = plan or plan_for(H100_MIG)
    facts = facts_as_planned(plan)
    restore, problem = action._restore_paths(plan, task_vars)
    assert problem is None, problem
    expected = action._restore_expected(plan, facts, restore, task_vars)
    plan_value, facts_value, program, unit_text = action._restore_templar(plan, task_vars, facts).template(
        trust_as_template(ROLE_TEMPLATES))
    # The state file as persist.yml writes it: the filter's result, through to_nice_json(indent=2).
    # (Called here directly: this test process imports the collection without Ansible's
    # collection loader, which resolves gpuprov.gpu.* filter names in templates.)
    state = FilterModule().filters()["mig_boot_state"](plan_value, facts_value)
    state_text = Templar(loader=DataLoader(), variables={"state": state}).template(
        trust_as_template("{{ state | to_nice_json(indent=2) }}\n"))
    role = [node_state_client.expected_entry(restore["program"], "0755", False, node_state_client.sha1(program)),
            node_state_client.expected_entry(restore["state_file"], "0644", False, node_state_client.sha1(state_text)),
            node_state_client.expected_entry(restore["unit_path"], "0644", False, node_state_client.sha1(unit_text))]
    return expected[-3:], role, unit_text


def test_the_variable_list_is_every_name_the_templates_use():
    environment = jinja2.Environment(trim_blocks=True)
    named = set()
    for name in node_plan._RESTORE_TEMPLATES:
        with open(os.path.join(TEMPLATES, name)) as handle:
            named |= jinja2.meta.find_undeclared_variables(environment.parse(handle.read()))
    assert named == set(node_plan._RESTORE_TEMPLATE_VARS)


def test_defaults_render_as_the_role_renders_them(action):
    expected, role, unit_text = both_ways(action, host_vars())
    assert expected == role
    assert "ExecStart=" in unit_text


@pytest.mark.parametrize("extra, in_unit", [
    # The host's own ansible_managed, a template over another host variable.
    ({"ansible_managed": "gpuprov on {{ inventory_hostname }}"}, "# gpuprov on gpu01"),
    # Role variables overridden by templates over other variables, a list and a dict among them.
    ({"site_python": "/opt/py/bin/python3", "gpu_mig_restore_python": "{{ site_python }}"},
     "ExecStart=/opt/py/bin/python3 "),
    ({"gpu_mig_host_services": ["dcgm.service", "{{ inventory_hostname }}-agent.service"]},
     " dcgm.service gpu01-agent.service\n"),
    ({"gpu_mig_restore_environment": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "SITE": "{{ inventory_hostname }}"}},
     'Environment="SITE=gpu01"'),
    ({"gpu_mig_restore_timeout": "{{ 200 + 100 }}", "gpu_mig_reset_pending": "{{ 1 == 2 }}"},
     "--no-reset\n"),
])
def test_host_overrides_render_as_the_role_renders_them(action, extra, in_unit):
    expected, role, unit_text = both_ways(action, host_vars(**extra))
    assert expected == role
    assert in_unit in unit_text


def test_a_plan_without_mig_expects_nothing(action):
    plan = plan_for(H100_MIG)
    for gpu in plan["gpus"]:
        gpu["mig"]["enabled"] = False
    facts = facts_as_planned(plan)
    restore, problem = action._restore_paths(plan, host_vars())
    assert problem is None
    assert action._restore_expected(plan, facts, restore, host_vars()) == []


def test_facts_without_the_planned_gpus_are_an_error_naming_the_filter(action):
    plan = plan_for(H100_MIG)
    restore, problem = action._restore_paths(plan, host_vars())
    with pytest.raises(AnsibleError, match="mig_boot_state: .*GPU 1: gpu_facts cannot identify it"):
        action._restore_expected(plan, {"driver_available": True, "gpus": facts_as_planned(plan)["gpus"][:1]},
                                 restore, host_vars())
