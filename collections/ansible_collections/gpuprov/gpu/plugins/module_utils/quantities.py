# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

"""One parser per kind of quantity, shared by the CLI (controller) and the node modules.

The same text means different amounts in different sources, so every function is named for
the format it reads, and each format follows its own primary source:

=========  ============================  ===================  ==========================
text       ``k8s_quantity`` (bytes)      ``workload_memory``   ``mps_pinned_memory_mib``
=========  ============================  ===================  ==========================
``10G``    10 x 10^9                     9536.74 MiB          10240 MiB
``10Gi``   10 x 2^30                     10240 MiB            10240 MiB
``10GiB``  rejected                      10240 MiB            10240 MiB
``10240M`` 10240 x 10^6                  9765.625 MiB         10240 MiB
``10``     10                            10240 MiB (GiB)      10 MiB
=========  ============================  ===================  ==========================

- ``k8s_quantity``: Kubernetes ``resource.Quantity`` (apimachinery
  ``pkg/api/resource/quantity.go``): case-sensitive suffixes, binary ``Ki Mi Gi Ti Pi Ei``,
  decimal ``n u m "" k M G T P E``, or a decimal exponent (``1e3``). ``m`` is milli, not mega;
  ``GiB``/``GB`` are not quantities.
- ``workload_memory_mib``: the ``memory`` of a ``gpuprov fit`` workload. Suffixes as in
  Kubernetes (``G`` decimal, ``Gi`` binary), with an optional ``B`` and in any case, because
  people write ``10GB``; a bare number is GiB, the unit nvidia-smi and the GPU catalog use.
- ``mps_pinned_memory_mib``: an MPS pinned device memory limit. NVIDIA's MPS documentation
  (``set_default_device_pinned_mem_limit <dev> <value>``) takes an integer followed by ``G``
  or ``M``. The k8s-device-plugin writes ``<bytes / 2^20>M`` (``mps/daemon.go``), so ``M`` is
  MiB; ``G`` is read as 1024 ``M``. UNVERIFIED: the MPS documentation says "Gigabyte" without
  saying whether it is 10^9 or 2^30 bytes. ``Gi``/``GiB``/``GB`` are accepted as ``G``; a bare
  number is MiB (the unit of the module option and of unsuffixed daemon replies).
- ``nvidia_smi_mib``: memory as ``nvidia-smi --query-gpu=memory.used,memory.total`` prints it,
  always MiB (``40960 MiB``, or ``40960`` with ``--format=csv,nounits``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re
from fractions import Fraction

MIB_PER_GIB = 1024
# Go's strings.TrimSpace trims Unicode spaces too, but no parser gpuprov writes for reads a
# number with them around it; only ASCII whitespace (a file's trailing newline) is dropped.
_ASCII_SPACE = " \t\n\r\v\f"
# A workload's GPU memory: at least 1 MiB (less is no workload: 1e-300 GiB is a typo or a
# probe, and below the smallest unit anything is allocated in), at most 1 PiB (no GPU is
# near it; the bound keeps float arithmetic finite).
WORKLOAD_MIN_MIB = 1.0
WORKLOAD_MAX_MIB = float(1024 ** 3)

_K8S_QUANTITY_RE = re.compile(
    r"^(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?\Z", re.ASCII)
# Bounds, so hostile text is refused before any arithmetic: resource.Quantity documents that
# "no quantity may represent a number greater than 2^63-1 in magnitude, nor may it have more
# than 3 decimal places" (apimachinery pkg/api/resource/quantity.go, type comment), so no
# valid quantity needs more digits than these or an exponent beyond +-30.
_K8S_MAX_DIGITS = 40
_K8S_MAX_EXPONENT = 30
_K8S_MAX_VALUE = 2 ** 63 - 1
_K8S_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_K8S_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12,
                         "P": 15, "E": 18}

_WORKLOAD_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:([kmgt]i?)b?)?\s*\Z", re.IGNORECASE | re.ASCII)
_WORKLOAD_UNIT_MIB = {
    "": float(MIB_PER_GIB),
    "ki": 1.0 / 1024, "k": 1e3 / 2 ** 20,
    "mi": 1.0, "m": 1e6 / 2 ** 20,
    "gi": 1024.0, "g": 1e9 / 2 ** 20,
    "ti": 1024.0 * 1024, "t": 1e12 / 2 ** 20,
}

# Bounded digits: a 10,000-digit size is refused by the pattern, not by arithmetic.
_MPS_MEMORY_RE = re.compile(r"^\s*(\d{1,12}(?:\.\d{1,6})?)\s*(?:([MG])(?:iB|i|B)?)?\s*\Z", re.IGNORECASE | re.ASCII)

_NVIDIA_SMI_MIB_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)(?:\s*MiB)?\s*\Z", re.ASCII)


def k8s_quantity(value):
    """Parse a Kubernetes resource quantity (``"100Mi"``, ``"1.5"``, ``"500m"``, ``"1e3"``).

    :returns: the amount in base units as an exact ``Fraction`` (bytes for memory, cores for
        CPU, a count for extended resources).
    :raises ValueError: for anything the API server would not accept.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError("%r is not a quantity" % (value,))
    text = str(value).strip(_ASCII_SPACE) if isinstance(value, str) else str(value)
    if len(text) > _K8S_MAX_DIGITS + 8:
        raise ValueError("%r... is not a Kubernetes quantity (too long)" % (text[:40],))
    match = _K8S_QUANTITY_RE.match(text)
    if not match:
        raise ValueError("%r is not a Kubernetes quantity (examples: 100Mi, 1Gi, 500m, 2)"
                         % (value,))
    number = Fraction(match.group("number"))
    suffix = match.group("suffix") or ""
    if suffix in _K8S_BINARY_SUFFIXES:
        amount = number * (1024 ** _K8S_BINARY_SUFFIXES[suffix])
    elif suffix in _K8S_DECIMAL_SUFFIXES:
        amount = number * (Fraction(10) ** _K8S_DECIMAL_SUFFIXES[suffix])
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > _K8S_MAX_EXPONENT:
            raise ValueError("%r: exponent out of range for a Kubernetes quantity" % (value,))
        amount = number * (Fraction(10) ** exponent)
    if abs(amount) > _K8S_MAX_VALUE:
        raise ValueError("%r is larger than a Kubernetes quantity can be (2^63-1)" % (value,))
    return amount


