"""Units of the fit input: workload memory and compute, and GiB as the report prints it."""

import math
import re


# Compute slices of the 7-slice MIG geometry; "3g" on a GPU without MIG means 3/7 of it.
NON_MIG_COMPUTE_SLICES = 7

EPS = 1e-9
MIB_PER_GIB = 1024.0
_UNIT_MIB = {
    "": MIB_PER_GIB,
    "ki": 1.0 / 1024, "k": 1e3 / 2 ** 20,
    "mi": 1.0, "m": 1e6 / 2 ** 20,
    "gi": 1024.0, "g": 1e9 / 2 ** 20,
    "ti": 1024.0 * 1024, "t": 1e12 / 2 ** 20,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt]i?)b?)?\s*$", re.IGNORECASE)
_SLICES_RE = re.compile(r"^\s*(\d+)\s*g\s*$", re.IGNORECASE)
_PERCENT_RE = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*%\s*$")


def gib_text(mib):
    """MiB -> '9.62', '46', '0.5' (GiB, at most two decimals)."""
    text = "%.2f" % (mib / MIB_PER_GIB)
    return text.rstrip("0").rstrip(".") if "." in text else text


def parse_memory_mib(value):
    """A workload's memory -> MiB (float). Bare numbers are GiB; see the module docstring."""
    if isinstance(value, bool) or value is None:
        raise ValueError("must be a size such as 10 (GiB), \"10GiB\" or \"10GB\", got %r" % (value,))
    if isinstance(value, (int, float)):
        mib = float(value) * MIB_PER_GIB
    else:
        match = _SIZE_RE.match(str(value))
        if not match:
            raise ValueError("must be a size such as 10 (GiB), \"10GiB\" or \"10GB\", got %r" % (value,))
        mib = float(match.group(1)) * _UNIT_MIB[(match.group(2) or "").lower()]
    if not mib > 0 or math.isinf(mib):
        raise ValueError("must be > 0, got %r" % (value,))
    return mib


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
            fraction = float(percent.group(1)) / 100.0 if percent else float(text)
        except ValueError:
            raise ValueError("must be a fraction of a GPU (0.5, \"50%%\") or compute slices (\"3g\"), got %r"
                             % (value,)) from None
    if not 0 < fraction <= 1:
        raise ValueError("a fraction of a GPU must be above 0 and at most 1, got %r "
                         "(for MIG compute slices write \"3g\")" % (value,))
    return ("fraction", fraction)


def compute_text(compute):
    if compute is None:
        return "-"
    kind, amount = compute
    return "%dg" % amount if kind == "slices" else "%g" % amount
