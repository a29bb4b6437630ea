# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Kubernetes quantities and Go durations as the kubelet reads them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from fractions import Fraction


_DURATION_RE = re.compile(r"^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+$|^0$")
_QUANTITY_RE = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$")
_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
                     "P": 15, "E": 18}


def parse_quantity(value):
    """Parse a Kubernetes resource quantity (``"100Mi"``, ``"1.5"``, ``"500m"``, ``"1e3"``).

    :returns: the amount in base units as an exact ``Fraction`` (bytes for memory, cores for
        CPU).
    :raises ValueError: for anything the API server would not accept.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError("%r is not a quantity" % (value,))
    text = str(value).strip()
    match = _QUANTITY_RE.match(text)
    if not match:
        raise ValueError("%r is not a Kubernetes quantity (examples: 100Mi, 1Gi, 500m, 2)"
                         % (value,))
    number = Fraction(match.group("number"))
    suffix = match.group("suffix") or ""
    if suffix in _BINARY_SUFFIXES:
        return number * (1024 ** _BINARY_SUFFIXES[suffix])
    if suffix in _DECIMAL_SUFFIXES:
        return number * (Fraction(10) ** _DECIMAL_SUFFIXES[suffix])
    return number * (Fraction(10) ** int(suffix[1:]))


def format_bytes(amount):
    """Format a byte count for an error message (``Fraction(1073741824)`` -> ``"1Gi"``)."""
    if amount.denominator == 1:
        whole = int(amount)
        for suffix, power in sorted(_BINARY_SUFFIXES.items(), key=lambda item: -item[1]):
            unit = 1024 ** power
            if whole and whole % unit == 0:
                return "%d%s" % (whole // unit, suffix)
        return str(whole)
    return str(float(amount))


def is_duration(value):
    """True for a Go duration string such as ``10s``, ``1m30s`` or ``0``."""
    return isinstance(value, str) and bool(_DURATION_RE.match(value))
