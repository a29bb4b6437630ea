#!/usr/bin/python
# -*- coding: utf-8 -*-
# Test stand-in for kubernetes.core.helm (see the collection README).
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.kubernetes.core.plugins.module_utils import fake_cluster

DEVICE_PLUGIN_CHART = "nvidia-device-plugin"
CONFIG_CHECKSUM = "checksum/config"


def pod_template_annotations(values):
    """The annotations the device plugin chart gives its pod templates: podAnnotations, plus
    checksum/config, the sha256 of its rendered ConfigMap, unless podAnnotations sets that key
    (NVIDIA/k8s-device-plugin v0.19.3 deployments/helm/nvidia-device-plugin/templates/_helpers.tpl,
    "nvidia-device-plugin.podAnnotations"). Here a digest of config.map stands for the one of
    the rendered ConfigMap: it changes when and only when the map does."""
    annotations = dict(values.get("podAnnotations") or {})
    config_map = (values.get("config") or {}).get("map")
    if config_map and CONFIG_CHECKSUM not in annotations:
        annotations[CONFIG_CHECKSUM] = hashlib.sha256(json.dumps(config_map, sort_keys=True).encode()).hexdigest()
    return annotations


def chart_name(chart_ref):
    return chart_ref.rstrip("/").split("/")[-1]


def daemonset_name(release):
    # The device plugin chart's fullname helper.
    name = release if DEVICE_PLUGIN_CHART in release else "%s-%s" % (release, DEVICE_PLUGIN_CHART)
    return name[:63].rstrip("-")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            binary_path=dict(type="path"),
            chart_ref=dict(type="path"),
            chart_repo_url=dict(type="str"),
            chart_version=dict(type="str"),
            dependency_update=dict(type="bool", default=False),
            release_name=dict(type="str", required=True, aliases=["name"]),
            release_namespace=dict(type="str", required=True, aliases=["namespace"]),
            release_state=dict(default="present", choices=["present", "absent"], aliases=["state"]),
            release_values=dict(type="dict", default={}, aliases=["values"]),
            values_files=dict(type="list", default=[], elements="str"),
            update_repo_cache=dict(type="bool", default=False),
            reset_values=dict(type="bool", default=True),
            reuse_values=dict(type="bool"),
            disable_hook=dict(type="bool", default=False),
            force=dict(type="bool", default=False),
            purge=dict(type="bool", default=True),
            wait=dict(type="bool", default=False),
            wait_timeout=dict(type="str"),
            timeout=dict(type="str"),
            atomic=dict(type="bool", default=False),
            create_namespace=dict(type="bool", default=False),
            replace=dict(type="bool", default=False),
            skip_crds=dict(type="bool", default=False),
            history_max=dict(type="int"),
            set_values=dict(type="list", elements="dict"),
            insecure_skip_tls_verify=dict(type="bool", default=False),
            plain_http=dict(type="bool", default=False),
            take_ownership=dict(type="bool", default=False),
            **fake_cluster.AUTH_ARGS
        ),
        required_if=[("release_state", "present", ["release_name", "chart_ref"])],
        mutually_exclusive=[("wait_timeout", "timeout")],
        supports_check_mode=True,
    )
    fake_cluster.record(module, "kubernetes.core.helm")
    params = module.params
    state = fake_cluster.load(module)
    key = "%s/%s" % (params["release_namespace"], params["release_name"])
    current = state["releases"].get(key)

    if params["release_state"] == "absent":
        changed = current is not None
        if changed and not module.check_mode:
            del state["releases"][key]
            fake_cluster.save(state)
        # kubernetes.core 6.2.0 modules/helm.py: the release status after `helm uninstall`
        # (none: the release is gone), or the status it found (none) when nothing was there.
        module.exit_json(changed=changed, status=None)

    if params["update_repo_cache"] and not state["repositories"]:
        # kubernetes.core 6.2.0 modules/helm.py runs `helm repo update` first; helm fails it when
        # no repository was ever added.
        stderr = "Error: no repositories found. You must add one before updating\n"
        module.fail_json(msg="Failure when executing Helm command. Exited 1.\nstdout: \nstderr: %s" % stderr,
                         stdout="", stderr=stderr, command="helm repo update")
    chart_ref = params["chart_ref"]
    if not chart_ref.startswith("oci://") and "/" in chart_ref and not params["chart_repo_url"]:
        repo = chart_ref.split("/", 1)[0]
        if repo not in state["repositories"]:
            module.fail_json(msg='Failure when executing Helm command. Exited 1.\nstdout: \nstderr: '
                                 'Error: repo %s not found\n' % repo, command="helm upgrade -i %s %s" % (params["release_name"], chart_ref))
    if params["release_namespace"] not in state["namespaces"] and not params["create_namespace"]:
        module.fail_json(msg='Failure when executing Helm command. Exited 1.\nstdout: \nstderr: '
                             'Error: create: failed to create: namespaces "%s" not found\n' % params["release_namespace"])

    wanted = {"chart": chart_name(chart_ref), "chart_ref": chart_ref, "version": params["chart_version"],
              "values": params["release_values"]}
    changed = current is None or any(current.get(k) != v for k, v in wanted.items())
    revision = (current or {}).get("revision", 0) + (1 if changed else 0)
    if changed and not module.check_mode:
        wanted["revision"] = revision
        state["releases"][key] = wanted
        if params["release_namespace"] not in state["namespaces"]:
            state["namespaces"].append(params["release_namespace"])
        if wanted["chart"] == DEVICE_PLUGIN_CHART:
            fullname = daemonset_name(params["release_name"])
            ds_key = "%s/%s" % (params["release_namespace"], fullname)
            daemonset = state["daemonsets"].setdefault(ds_key, {"ready": True})
            annotations = pod_template_annotations(params["release_values"])
            # A new pod template (or the first install) restarts the chart's pods; a values
            # change outside the template (e.g. config.map alone) only updates the ConfigMap.
            template_changed = current is None or daemonset.get("podAnnotations") != annotations
            daemonset["podAnnotations"] = annotations
            wanted.update(daemonset=fullname, release_name=params["release_name"])
            if template_changed:
                fake_cluster.roll_daemonsets(state, params["release_namespace"], fullname)
        fake_cluster.save(state)
    module.exit_json(changed=changed, status={
        "name": params["release_name"], "namespace": params["release_namespace"], "revision": str(revision),
        "chart": "%s-%s" % (wanted["chart"], params["chart_version"]), "status": "deployed",
        "values": params["release_values"]})


if __name__ == "__main__":
    main()
