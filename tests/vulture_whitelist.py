"""Names vulture reports as unused in gpuprov/, the collection's plugins/ and bench/ that are used
all the same: Ansible, click or Python call them by convention. vulture reads this file beside
that code (tests/test_layout.py runs it at 80% confidence; at 60% it also covers the entry points
below); nothing imports it. One entry per name, with the reason.

    vulture --min-confidence 80 gpuprov collections/ansible_collections/gpuprov/gpu/plugins bench \
        tests/vulture_whitelist.py
"""

_ = None  # vulture counts a name as used when it is read, here as an attribute of _

# -- parameters of signatures that others define --------------------------------------------------
_.is_conditional  # CallbackBase.v2_playbook_on_task_start(task, is_conditional): Ansible passes it
_.included_file  # CallbackBase.v2_playbook_on_include(included_file): Ansible passes it
_.exc_info  # __exit__(self, *exc_info): the context-manager protocol passes the exception triple

# -- Ansible plugin documentation, read by ansible-doc and ansible-test ---------------------------
_.DOCUMENTATION  # every module, filter, callback and doc fragment: ansible-doc reads it
_.EXAMPLES  # every module and filter: ansible-doc shows it
_.RETURN  # every module and filter: ansible-doc shows it
_.ModuleDocFragment  # plugins/doc_fragments: the class Ansible's doc-fragment loader looks up
_.LAYOUT  # doc_fragments/gpus.py: the fragment gpuprov.gpu.gpus.layout, used by mig_layout

# -- Ansible plugin entry points, looked up by name ---------------------------------------------
_.FilterModule  # plugins/filter: the class Ansible's filter loader instantiates
_.filters  # FilterModule.filters(): Ansible asks it for the filter functions
_.TRANSFERS_FILES  # ActionBase attribute: whether the action copies files to the node
_.CALLBACK_VERSION  # callback plugins: read by Ansible's callback loader
_.CALLBACK_TYPE  # callback plugins: read by Ansible's callback loader
_.CALLBACK_NAME  # callback plugins: read by Ansible's callback loader
_.CALLBACK_NEEDS_ENABLED  # bench_timing callback: read by Ansible's callback loader
_.v2_playbook_on_start  # CallbackBase event, called by Ansible's task queue manager
_.v2_playbook_on_play_start  # CallbackBase event
_.v2_playbook_on_task_start  # CallbackBase event
_.v2_playbook_on_handler_task_start  # CallbackBase event
_.v2_playbook_on_include  # CallbackBase event
_.v2_playbook_on_stats  # CallbackBase event
_.v2_runner_on_start  # CallbackBase event
_.v2_runner_on_ok  # CallbackBase event
_.v2_runner_on_skipped  # CallbackBase event
_.v2_runner_on_unreachable  # CallbackBase event
_.v2_runner_retry  # CallbackBase event
_.v2_runner_item_on_ok  # CallbackBase event
_.v2_runner_item_on_failed  # CallbackBase event
_.v2_runner_item_on_skipped  # CallbackBase event

# -- ansible-core settings and state that gpuprov sets for Ansible to read ----------------------
_.INVENTORY_ENABLED  # plugin_utils/inventory.py: ansible.constants, set for the offline read
_.INVENTORY_UNPARSED_IS_FAILED  # plugin_utils/inventory.py: ansible.constants, read by InventoryManager
_.INVENTORY_ANY_UNPARSED_IS_FAILED  # plugin_utils/inventory.py: ansible.constants, read by InventoryManager
_._extra_vars  # plugin_utils/inventory.py: VariableManager's -e variables, read by get_vars

# -- click ----------------------------------------------------------------------------------------
_.list_commands  # gpuprov/cli.py: click.Group override, called by click for --help
_.get_command  # gpuprov/cli.py: click.Group override, called by click to resolve a command
_.convert  # gpuprov/options.py: click.ParamType override, called by click on each value
_.apply  # gpuprov/cmd_apply.py: a command cli.py loads by name ("gpuprov.cmd_apply:apply")
_.stop  # gpuprov/cmd_baseline.py: the `baseline stop` subcommand, registered by its decorator
_.trial  # gpuprov/cmd_trial.py: a command cli.py loads by name ("gpuprov.cmd_trial:trial")

# -- data a test holds against its source ---------------------------------------------------------
_.PLAYBOOK_ONLY  # gpuprov/ansible_config.py: the settings test_hostile_input_config holds against base.yml
