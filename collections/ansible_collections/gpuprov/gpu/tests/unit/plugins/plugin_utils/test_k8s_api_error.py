# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""plugin_utils/k8s_api_error.py on the shapes of kubernetes.core's failure messages; the real
server's answers themselves: tests/test_api_errors_control_plane.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import k8s_api_error


def status(code, reason, message, **details):
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message, "details": details}


def test_the_bytes_repr_of_older_releases_is_read_too():
    body = json.dumps(status(403, "Forbidden", 'nodes "n1" is forbidden: User "x" cannot patch resource "nodes"'))
    line = k8s_api_error.describe("Failed to patch object: %r" % body.encode(), "Node", "n1", verb="label",
                                  detail=k8s_api_error.label_change({"gpu": "on", "old": None}))
    assert line == ('the API server refused to label Node n1 gpu=on old-: HTTP 403 Forbidden: nodes "n1" is '
                    'forbidden: User "x" cannot patch resource "nodes"; your user may not change it: check the '
                    'context, and grant it the verb on node (kubectl auth can-i --list).')


def test_a_failure_that_is_not_a_server_answer_is_left_to_the_caller():
    assert k8s_api_error.describe("Failed to patch object: HTTPSConnectionPool(host='x'): timed out", "Node", "n1") \
        is None
    assert k8s_api_error.describe("Failed to load kubeconfig", "Node", "n1") is None
    assert k8s_api_error.describe(None, "Node", "n1") is None


def test_invalid_names_the_fields_the_server_names():
    body = json.dumps(status(422, "Invalid", 'Node "n1" is invalid: metadata.labels: Invalid value: "a b"',
                             causes=[{"field": "metadata.labels", "reason": "FieldValueInvalid"}]))
    line = k8s_api_error.describe("Failed to patch object: " + body, "Node", "n1")
    assert line.startswith("the API server refused to patch Node n1: HTTP 422 Invalid: ")
    assert line.endswith("the server's validation refuses metadata.labels: correct the inventory value it comes from.")


def test_already_exists_says_to_run_again():
    body = json.dumps(status(409, "AlreadyExists", 'configmaps "c" already exists'))
    line = k8s_api_error.describe("Failed to create object: " + body, "ConfigMap", "c", namespace="ns")
    assert line == ('the API server refused to create ConfigMap ns/c: HTTP 409 AlreadyExists: configmaps "c" already '
                    'exists; something else created it meanwhile: run again, and gpuprov updates the object that is '
                    'there now.')


def test_a_missing_namespace_says_to_create_it():
    # The real server's answer to a create in a namespace that does not exist (v1.37.2).
    message = ('Failed to create object: {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
               '"message":"namespaces \\"nowhere\\" not found","reason":"NotFound",'
               '"details":{"name":"nowhere","kind":"namespaces"},"code":404}\n')
    line = k8s_api_error.describe(message, "ConfigMap", "c", namespace="nowhere", verb="apply")
    assert line == ('the API server refused to apply ConfigMap nowhere/c: HTTP 404 NotFound: namespaces "nowhere" not '
                    'found; namespace nowhere does not exist: create it (kubectl create namespace nowhere), or set the '
                    'namespace gpuprov writes to.')
