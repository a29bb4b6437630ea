"""nvidia-smi utilisation samples: the CSV format, and SM activity summaries."""

import csv
import io
import math
import re

from ansible_collections.gpuprov.gpu.plugins.module_utils.decimal_text import ascii_float, digits_value, parse_int
from ansible_collections.gpuprov.gpu.plugins.module_utils.quantities import nvidia_smi_mib
from gpuprov.diagnose.snapshot import SnapshotError, UtilizationSample
from gpuprov.diagnose.thresholds import (
    CYCLE_MIN_SHARE,
    MEMORY_IN_USE_FRACTION,
    SM_BUSY_MEAN_PERCENT,
    SM_HIGH_PERCENT,
    SM_IDLE_PERCENT,
    SM_LOW_PERCENT,
)


UTILIZATION_FIELDS = ("timestamp", "index", "name", "memory.used", "memory.total", "utilization.gpu")
NVIDIA_SMI_QUERY = ",".join(UTILIZATION_FIELDS)
# nvidia-smi's own timestamp format, e.g. 2026/11/30 10:00:01.123
_TIMESTAMP = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?\Z", re.ASCII)
_NOT_AVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "[Unknown Error]", "[GPU is lost]")


def _csv_number(text, where, problems, integer=False):
    if text in _NOT_AVAILABLE:
        return None
    try:
        value = parse_int(text.strip(" \t")) if integer else ascii_float(text)
    except ValueError:
        problems.append("%s: %r is not a number" % (where, text))
        return None
    return value


def torn_tail(text):
    """(text up to the last full line, the torn piece or None).

    A recorder stopped mid-write (Ctrl-C, a crash, a full disk) leaves a last line without
    its newline; what came before it is sound.
    """
    if not text or text.endswith("\n"):
        return text, None
    cut = text.rfind("\n") + 1
    return text[:cut], text[cut:]


def _csv_mib(text, where, problems):
    """memory.used / memory.total: MiB as nvidia-smi prints them (``nounits`` or not)."""
    if text in _NOT_AVAILABLE:
        return None
    try:
        return nvidia_smi_mib(text)
    except ValueError:
        problems.append("%s: %r is not a number" % (where, text))
        return None
# A sample outside these is not a measurement (nvidia-smi prints percentages 0-100 and
# indices below the node's GPU count; gpuprov plans at most 64 GPUs per node).
MAX_GPU_INDEX = 63


def _sample_problem(index, used, total, util):
    """Why a parsed sample cannot be a measurement, or None."""
    for name, value in (("memory.used", used), ("memory.total", total), ("utilization.gpu", util)):
        if value is not None and (math.isnan(value) or math.isinf(value) or value < 0):
            return "%s %r" % (name, value)
    if util is not None and util > 100:
        return "utilization.gpu %r above 100%%" % util
    if index is not None and not 0 <= index <= MAX_GPU_INDEX:
        return "GPU index %d" % index
    if used is not None and total is not None and used > total:
        return "memory.used above memory.total"
    return None


def parse_utilization_csv(text, source, with_node=False, notes=None):
    """Samples from nvidia-smi's CSV (see NVIDIA_SMI_QUERY); with_node: a node name column first.

    Returns [UtilizationSample], or {node: [UtilizationSample]} when with_node is set.
    A header line (`timestamp, index, ...`) is skipped, so output without `noheader` works.
    With `notes` (a list), a last line without its newline (cut off while being written) is
    left out with a note there; without it, that line is parsed like any other.
    Samples that cannot be measurements (NaN, infinity, negative, above 100%, absurd GPU
    index) are skipped and counted in one line of ``notes``.
    """
    problems = []
    skipped, first_reason = 0, None
    samples = {} if with_node else []
    width = len(UTILIZATION_FIELDS) + (1 if with_node else 0)
    if notes is not None:
        whole, torn = torn_tail(text)
        if torn is not None and torn.strip():
            # Even a torn row with all six fields may hold a cut number ("97" -> "9").
            notes.append("%s: line %d is cut off mid-row (%r, no newline): read up to the line before it"
                         % (source, whole.count("\n") + 1, torn[:60]))
            text = whole
    for line_number, row in enumerate(csv.reader(io.StringIO(text), skipinitialspace=True), start=1):
        if not row or all(not cell.strip() for cell in row):
            continue
        row = [cell.strip() for cell in row]
        where = "%s: line %d" % (source, line_number)
        if row[1 if with_node else 0].lower().startswith("timestamp"):
            continue
        if len(row) != width:
            problems.append("%s: expected %d fields (%s), got %d; record with `nvidia-smi --query-gpu=%s "
                            "--format=csv,noheader,nounits -l 1`"
                            % (where, width, ", ".join((("node",) if with_node else ()) + UTILIZATION_FIELDS),
                               len(row), NVIDIA_SMI_QUERY))
            if len(problems) >= 10:
                break
            continue
        node = row.pop(0) if with_node else None
        timestamp, index, name, used, total, util = row
        if not _TIMESTAMP.match(timestamp):
            problems.append("%s: timestamp: %r is not nvidia-smi's YYYY/MM/DD HH:MM:SS.mmm" % (where, timestamp))
        before = len(problems)
        index_value = _csv_number(index, where + ": index", problems, integer=True)
        used_value = _csv_mib(used, where + ": memory.used", problems)
        total_value = _csv_mib(total, where + ": memory.total", problems)
        util_value = _csv_number(util, where + ": utilization.gpu", problems)
        if index_value is None and len(problems) == before:
            problems.append("%s: index: missing" % where)
        if len(problems) > before or not _TIMESTAMP.match(timestamp):
            if len(problems) >= 10:
                break
            continue
        reason = _sample_problem(index_value, used_value, total_value, util_value)
        if reason is not None:
            skipped += 1
            first_reason = first_reason or "%s (%s)" % (reason, where)
            continue
        sample = UtilizationSample(timestamp=timestamp, index=index_value, name=name,
                                   memory_used_mib=used_value, memory_total_mib=total_value,
                                   utilization_gpu=util_value)
        if with_node:
            samples.setdefault(node, []).append(sample)
        else:
            samples.append(sample)
    if problems:
        raise SnapshotError(problems)
    if skipped and notes is not None:
        notes.append("%s: %d sample(s) skipped: not measurements, e.g. %s" % (source, skipped, first_reason))
    return samples


