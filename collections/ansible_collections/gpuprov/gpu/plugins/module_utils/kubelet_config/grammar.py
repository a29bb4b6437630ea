# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""The kubelet's value syntaxes, read the way its Go code reads them (kubernetes v1.37.2).

Each reader raises ``ValueError`` with a short reason for text the kubelet refuses, and is at
most as lenient as the kubelet: ASCII digits only (Go's ``strconv`` and ``time`` packages
accept no other digits; Python's ``int()`` and ``\\d`` do), no surrounding whitespace.

- ``go_duration``: ``time.ParseDuration`` (``metav1.Duration`` fields such as
  ``cpuManagerReconcilePeriod``).
- ``go_bool``: ``strconv.ParseBool`` (policy options such as ``full-pcpus-only``).
- ``go_int``: ``strconv.Atoi`` (``max-allowable-numa-nodes``).
- ``kubelet_cpuset``: ``k8s.io/utils/cpuset.Parse`` (``reservedSystemCPUs``).
- ``kubelet_quantity``: ``resource.ParseQuantity`` (``kubeReserved``, ``reservedMemory``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import k8s_quantity

# time.ParseDuration's units (Go src/time/format.go, unitMap), in nanoseconds.
_DURATION_UNITS = {
    "ns": 1, "us": 10 ** 3, u"\u00b5s": 10 ** 3, u"\u03bcs": 10 ** 3, "ms": 10 ** 6,
    "s": 10 ** 9, "m": 60 * 10 ** 9, "h": 3600 * 10 ** 9,
}
_MAX_INT64 = 2 ** 63 - 1
_DIGITS = "0123456789"
# strconv.ParseBool (Go src/strconv/atob.go).
GO_BOOL_VALUES = {
    "1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
    "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False,
}
_GO_INT_RE = re.compile(r"[+-]?[0-9]+\Z", re.ASCII)
# A cpuset longer than this is no machine's (cpuset.MAX_CPUSET_LENGTH keeps the same bound).
_MAX_CPUSET_TEXT = 65536


def _quote(text):
    """Text for an error message: quoted, escaped, at most 40 characters of it."""
    return ascii(text[:40]) + ("..." if len(text) > 40 else "")


def _text(value, what):
    if not isinstance(value, str):
        raise ValueError("%s must be a string" % what)
    return value


def go_duration(value):
    """Nanoseconds of a Go duration such as ``10s``, ``1m30s``, ``1.5h`` or ``0``.

    Follows ``time.ParseDuration``: an optional sign, then one or more decimal numbers each
    with a unit (``ns us µs μs ms s m h``); ``0`` alone needs no unit; the total must fit in
    an int64 of nanoseconds.
    """
    text = _text(value, "a duration")
    original = text
    negative = False
    if text[:1] in ("-", "+"):
        negative = text[0] == "-"
        text = text[1:]
    if text == "0":
        return 0
    if text == "":
        raise ValueError("invalid duration %s" % _quote(original))
    total = 0
    while text:
        if not (text[0] in _DIGITS or text[0] == "."):
            raise ValueError("invalid duration %s" % _quote(original))
        whole_end = 0
        while whole_end < len(text) and text[whole_end] in _DIGITS:
            whole_end += 1
        whole = text[:whole_end]
        text = text[whole_end:]
        fraction = ""
        if text[:1] == ".":
            text = text[1:]
            fraction_end = 0
            while fraction_end < len(text) and text[fraction_end] in _DIGITS:
                fraction_end += 1
            fraction = text[:fraction_end]
            text = text[fraction_end:]
        if not whole and not fraction:
            raise ValueError("invalid duration %s" % _quote(original))
        unit_end = 0
        while unit_end < len(text) and text[unit_end] != "." and text[unit_end] not in _DIGITS:
            unit_end += 1
        unit = text[:unit_end]
        text = text[unit_end:]
        if not unit:
            raise ValueError("missing unit in duration %s" % _quote(original))
        if unit not in _DURATION_UNITS:
            raise ValueError("unknown unit %s in duration %s" % (_quote(unit), _quote(original)))
        scale = _DURATION_UNITS[unit]
        amount = int(whole or "0") * scale
        if fraction:
            # Go truncates the fraction to whole nanoseconds.
            amount += int(fraction) * scale // 10 ** len(fraction)
        total += amount
        if total > _MAX_INT64 + (1 if negative else 0):
            raise ValueError("invalid duration %s (out of range)" % _quote(original))
    return -total if negative else total


def go_bool(value):
    """A boolean as ``strconv.ParseBool`` reads it (``true``, ``1``, ``F`` ...)."""
    text = _text(value, "a boolean")
    if text not in GO_BOOL_VALUES:
        raise ValueError("%s is not a boolean (use \"true\" or \"false\")" % _quote(text))
    return GO_BOOL_VALUES[text]


def go_int(value):
    """An integer as ``strconv.Atoi`` reads it: optional sign, ASCII digits, int64."""
    text = _text(value, "an integer")
    if not _GO_INT_RE.match(text) or len(text) > 20:
        raise ValueError("%s is not an integer" % _quote(text))
    number = int(text)
    if not -_MAX_INT64 - 1 <= number <= _MAX_INT64:
        raise ValueError("%s is out of range for an integer" % _quote(text))
    return number


def kubelet_cpuset(value, max_cpu=None, repeats=True):
    """The CPUs of a cpuset as ``cpuset.Parse`` reads it: ``0-3,8``; ``""`` is empty.

    Stricter than the kubelet in ways that only refuse text nobody means: a ``+`` sign before
    a CPU number (``Atoi`` takes it), a CPU above ``max_cpu``, and with ``repeats=False`` a CPU
    listed twice (the kubelet takes the union).

    :returns: sorted list of CPU numbers (a CPU listed twice counts once, as in the kubelet).
    """
    text = _text(value, "a cpuset")
    if text == "":
        return []
    if len(text) > _MAX_CPUSET_TEXT:
        raise ValueError("a cpuset of %d characters is not a machine's" % len(text))
    cpus = set()
    for element in text.split(","):
        bounds = element.split("-", 1)
        numbers = []
        for bound in bounds:
            if not bound or any(c not in _DIGITS for c in bound) or len(bound) > 9:
                raise ValueError("%s is not a CPU number or a range like 0-3" % _quote(element))
            number = int(bound)
            if max_cpu is not None and number > max_cpu:
                raise ValueError("CPU %d is above the largest CPU id Linux has (%d)"
                                 % (number, max_cpu))
            numbers.append(number)
        if len(numbers) == 2 and numbers[0] > numbers[1]:
            raise ValueError("invalid range %s (%d > %d)"
                             % (_quote(element), numbers[0], numbers[1]))
        members = range(numbers[0], numbers[-1] + 1)
        if not repeats:
            twice = sorted(cpus.intersection(members))
            if twice:
                raise ValueError("CPU %d is listed more than once" % twice[0])
        cpus.update(members)
    return sorted(cpus)


def kubelet_quantity(value):
    """A Kubernetes quantity as ``resource.ParseQuantity`` reads it, as an exact ``Fraction``.

    Integers (as YAML gives them) are taken as their decimal text. Text must be ASCII, with no
    whitespace around it.
    """
    if isinstance(value, bool):
        raise ValueError("%s is not a Kubernetes quantity" % ascii(value))
    if isinstance(value, int):
        value = str(value)
    text = _text(value, "a Kubernetes quantity")
    if text != text.strip() or any(ord(c) > 127 for c in text):
        raise ValueError("%s is not a Kubernetes quantity (ASCII digits and a suffix such as "
                         "Mi, no spaces)" % ascii(text[:40]))
    return k8s_quantity(text)
