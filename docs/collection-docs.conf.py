# Appended to the conf.py that `antsibull-docs sphinx-init` writes (scripts/build_docs.sh).
# The build runs offline: Sphinx cannot fetch the intersphinx inventories of docs.ansible.com
# or docs.python.org, so none are configured, and the labels that only those sites define
# (antsibull-docs links every module page to them) are named here one by one. Every other
# missing reference stays a warning, and warnings fail the build (-W).
intersphinx_mapping = {}
nitpicky = True
nitpick_ignore = [
    ("std:ref", "action_plugins"),
    ("std:ref", "callback_plugins"),
    ("std:ref", "filter_plugins"),
    ("std:ref", "common_return_values"),
    ("std:ref", "ansible_configuration_settings"),
    ("std:ref", "ansible_collections.ansible.builtin.copy_module"),
    ("std:ref", "ansible_collections.ansible.builtin.file_module"),
    ("std:ref", "ansible_collections.ansible.builtin.systemd_service_module"),
    ("std:ref", "ansible_collections.ansible.builtin.template_module"),
    ("std:ref", "ansible_collections.kubernetes.core.k8s_module"),
    ("std:ref", "ansible_collections.kubernetes.core.k8s_module__parameter-state"),
    # The callback's options come from ansible.builtin's default-callback doc fragment.
    ("std:envvar", "ANSIBLE_DISPLAY_SKIPPED_HOSTS"),
    ("std:envvar", "ANSIBLE_SHOW_CUSTOM_STATS"),
]