def percentile(values, fraction):
    """Nearest-rank percentile (no interpolation): a value that was actually observed."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def classify_sm(values, memory_used_fraction):
    """Name the pattern of a GPU's SM utilisation series.

    cycling  bursts of work between idle samples: the GPU waits for its input (CPU-bound).
    low      memory is held but kernels rarely run: waiting on I/O or the network.
    busy     doing real work most of the time.
    idle     nothing runs and little memory is held.
    moderate none of the above.
    """
    if not values:
        return None
    count = len(values)
    idle_share = sum(1 for v in values if v <= SM_IDLE_PERCENT) / count
    high_share = sum(1 for v in values if v >= SM_HIGH_PERCENT) / count
    mean = sum(values) / count
    memory_in_use = memory_used_fraction is not None and memory_used_fraction >= MEMORY_IN_USE_FRACTION
    if idle_share >= CYCLE_MIN_SHARE and high_share >= CYCLE_MIN_SHARE:
        return "cycling"
    if mean >= SM_BUSY_MEAN_PERCENT:
        return "busy"
    if max(values) <= SM_IDLE_PERCENT and not memory_in_use:
        return "idle"
    if percentile(values, 0.95) < SM_LOW_PERCENT and memory_in_use:
        return "low"
    return "moderate"


def summarise_utilization(samples):
    """Per GPU: samples, mean and p95 SM utilisation, mean/p95/max memory used, pattern.

    Returns a list sorted by GPU index (then MIG instance) of dicts with the keys index,
    name, samples, sm_mean, sm_p95, memory_used_mean_mib, memory_used_p95_mib,
    memory_used_max_mib, memory_total_mib, pattern, first, last; samples read from DCGM add
    gpu_instance_id ("" for a whole GPU), profile, uuid, dram_mean (percent) and pods. Values nvidia-smi reported as [N/A] are left
    out of the statistics; a statistic with no values is None.
    """
    by_index = {}
    for sample in samples:
        by_index.setdefault((sample.index, sample.gpu_instance_id), []).append(sample)
    summaries = []
    for key in sorted(by_index, key=lambda k: (k[0], digits_value(k[1], -1))):
        index, instance = key
        series = by_index[key]
        sm = [s.utilization_gpu for s in series if s.utilization_gpu is not None]
        dram = [s.dram_active for s in series if s.dram_active is not None]
        used = [s.memory_used_mib for s in series if s.memory_used_mib is not None]
        totals = [s.memory_total_mib for s in series if s.memory_total_mib]
        total = max(totals) if totals else None
        used_p95 = percentile(used, 0.95)
        summaries.append({
            "index": index,
            "name": series[-1].name,
            "samples": len(series),
            "sm_mean": round(sum(sm) / len(sm), 1) if sm else None,
            "sm_p95": percentile(sm, 0.95),
            "memory_used_mean_mib": round(sum(used) / len(used), 1) if used else None,
            "memory_used_p95_mib": used_p95,
            "memory_used_max_mib": max(used) if used else None,
            "memory_total_mib": total,
            "pattern": classify_sm(sm, (used_p95 / total) if (used_p95 is not None and total) else None),
            "first": min(s.timestamp for s in series),
            "last": max(s.timestamp for s in series),
        })
        if instance or dram or any(s.pods for s in series):
            # DCGM figures (dcgm-exporter via Prometheus): the instance, DRAM activity, pods.
            summaries[-1].update(gpu_instance_id=instance, profile=series[-1].profile, uuid=series[-1].uuid,
                                 dram_mean=round(sum(dram) / len(dram), 1) if dram else None,
                                 pods=sorted({pod for s in series for pod in s.pods}))
    return summaries