def format_k8s_bytes(amount):
    """Format a byte count as a Kubernetes quantity (``Fraction(1073741824)`` -> ``"1Gi"``)."""
    if amount.denominator == 1:
        whole = int(amount)
        for suffix, power in sorted(_K8S_BINARY_SUFFIXES.items(), key=lambda item: -item[1]):
            unit = 1024 ** power
            if whole and whole % unit == 0:
                return "%d%s" % (whole // unit, suffix)
        return str(whole)
    return str(float(amount))


def workload_memory_mib(value):
    """A ``gpuprov fit`` workload's memory -> MiB (float). Bare numbers are GiB.

    :raises ValueError: not a size, not finite, below WORKLOAD_MIN_MIB or above WORKLOAD_MAX_MIB.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError("must be a size such as 10 (GiB), \"10GiB\" or \"10GB\", got %r" % (value,))
    if isinstance(value, int) and value.bit_length() > 64:
        raise ValueError("must be at most %d GiB, got a number of %d bits"
                         % (WORKLOAD_MAX_MIB // MIB_PER_GIB, value.bit_length()))
    if isinstance(value, (int, float)):
        mib = float(value) * MIB_PER_GIB
    else:
        text = str(value)
        match = _WORKLOAD_SIZE_RE.match(text) if len(text) <= 64 else None
        if not match:
            raise ValueError("must be a size such as 10 (GiB), \"10GiB\" or \"10GB\", got %r" % (value,))
        mib = float(match.group(1)) * _WORKLOAD_UNIT_MIB[(match.group(2) or "").lower()]
    if not math.isfinite(mib):
        raise ValueError("must be a finite size, got %r" % (value,))
    if not mib > 0:
        raise ValueError("must be > 0, got %r" % (value,))
    if mib < WORKLOAD_MIN_MIB:
        raise ValueError("must be at least 1 MiB, got %r" % (value,))
    if mib > WORKLOAD_MAX_MIB:
        raise ValueError("must be at most %d GiB, got %r" % (WORKLOAD_MAX_MIB // MIB_PER_GIB, value))
    return mib


def mps_pinned_memory_mib(value):
    """An MPS pinned device memory limit -> whole MiB (int; 0 means no limit).

    Takes an integer (MiB) or text such as ``10G``, ``10GiB``, ``1.5G`` or ``10240M``.

    :raises ValueError: not a size in this format, negative, or not a whole number of MiB.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError("must be a size such as 10G or 10240M, got %r" % (value,))
    if isinstance(value, int):
        mib = Fraction(value)
    else:
        match = _MPS_MEMORY_RE.match(str(value))
        if not match:
            raise ValueError("must be a size such as 10G or 10240M, got %r" % (value,))
        mib = Fraction(match.group(1))
        if (match.group(2) or "").upper() == "G":
            mib *= MIB_PER_GIB
    if mib < 0:
        raise ValueError("must not be negative, got %r" % (value,))
    if mib.denominator != 1:
        raise ValueError("must be a whole number of MiB (the daemon takes <N>M), got %r" % (value,))
    return int(mib)


def format_mps_memory_limit(mib):
    """MiB -> the ``<N>M`` form that ``set_default_device_pinned_mem_limit`` takes."""
    return "%dM" % mib


def nvidia_smi_mib(text):
    """Memory as nvidia-smi prints it (``40960 MiB`` or, with ``nounits``, ``40960``) -> MiB.

    :returns: a float, as nvidia-smi's CSV is read elsewhere.
    :raises ValueError: anything else, including the ``[N/A]`` forms (callers decide what those
        mean).
    """
    match = _NVIDIA_SMI_MIB_RE.match(str(text))
    if not match:
        raise ValueError("%r is not a memory size in MiB as nvidia-smi prints it" % (text,))
    return float(match.group(1))
