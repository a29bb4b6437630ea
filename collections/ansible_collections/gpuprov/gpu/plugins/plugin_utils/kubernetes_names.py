# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Kubernetes' rules for the names gpuprov writes: node names and label values.

Node names are DNS subdomains (RFC 1123): lower-case alphanumerics, '-' and '.', at most 253
characters (k8s.io/apimachinery pkg/util/validation/validation.go, IsDNS1123Subdomain). The
subdomain pattern (DNS_SUBDOMAIN) is also the name part of an extended resource name
(device_plugin_schema.py); this is the one file that spells it.
Label values are at most 63 characters, alphanumerics at both ends and '-', '_', '.' between,
or empty (the same file, IsValidLabelValue).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
NODE_NAME_RE = re.compile(r"^%s\Z" % DNS_SUBDOMAIN)
NODE_NAME_MAX = 253
LABEL_VALUE_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
LABEL_VALUE_MAX = 63
