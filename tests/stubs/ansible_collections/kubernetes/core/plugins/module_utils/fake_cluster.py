# -*- coding: utf-8 -*-
# Test stand-in: the fake cluster state the stub kubernetes.core modules share.
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

STATE_ENV = "GPUPROV_FAKE_K8S_STATE"
LOG_ENV = "GPUPROV_FAKE_CALL_LOG"


def empty_state():
    return {"namespaces": ["default", "kube-system"], "nodes": {}, "repositories": {}, "releases": {},
            "daemonsets": {}}


def load(module):
    path = os.environ.get(STATE_ENV)
    if not path:
        module.fail_json(msg="fake cluster: %s is not set" % STATE_ENV)
    if not os.path.exists(path):
        return empty_state()
    with open(path) as handle:
        state = json.load(handle)
    for key, value in empty_state().items():
        state.setdefault(key, value)
    return state


def save(state):
    path = os.environ[STATE_ENV]
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)))
    with os.fdopen(fd, "w") as handle:
        json.dump(state, handle, indent=1, sort_keys=True)
    os.replace(tmp, path)


def record(module, tool):
    path = os.environ.get(LOG_ENV)
    if not path:
        return
    params = dict((k, v) for k, v in module.params.items() if v is not None)
    if "repo_password" in params:
        params["repo_password"] = "********"
    with open(path, "a") as handle:
        handle.write(json.dumps({"tool": tool, "params": params, "check_mode": module.check_mode}, sort_keys=True) + "\n")


# The options every kubernetes.core module takes for cluster access (k8s_auth_options).
AUTH_ARGS = dict(
    kubeconfig=dict(type="raw", aliases=["kubeconfig_path"]),
    context=dict(type="str", aliases=["kube_context"]),
    host=dict(type="str"),
    api_key=dict(type="str", no_log=True),
    validate_certs=dict(type="bool", aliases=["verify_ssl"]),
    ca_cert=dict(type="path", aliases=["ssl_ca_cert"]),
)


def crd_resources(state, name=None):
    """CustomResourceDefinitions installed in the fake cluster (state["crds"]: names such as
    servicemonitors.monitoring.coreos.com), as k8s_info lists them; none by default."""
    return [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": crd}} for crd in sorted(state.get("crds") or []) if name in (None, crd)]
