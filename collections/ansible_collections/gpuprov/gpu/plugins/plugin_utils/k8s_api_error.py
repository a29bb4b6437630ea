# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""An API server's refusal of one write, as a line naming the object, the answer and the remedy.

kubernetes.core.k8s (6.2.0, plugins/module_utils/k8s/service.py ``patch_resource``, ``create``,
``replace``) fails with ``Failed to <verb> object: <body>``, where the body is the server's
``Status`` object (k8s.io/apimachinery pkg/apis/meta/v1 types.go: ``code``, ``reason``,
``message``, ``details.causes``) as JSON text, or its ``bytes`` repr in older releases. This
module reads that Status back and names what to do for the reasons a gpuprov write meets:
``Invalid`` (422: a value the server's validation, an immutable field or an admission policy
refuses), ``Conflict`` and ``AlreadyExists`` (409), ``Forbidden`` (403), ``NotFound`` (404: the
object, or the namespace it goes to), ``BadRequest`` (400: a body the server cannot decode).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import json
import re

_MODULE_MESSAGE = re.compile(r"^Failed to (?P<verb>\w+) object: (?P<body>.*)\Z", re.S | re.ASCII)
_ADMISSION = ("ValidatingAdmissionPolicy", "admission webhook", "denied request", "denied the request")


def status_of(message):
    """The server's Status in a kubernetes.core failure message: (verb, dict), or (None, None)."""
    match = _MODULE_MESSAGE.match((message or "").strip())
    if not match:
        return None, None
    body = match.group("body").strip()
    if body[:2] in ("b'", 'b"'):
        try:
            body = ast.literal_eval(body).decode("utf-8", "replace")
        except (ValueError, SyntaxError, AttributeError):
            return None, None
    try:
        status = json.loads(body)
    except ValueError:
        return None, None
    if not isinstance(status, dict) or status.get("kind") != "Status" or not isinstance(status.get("code"), int):
        return None, None
    return match.group("verb"), status


def object_ref(kind, name, namespace=None):
    """``Kind namespace/name`` (``Kind name`` for a cluster-scoped object)."""
    return "%s %s" % (kind, "%s/%s" % (namespace, name) if namespace else name)


def remedy(status, kind, name, namespace=None):
    """What to do about the refusal, in one sentence without its full stop."""
    code, reason = status.get("code"), status.get("reason")
    message = status.get("message") or ""
    scope = "-n %s " % namespace if namespace else ""
    if code == 422 and any(word in message for word in _ADMISSION):
        return ("an admission policy or webhook refused it: ask the cluster's administrators to let gpuprov make "
                "this change (kubectl get validatingadmissionpolicies,validatingwebhookconfigurations)")
    if code == 422 and "immutable" in message:
        return ("the field cannot change on the existing object: delete it (kubectl delete %s %s%s) and run "
                "again, and gpuprov creates it anew" % (kind.lower(), scope, name))
    if code == 422:
        fields = sorted(set(cause.get("field") for cause in (status.get("details") or {}).get("causes") or []
                            if cause.get("field")))
        return ("the server's validation refuses %s: correct the inventory value it comes from"
                % (", ".join(fields) if fields else "the object"))
    if code == 409 and reason == "AlreadyExists":
        return "something else created it meanwhile: run again, and gpuprov updates the object that is there now"
    if code == 409:
        return ("something else changed it while gpuprov wrote it: run again; if it happens each time, find the "
                "other writer in its managed fields (kubectl get %s %s%s -o yaml --show-managed-fields)"
                % (kind.lower(), scope, name))
    if code == 403:
        return ("your user may not change it: check the context, and grant it the verb on %s "
                "(kubectl auth can-i --list)" % kind.lower())
    missing = (status.get("details") or {})
    if code == 404 and missing.get("kind") == "namespaces":
        return ("namespace %s does not exist: create it (kubectl create namespace %s), or set the namespace gpuprov "
                "writes to" % (missing.get("name"), missing.get("name")))
    if code == 400:
        return "the server cannot read the object gpuprov sent: report it to gpuprov's maintainers with this line"
    if code == 404:
        return "it is not in the cluster (any more): check the context, and the name gpuprov was given for it"
    return "see the API server's answer above"


def describe(message, kind, name, namespace=None, verb=None, detail=None):
    """One line for a failed write (``verb``: what gpuprov did, e.g. ``label``; ``detail``: what
    it wrote, e.g. the labels), or None when ``message`` is not an API server's refusal (a
    connection error, a module argument): the caller keeps its own text then."""
    module_verb, status = status_of(message)
    if status is None:
        return None
    return "the API server refused to %s %s%s: HTTP %s %s: %s; %s." % (
        verb or module_verb, object_ref(kind, name, namespace), " %s" % detail if detail else "", status["code"],
        status.get("reason") or "", (status.get("message") or "").rstrip("."), remedy(status, kind, name, namespace))


def label_change(labels):
    """``key=value`` for each label set and ``key-`` for each removed, as kubectl label writes them."""
    return " ".join("%s-" % key if value is None else "%s=%s" % (key, value)
                    for key, value in sorted((labels or {}).items()))
