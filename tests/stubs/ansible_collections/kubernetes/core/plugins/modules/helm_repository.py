#!/usr/bin/python
# -*- coding: utf-8 -*-
# Test stand-in for kubernetes.core.helm_repository (see the collection README).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils import fake_cluster


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_name=dict(type="str", required=True, aliases=["name"]),
            repo_url=dict(type="str", aliases=["url"]),
            repo_username=dict(type="str", aliases=["username"]),
            repo_password=dict(type="str", no_log=True, aliases=["password"]),
            repo_state=dict(type="str", default="present", choices=["present", "absent"], aliases=["state"]),
            binary_path=dict(type="path"),
            force_update=dict(type="bool", default=False, aliases=["force"]),
            pass_credentials=dict(type="bool", default=False, no_log=False),
            insecure_skip_tls_verify=dict(type="bool", default=False),
            **fake_cluster.AUTH_ARGS
        ),
        required_together=[["repo_username", "repo_password"]],
        required_if=[("repo_state", "present", ["repo_url"])],
        supports_check_mode=True,
    )
    fake_cluster.record(module, "kubernetes.core.helm_repository")
    name, url = module.params["repo_name"], module.params["repo_url"]
    if url and url.startswith("oci://"):
        # helm v3.21.4 `repo add` reads an OCI URL's index through the OCI getter and fails; the
        # module wraps helm's stderr (kubernetes.core 6.2.0 module_utils/helm.py run_helm_command).
        # After "cannot be reached: " helm names the cause (for oci://registry.example.com/charts:
        # failed to perform "FetchReference" on source: invalid reference); the stub cannot know it.
        command = "helm repo add %s %s" % (name, url)
        stderr = 'Error: looks like "%s" is not a valid chart repository or cannot be reached: %s\n' % (
            url, "failed to perform \"FetchReference\" on source: invalid reference")
        module.fail_json(msg="Failure when executing Helm command. Exited 1.\nstdout: \nstderr: %s" % stderr,
                         stdout="", stderr=stderr, command=command)
    state = fake_cluster.load(module)
    current = state["repositories"].get(name)
    if module.params["repo_state"] == "absent":
        changed = current is not None
        if changed and not module.check_mode:
            del state["repositories"][name]
            fake_cluster.save(state)
        module.exit_json(changed=changed)
    if current is not None and current != url and not module.params["force_update"]:
        module.fail_json(msg="Repository already have a repository named %s" % name)
    # As kubernetes.core does: force_update re-adds (and reports a change) every time.
    changed = current is None or module.params["force_update"]
    if changed and not module.check_mode:
        state["repositories"][name] = url
        fake_cluster.save(state)
    module.exit_json(changed=changed, stdout="", stderr="", command="helm repo add %s %s" % (name, url))


if __name__ == "__main__":
    main()
