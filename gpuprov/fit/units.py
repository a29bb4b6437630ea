"""Units of the fit input: compute (fractions or MIG slices), and GiB as the report prints it."""

import math
import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import parse_decimal


# Compute slices of the 7-slice MIG geometry; "3g" on a GPU without MIG means 3/7 of it.
NON_MIG_COMPUTE_SLICES = 7

EPS = 1e-9
# The smallest share of a GPU a workload may ask for: 1 % (HAMi and the report count compute in
# whole percent; 1e-300 of a GPU is no request).
MIN_FRACTION = 0.01
MIB_PER_GIB = 1024.0
_SLICES_RE = re.compile(r"^\s*(\d+)\s*g\s*\Z", re.IGNORECASE | re.ASCII)
_PERCENT_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*%\s*\Z", re.ASCII)


def gib_text(mib):
    """MiB -> '9.62', '46', '0.5' (GiB, at most two decimals)."""
    text = "%.2f" % (mib / MIB_PER_GIB)
    return text.rstrip("0").rstrip(".") if "." in text else text


def parse_compute(value):
    """compute -> None, ("fraction", x) with 0 < x <= 1, or ("slices", n).

    A float (0.5, 1.0) or a percentage ("50%") is a fraction of a GPU; an integer from 2 or
    "3g" is a number of MIG compute slices. A bare 1 could mean either, so it is refused.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("must be a fraction of a GPU (0.5, \"50%%\") or compute slices (\"3g\"), got %r" % (value,))
    if isinstance(value, int):
        if value == 1:
            raise ValueError("1 is ambiguous: write 1.0 for a whole GPU or \"1g\" for one MIG compute slice")
        if not 2 <= value <= NON_MIG_COMPUTE_SLICES:
            raise ValueError("compute slices must be from 1 to %d (\"1g\"..\"7g\"), got %r"
                             % (NON_MIG_COMPUTE_SLICES, value))
        return ("slices", value)
    if isinstance(value, float):
        fraction = value
    else:
        text = str(value)
        slices = _SLICES_RE.match(text)
        if slices:
            count = int(slices.group(1))
            if not 1 <= count <= NON_MIG_COMPUTE_SLICES:
                raise ValueError("compute slices must be from 1 to %d (\"1g\"..\"7g\"), got %r"
                                 % (NON_MIG_COMPUTE_SLICES, value))
            return ("slices", count)
        percent = _PERCENT_RE.match(text)
        try:
            fraction = parse_decimal(percent.group(1)) / 100.0 if percent else parse_decimal(text.strip())
        except ValueError:
            raise ValueError("must be a fraction of a GPU (0.5, \"50%%\") or compute slices (\"3g\"), got %r"
                             % (value,)) from None
    if not math.isfinite(fraction) or not MIN_FRACTION <= fraction <= 1:
        raise ValueError("a fraction of a GPU must be from %g (1 %%) to 1, got %r "
                         "(for MIG compute slices write \"3g\")" % (MIN_FRACTION, value))
    return ("fraction", fraction)


def compute_text(compute):
    if compute is None:
        return "-"
    kind, amount = compute
    return "%dg" % amount if kind == "slices" else "%g" % amount
