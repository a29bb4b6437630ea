#!/usr/bin/python
# -*- coding: utf-8 -*-
# Test stand-in for kubernetes.core.k8s: state=patched on Node labels (see the collection README).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils import fake_cluster


def server_refusal(verb, code, reason, message, details=None):
    """kubernetes.core.k8s's failure message for an API server's answer: the Status object as
    the real server sends it (k8s.io/apimachinery metav1.Status), after "Failed to VERB object: "."""
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
              "reason": reason, "code": code}
    if details:
        status["details"] = details
    return "Failed to %s object: %s\n" % (verb, json.dumps(status, separators=(",", ":")))


def present_configmap(module, definition):
    """state=present of a v1 ConfigMap: create it, or patch the one there, as kubernetes.core
    6.2.0 does (module_utils/k8s/runner.py perform_action: an existing object is updated with
    service.update, a strategic merge patch, method "update"): data keys and labels the
    definition does not name stay, a null removes one."""
    if definition.get("kind") != "ConfigMap" or definition.get("apiVersion") != "v1":
        module.fail_json(msg="fake cluster: state=present is implemented for v1 ConfigMap objects only")
    metadata = definition.get("metadata") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace") or module.params.get("namespace")
    if not name or not namespace:
        module.fail_json(msg="fake cluster: a ConfigMap needs metadata.name and a namespace")
    data = definition.get("data") or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        # The API server: ConfigMap data values are strings.
        module.fail_json(msg=server_refusal("create", 400, "BadRequest", 'ConfigMap in version "v1" cannot be handled as '
                                            "a ConfigMap: json: cannot unmarshal number into Go struct field "
                                            "ConfigMap.data of type string"))
    state = fake_cluster.load(module)
    if namespace not in state["namespaces"]:
        module.fail_json(msg=server_refusal("create", 404, "NotFound", 'namespaces "%s" not found' % namespace,
                                            {"name": namespace, "kind": "namespaces"}))
    configmaps = state.setdefault("configmaps", {})
    key = "%s/%s" % (namespace, name)
    before = configmaps.get(key)
    if before is None:
        after = {"labels": dict((k, v) for k, v in (metadata.get("labels") or {}).items() if v is not None),
                 "data": dict((k, v) for k, v in data.items() if v is not None)}
    else:
        after = {"labels": _merged(before.get("labels") or {}, metadata.get("labels")),
                 "data": _merged(before.get("data") or {}, data)}
    changed = before != after
    if changed and not module.check_mode:
        configmaps[key] = after
        fake_cluster.save(state)
    result = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace,
                                                                    "labels": after["labels"]}, "data": after["data"]}
    module.exit_json(changed=changed, method="update" if before else "create", result=result)


def delete_pod(module):
    """state=absent of one Pod by kind/name/namespace; a DaemonSet's pod comes back at once."""
    params = module.params
    if not params["name"] or not params["namespace"]:
        module.fail_json(msg="fake cluster: deleting a Pod needs name and namespace")
    state = fake_cluster.load(module)
    key = "%s/%s" % (params["namespace"], params["name"])
    exists = key in fake_cluster.all_pods(state)
    if exists and not module.check_mode:
        fake_cluster.delete_pod(state, key)
        fake_cluster.save(state)
    # kubernetes.core: deleting an object that is not there is not a change and not an error.
    module.exit_json(changed=exists, result={}, method="delete")


def _merged(before, patch):
    """A JSON merge patch of one string map: a key set to null is removed."""
    after = dict(before)
    for key, value in (patch or {}).items():
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    return after


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(default="present", choices=["absent", "present", "patched"]),
            definition=dict(type="raw", aliases=["resource_definition"]),
            src=dict(type="path"),
            kind=dict(type="str"),
            name=dict(type="str"),
            namespace=dict(type="str"),
            api_version=dict(type="str", default="v1", aliases=["api", "version"]),
            # kubernetes.core 6.2.0 module_utils/args_common.py: no "json" (a JSON patch is a
            # list of operations, which a definition is not); it fails argument validation.
            merge_type=dict(type="list", elements="str", choices=["merge", "strategic-merge"]),
            force=dict(type="bool", default=False),
            apply=dict(type="bool", default=False),
            wait=dict(type="bool", default=False),
            wait_timeout=dict(type="int", default=120),
            **fake_cluster.AUTH_ARGS
        ),
        supports_check_mode=True,
    )
    fake_cluster.record(module, "kubernetes.core.k8s")
    definition = module.params["definition"]
    if module.params["state"] == "absent" and module.params["kind"] == "Pod" and definition is None:
        delete_pod(module)
    if not isinstance(definition, dict):
        module.fail_json(msg="fake cluster: only a definition mapping is implemented")
    if module.params["state"] == "present":
        present_configmap(module, definition)
    if module.params["state"] != "patched":
        module.fail_json(msg="fake cluster: only state=patched (Node labels), state=present (ConfigMap) "
                             "and state=absent (Pod) are implemented")
    if definition.get("kind") != "Node" or definition.get("apiVersion") != "v1":
        module.fail_json(msg="fake cluster: only v1 Node objects are implemented")
    metadata = definition.get("metadata") or {}
    unsupported = set(definition) - {"apiVersion", "kind", "metadata"} or set(metadata) - {"name", "labels", "annotations"}
    if unsupported:
        module.fail_json(msg="fake cluster: only metadata.labels and metadata.annotations patches are implemented, "
                             "got %s" % sorted(unsupported))
    state = fake_cluster.load(module)
    node = state["nodes"].get(metadata.get("name"))
    if node is None:
        # kubernetes.core 6.2.0 (module_utils/k8s/runner.py perform_action): "patched" skips a
        # missing object without an error, with this warning and no "method".
        module.warn("resource 'kind=Node,name={0}' was not found but will not be created as 'state' parameter "
                    "has been set to 'patched'".format(metadata.get("name")))
        module.exit_json(changed=False, result={})
    before = copy.deepcopy(node.get("labels") or {})
    after = _merged(before, metadata.get("labels"))
    annotations_before = copy.deepcopy(node.get("annotations") or {})
    annotations_after = _merged(annotations_before, metadata.get("annotations"))
    if annotations_after != annotations_before and not module.check_mode:
        node["annotations"] = annotations_after
        fake_cluster.save(state)
    changed = after != before or annotations_after != annotations_before
    if after != before and not module.check_mode:
        node["labels"] = after
        fake_cluster.reconcile_daemon_pods(state, metadata["name"])
        if before.get(fake_cluster.CONFIG_LABEL) != after.get(fake_cluster.CONFIG_LABEL):
            # config-manager follows the label and restarts the plugin with the new config.
            fake_cluster.start_plugin(fake_cluster.ensure_pod_state(state), metadata["name"])
        fake_cluster.save(state)
    result = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": metadata["name"], "labels": after,
                                                               "annotations": annotations_after}}
    # The real module patches an existing object through service.update: method "update".
    module.exit_json(changed=changed, method="update", result=result,
                     diff={"before": {"metadata": {"labels": before}}, "after": {"metadata": {"labels": after}}})


if __name__ == "__main__":
    main()
