# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Text from input (host names, values, file names) made safe to print on a terminal."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_CONTROL_RE = re.compile(u"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape(text):
    """``text`` with control characters (newline, ESC, ...) written as escapes, so a host name
    or value printed in an error or a table can never start a line or drive the terminal."""
    text = text if isinstance(text, str) else str(text)
    return _CONTROL_RE.sub(lambda m: "\\x%02x" % ord(m.group(0)) if ord(m.group(0)) < 0x100
                           else "\\u%04x" % ord(m.group(0)), text)
