# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: k8s_api_error
version_added: "0.2.0"
short_description: An API server's refusal of a kubernetes.core.k8s write, naming the object and the remedy
description:
  - Given the result of a failed C(kubernetes.core.k8s) task (for example C(ansible_failed_result)),
    returns one line naming the object (C(Kind namespace/name)), the server's HTTP code, reason and
    message, and what to do (an admission policy, an immutable field, a conflict with another
    writer, missing RBAC). When the failure is not an answer of the API server (no connection,
    a bad argument), returns the module's message as it is.
author: gpuprov maintainers (@gpuprov)
options:
  _input:
    description: The failed task's result.
    type: dict
    required: true
  kind:
    description: The object's kind, for example C(Node).
    type: str
    required: true
  name:
    description: The object's name.
    type: str
    required: true
  namespace:
    description: The object's namespace; none for a cluster-scoped object.
    type: str
  verb:
    description: What the task did, for example C(label); default the module's verb (C(patch), C(create)).
    type: str
  detail:
    description: What it wrote, in words, after the object.
    type: str
  labels:
    description: Labels the task set (a value) or removed (C(null)); written as C(key=value) and C(key-) after the object.
    type: dict
"""

EXAMPLES = r"""
- name: Stop, naming the refused label
  ansible.builtin.fail:
    msg: "{{ ansible_failed_result | gpuprov.gpu.k8s_api_error('Node', node_name, verb='label', labels=labels) }}"
"""

RETURN = r"""
_value:
  description: One line, ending with a full stop.
  type: str
"""

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import k8s_api_error as api_error


def k8s_api_error(result, kind, name, namespace=None, verb=None, detail=None, labels=None):
    message = (result or {}).get("msg") or "failed"
    if labels:
        detail = " ".join(part for part in (api_error.label_change(labels), detail) if part)
    line = api_error.describe(message, kind, name, namespace=namespace or None, verb=verb, detail=detail)
    return line if line is not None else message.rstrip(".") + "."


class FilterModule(object):
    def filters(self):
        return {"k8s_api_error": k8s_api_error}
