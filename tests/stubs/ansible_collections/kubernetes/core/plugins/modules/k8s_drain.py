#!/usr/bin/python
# -*- coding: utf-8 -*-
# Test stand-in for kubernetes.core.k8s_drain (see the collection README). It follows the real
# module of kubernetes.core 6.2.0 (plugins/modules/k8s_drain.py) step by step:
# - drain cordons first (and keeps the node cordoned when a later step fails, except when the
#   pod filter refuses), lists the node's pods (pod_selectors narrow the list), filters them in
#   the real order: mirror pods skipped, finished pods deleted, pods with an emptyDir volume
#   (DaemonSet pods included: the check comes before the owner check) need
#   delete_emptydir_data, unmanaged pods need force, DaemonSet pods need ignore_daemonsets;
# - evicts one pod after the other and fails at once on the first refusal (a
#   PodDisruptionBudget answers 429), leaving the pods evicted so far evicted;
# - with wait_timeout, waits for the evicted pods to go and only warns
#   ("timeout reached while pods were still running.") when they do not.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils import fake_cluster

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def filter_pods(pods, force, ignore_daemonset, delete_emptydir_data):
    daemonset, unmanaged, mirror, local_storage, to_delete = [], [], [], [], []
    for key, pod in sorted(pods.items()):
        if MIRROR_ANNOTATION in (pod.get("annotations") or {}):
            mirror.append(key)
        elif pod.get("phase", "Running") in ("Succeeded", "Failed"):
            to_delete.append(key)
        elif pod.get("emptyDir"):
            local_storage.append(key)
        elif not pod.get("owner"):
            unmanaged.append(key)
        elif pod["owner"]["kind"] == "DaemonSet":
            daemonset.append(key)
        else:
            to_delete.append(key)
    warnings, errors = [], []
    if unmanaged:
        if not force:
            errors.append("cannot delete Pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or "
                          "StatefulSet (use option force set to yes): {0}.".format(",".join(unmanaged)))
        else:
            warnings.append("Deleting Pods not managed by ReplicationController, ReplicaSet, Job, DaemonSet or "
                            "StatefulSet: {0}.".format(",".join(unmanaged)))
            to_delete += unmanaged
    if mirror:
        warnings.append("cannot delete mirror Pods using API server: {0}.".format(",".join(mirror)))
    if local_storage:
        if not delete_emptydir_data:
            errors.append("cannot delete Pods with local storage: {0}.".format(",".join(local_storage)))
        else:
            warnings.append("Deleting Pods with local storage: {0}.".format(",".join(local_storage)))
            to_delete += local_storage
    if daemonset:
        if not ignore_daemonset:
            errors.append("cannot delete DaemonSet-managed Pods (use option ignore_daemonset set to yes): {0}."
                          .format(",".join(daemonset)))
        else:
            warnings.append("Ignoring DaemonSet-managed Pods: {0}.".format(",".join(daemonset)))
    return to_delete, warnings, errors


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(default="drain", choices=["cordon", "drain", "uncordon"]),
            name=dict(required=True),
            delete_options=dict(type="dict", default={}, options=dict(
                terminate_grace_period=dict(type="int"),
                force=dict(type="bool", default=False),
                ignore_daemonsets=dict(type="bool", default=False),
                delete_emptydir_data=dict(type="bool", default=False),
                disable_eviction=dict(type="bool", default=False),
                wait_timeout=dict(type="int"),
                wait_sleep=dict(type="int", default=5),
            )),
            pod_selectors=dict(type="list", elements="str", aliases=["label_selectors"]),
            **fake_cluster.AUTH_ARGS
        ),
        # As the real module: no check mode support, so Ansible skips it under --check.
        supports_check_mode=False,
    )
    fake_cluster.record(module, "kubernetes.core.k8s_drain")
    params = module.params
    name = params["name"]
    state = fake_cluster.ensure_pod_state(fake_cluster.load(module))
    node = state["nodes"].get(name)
    if node is None:
        module.fail_json(msg="Node {0} not found.".format(name))
    if params["state"] == "cordon":
        if node.get("unschedulable"):
            module.exit_json(changed=False, result="node {0} already marked unschedulable.".format(name))
        node["unschedulable"] = True
        fake_cluster.save(state)
        module.exit_json(changed=True, result="node {0} marked unschedulable.".format(name))
    if params["state"] == "uncordon":
        if not node.get("unschedulable"):
            module.exit_json(changed=False, result="node {0} already marked schedulable.".format(name))
        node["unschedulable"] = False
        fake_cluster.save(state)
        module.exit_json(changed=True, result="node {0} marked schedulable.".format(name))

    options = params["delete_options"] or {}
    result, changed = [], False
    if not node.get("unschedulable"):
        node["unschedulable"] = True
        changed = True
        result.append("node {0} marked unschedulable.".format(name))
    else:
        result.append("node {0} already marked unschedulable.".format(name))
    pods = dict((key, pod) for key, pod in fake_cluster.all_pods(state).items()
                if pod["nodeName"] == name and fake_cluster.selector_matches(params["pod_selectors"], pod.get("labels") or {}))
    to_delete, warnings, errors = filter_pods(pods, options["force"], options["ignore_daemonsets"],
                                              options["delete_emptydir_data"])
    if errors:
        if changed:  # _revert_node_patch
            node["unschedulable"] = False
        module.fail_json(msg="Pod deletion errors: {0}".format(" ".join(errors)))
    evicted = []
    for key in to_delete:
        pod = pods[key]
        pdb_key = None if options["disable_eviction"] else fake_cluster.blocking_pdb(state, key, pod)
        if pdb_key is not None:
            pdb = state["pdbs"][pdb_key]
            if pdb.get("refusalsBeforeReady") is not None:
                pdb["refusalsBeforeReady"] -= 1
                if pdb["refusalsBeforeReady"] <= 0:
                    pdb["disruptionsAllowed"] = 1
            # Saved: the cordon and the evictions so far stay, as in the real cluster.
            fake_cluster.save(state)
            # The API server's 429 body is JSON with this message (policy/v1 eviction).
            module.fail_json(msg="Failed to delete pod {0} due to: Cannot evict pod as it would violate the pod's "
                                 "disruption budget.".format(key))
        if pdb_key is None and not options["disable_eviction"]:
            for pdb in state["pdbs"].values():
                if all((pod.get("labels") or {}).get(k) == v for k, v in pdb["selector"].items()):
                    pdb["disruptionsAllowed"] = max(0, pdb.get("disruptionsAllowed", 0) - 1)
        # kubernetes.core 6.2.0 k8s_drain.py sends delete options only for a truthy
        # terminate_grace_period ("if self._drain_options.get('terminate_grace_period')"): 0, like
        # none, leaves the pod's own grace period.
        grace = options["terminate_grace_period"]
        seconds = pod.get("terminationSeconds", 0) if not grace else grace
        if key in state["pods"]:
            if seconds:
                state["pods"][key].update(deleting=True, terminationSeconds=seconds)
            else:
                del state["pods"][key]
        else:
            fake_cluster.delete_pod(state, key)
        evicted.append(key)
        changed = True
    if evicted and options["wait_timeout"] is not None:
        # The stub's clock: waiting wait_timeout seconds lets every grace period that short end.
        still = []
        for key in evicted:
            pod = state["pods"].get(key)
            if pod is None:
                continue
            if options["wait_timeout"] == 0 or pod["terminationSeconds"] <= options["wait_timeout"]:
                del state["pods"][key]
            else:
                pod["terminationSeconds"] -= options["wait_timeout"]
                still.append(key)
        if still:
            warnings.append("timeout reached while pods were still running.")
    if evicted:
        result.append("{0} Pod(s) deleted from node.".format(len(evicted)))
    fake_cluster.save(state)
    if warnings:
        # AnsibleModule.warn: the real module returns them in `warnings`, which Ansible shows.
        for warning in warnings:
            module.warn(warning)
    module.exit_json(changed=changed, result=" ".join(result))


if __name__ == "__main__":
    main()
