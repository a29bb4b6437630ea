# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""File names built from inventory host names, safe to join to a folder.

An inventory host name can be anything a YAML key can (``../../etc/cron.d/x``, a newline,
``..``); files the controller writes per host (status, baseline samples) use this name, so
they always stay in their folder and the CLI finds them by the same rule.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
MAX_LENGTH = 100


def safe_file_name(name):
    """``name`` unchanged when it is a plain file name ([A-Za-z0-9_.-], not starting with '.',
    at most MAX_LENGTH characters); otherwise the unsafe characters become '_' and a short
    hash of the original keeps two different names from meeting in one file."""
    text = str(name)
    if text and not _UNSAFE.search(text) and not text.startswith(".") and len(text) <= MAX_LENGTH:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:12]
    cleaned = _UNSAFE.sub("_", text)[:MAX_LENGTH - 13].lstrip(".") or "host"
    return "%s-%s" % (cleaned, digest)
