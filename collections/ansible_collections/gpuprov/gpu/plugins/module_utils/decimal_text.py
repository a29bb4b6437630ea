# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""Numbers written as text, read as their consumers read them: ASCII digits only.

Python is more lenient than the programs gpuprov writes for: ``int()`` and ``float()`` take
any Unicode decimal digit (``int("\\u0663") == 3``), underscores (``int("1_0") == 10``) and
surrounding Unicode spaces, ``float()`` takes ``nan`` and ``inf``, and ``str.isdigit()`` is
true for superscripts (``"\\u00b2"``), which ``int()`` then refuses. The kubelet, the API
server and nvidia-smi read ASCII digits (Go's ``strconv`` and ``resource.Quantity``), so a
number that only Python understands is a number the node would not: every number gpuprov
reads from text goes through here, and every pattern that reads one uses ``re.ASCII``.

Numbers that arrive as YAML/JSON numbers are checked with ``finite_number``: finite, within
stated bounds (a floor as well as a ceiling: 1e-300 GiB of memory is no workload).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

_DIGITS_RE = re.compile(r"[0-9]+\Z", re.ASCII)
_SIGNED_RE = re.compile(r"[+-]?[0-9]{1,19}\Z", re.ASCII)
_DECIMAL_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?\Z", re.ASCII)
# More digits than this is no count anyone writes; refusing it keeps int() of a 10**6-digit
# string (quadratic in CPython) out of reach.
MAX_DIGITS = 30


def is_digits(text):
    """True for a non-empty string of ASCII digits only (what ``str.isdigit`` should mean)."""
    return isinstance(text, str) and _DIGITS_RE.match(text) is not None


def digits_value(text, default=None):
    """``text`` as an int when it is ASCII digits (at most MAX_DIGITS of them), else ``default``."""
    return int(text) if is_digits(text) and len(text) <= MAX_DIGITS else default


def parse_int(text, what="a number"):
    """ASCII decimal digits (no sign, no spaces, no underscores) -> int.

    :raises ValueError: anything else, or more than MAX_DIGITS digits.
    """
    if not is_digits(text) or len(text) > MAX_DIGITS:
        raise ValueError("%s must be written in the digits 0-9, got %r" % (what, text if len(str(text)) <= 40
                                                                           else str(text)[:40] + "..."))
    return int(text)


def signed_int(text):
    """An integer as Go's strconv.ParseInt(text, 10, 64) reads it (optional sign, ASCII digits,
    nothing else). :raises ValueError: anything else."""
    if not isinstance(text, str) or _SIGNED_RE.match(text) is None:
        raise ValueError("%r is not an integer" % (text,))
    value = int(text)
    if not -2 ** 63 <= value < 2 ** 63:
        raise ValueError("%r is out of range for a 64-bit integer" % (text,))
    return value


def ascii_float(text):
    """float(text) for ASCII text without underscores: Python's float, spelled as C's strtod
    and nvidia-smi spell numbers (``nan``, ``inf`` and ``1e999`` stay floats for the caller to
    judge). :raises ValueError: anything else."""
    if not isinstance(text, str) or not text.isascii() or "_" in text:
        raise ValueError("%r is not a number" % (text,))
    return float(text)


def parse_decimal(text, what="a number"):
    """ASCII decimal text (``1``, ``-2.5``, ``.5``, ``1e3``; no nan/inf, no underscores) ->
    float, which is finite.

    :raises ValueError: anything else.
    """
    if not isinstance(text, str) or len(text) > MAX_DIGITS + 8 or _DECIMAL_RE.match(text) is None:
        raise ValueError("%s must be a decimal number written in the digits 0-9, got %r"
                         % (what, text if len(str(text)) <= 40 else str(text)[:40] + "..."))
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("%s must be finite, got %r" % (what, text))
    return value


def finite_number(value, minimum, maximum, what="the value"):
    """``value`` (an int or float from YAML/JSON, not a bool) as a float within
    [minimum, maximum] (both stated by the caller).

    :raises ValueError: not a number, not finite (NaN, infinity), below the floor (which
        also takes care of subnormal numbers such as 5e-324) or above the ceiling.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("%s must be a number, got %r" % (what, value))
    if isinstance(value, int) and value.bit_length() > 100:
        # float() of it would overflow, and str() of a huge int is refused by Python itself.
        raise ValueError("%s must be at most %g, got a number of %d bits" % (what, maximum, value.bit_length()))
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("%s must be a finite number, got %r" % (what, value))
    if number < minimum:
        raise ValueError("%s must be at least %g, got %r" % (what, minimum, value))
    if number > maximum:
        raise ValueError("%s must be at most %g, got %r" % (what, maximum, value))
    return number
