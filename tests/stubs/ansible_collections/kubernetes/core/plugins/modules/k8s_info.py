#!/usr/bin/python
# -*- coding: utf-8 -*-
# Test stand-in for kubernetes.core.k8s_info: Nodes, DaemonSets and Pods (see the collection README).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils import fake_cluster


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kind=dict(required=True),
            api_version=dict(default="v1", aliases=["api", "version"]),
            name=dict(),
            namespace=dict(),
            label_selectors=dict(type="list", elements="str", default=[]),
            field_selectors=dict(type="list", elements="str", default=[]),
            hidden_fields=dict(type="list", elements="str"),
            wait=dict(type="bool", default=False),
            wait_sleep=dict(type="int", default=5),
            wait_timeout=dict(type="int", default=120),
            wait_condition=dict(type="dict"),
            **fake_cluster.AUTH_ARGS
        ),
        supports_check_mode=True,
    )
    fake_cluster.record(module, "kubernetes.core.k8s_info")
    params = module.params
    state = fake_cluster.load(module)
    resources = []
    if params["kind"] == "Node":
        for name, node in sorted(state["nodes"].items()):
            if params["name"] in (None, name):
                resources.append({"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": name, "labels": node.get("labels") or {}},
                                  "status": {"allocatable": node.get("allocatable") or {}}})
    elif params["kind"] == "DaemonSet":
        for key, daemonset in sorted(state["daemonsets"].items()):
            namespace, name = key.split("/", 1)
            if params["name"] not in (None, name) or params["namespace"] not in (None, namespace):
                continue
            if params["wait"] and not daemonset.get("ready", True):
                module.fail_json(msg="Failed to gather information about DaemonSet(s) even after waiting for %s seconds"
                                 % params["wait_timeout"])
            resources.append({"apiVersion": "apps/v1", "kind": "DaemonSet",
                              "metadata": {"name": name, "namespace": namespace},
                              "spec": {"template": {"metadata": {"annotations": daemonset.get("podAnnotations") or {}}}}})
    elif params["kind"] == "CustomResourceDefinition":
        # A missing CRD is an empty list, not an error (kubernetes.core k8s_info).
        resources = fake_cluster.crd_resources(state, params["name"])
    elif params["kind"] == "Pod":
        resources = fake_cluster.list_pods(module, state, params["namespace"], params["label_selectors"],
                                           params["field_selectors"])
    else:
        module.fail_json(msg="fake cluster: kind %s is not implemented" % params["kind"])
    module.exit_json(changed=False, resources=resources, api_found=True)


if __name__ == "__main__":
    main()
