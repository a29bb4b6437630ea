#!/usr/bin/python
# -*- coding: utf-8 -*-
# Test stand-in for kubernetes.core.helm_info (see the collection README): a missing release
# returns no `status` key, as the real module does; `status.values` holds the user values.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils import fake_cluster


def main():
    module = AnsibleModule(
        argument_spec=dict(
            binary_path=dict(type="path"),
            release_name=dict(type="str", required=True, aliases=["name"]),
            release_namespace=dict(type="str", required=True, aliases=["namespace"]),
            release_state=dict(type="list", default=[], elements="str"),
            get_all_values=dict(type="bool", default=False),
            **fake_cluster.AUTH_ARGS
        ),
        supports_check_mode=True,
    )
    fake_cluster.record(module, "kubernetes.core.helm_info")
    params = module.params
    state = fake_cluster.load(module)
    release = state["releases"].get("%s/%s" % (params["release_namespace"], params["release_name"]))
    if release is None:
        module.exit_json(changed=False)
    module.exit_json(changed=False, status={
        "name": params["release_name"], "namespace": params["release_namespace"],
        "revision": str(release["revision"]), "chart": "%s-%s" % (release["chart"], release["version"]),
        "status": "deployed", "values": release["values"]})


if __name__ == "__main__":
    main()
