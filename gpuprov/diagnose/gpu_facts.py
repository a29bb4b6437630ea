"""Per-node GPU facts (gpu_facts module output) read into the snapshot model."""

import math

from ansible_collections.gpuprov.gpu.plugins.plugin_utils.intent import MAX_GPUS_PER_NODE, short
from gpuprov.diagnose.snapshot import GpuFact, SnapshotError


def _number(value, where, problems, minimum=0):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        problems.append("%s: expected a finite number, got %s" % (where, short(value)))
        return None
    if value < minimum:
        problems.append("%s: %r is below %s" % (where, value, minimum))
        return None
    return value


def _mig_state(value):
    """(capable, enabled) from gpu_facts' mig_mode_current; capable is None when unknown."""
    if value is None:
        return None, False
    if isinstance(value, bool):
        return True, value
    if isinstance(value, int):
        return True, value == 1
    text = str(value).strip().lower()
    if text in ("enabled", "enable", "1", "true"):
        return True, True
    if text in ("disabled", "disable", "0", "false"):
        return True, False
    if text in ("n/a", "[n/a]", "not supported", "[not supported]", "not_supported", "unsupported"):
        return False, False
    return None, False


def unwrap_gpu_facts(doc, source):
    """The gpu_facts object from the bare form or a module result; SnapshotError otherwise."""
    if not isinstance(doc, dict):
        raise SnapshotError("%s: expected a JSON object with gpus, got %s" % (source, type(doc).__name__))
    if doc.get("unreachable") or doc.get("failed"):
        raise SnapshotError("%s: the gpu_facts run failed on this node: %s"
                            % (source, doc.get("msg") or "no message"))
    if isinstance(doc.get("ansible_facts"), dict):
        doc = doc["ansible_facts"]
    if "gpu_facts" in doc:
        doc = doc["gpu_facts"]
        if not isinstance(doc, dict):
            raise SnapshotError("%s: gpu_facts: expected an object with gpus" % source)
    if "gpus" not in doc:
        raise SnapshotError("%s: gpus: missing; expected gpu_facts output ({\"gpus\": [...]}) or the module "
                            "result ({\"ansible_facts\": {\"gpu_facts\": {...}}})" % source)
    return doc


def parse_gpu_facts(doc, source, notes=None):
    """[GpuFact] from a facts file. GPUs gpu_facts could not read (their `error` is set),
    and a node whose driver was unavailable, are left out with a line in `notes`."""
    notes = [] if notes is None else notes
    facts = unwrap_gpu_facts(doc, source)
    if facts.get("driver_available") is False:
        notes.append("%s: the node's driver was not available when the facts were gathered (%s); its GPU "
                     "figures are unknown" % (source, facts.get("driver_error") or "no reason given"))
        return []
    gpus = facts["gpus"]
    if not isinstance(gpus, list):
        raise SnapshotError("%s: gpus: expected a list, got %s" % (source, type(gpus).__name__))
    result, problems = [], []
    for position, gpu in enumerate(gpus):
        where = "%s: gpus[%d]" % (source, position)
        if not isinstance(gpu, dict):
            problems.append("%s: expected an object" % where)
            continue
        if gpu.get("error"):
            notes.append("%s: gpu_facts could not read this GPU (%s); left out" % (where, gpu["error"]))
            continue
        before = len(problems)
        index = gpu.get("index", position)
        if isinstance(index, bool) or not isinstance(index, int):
            problems.append("%s.index: expected an integer, got %s" % (where, short(index)))
        elif not 0 <= index < MAX_GPUS_PER_NODE:
            problems.append("%s.index: %d is not a GPU index (0-%d)" % (where, index, MAX_GPUS_PER_NODE - 1))
        total = _number(gpu.get("memory_total_mib"), where + ".memory_total_mib", problems, minimum=1)
        used = _number(gpu.get("memory_used_mib"), where + ".memory_used_mib", problems)
        processes = gpu.get("processes") or []
        if not isinstance(processes, list):
            problems.append("%s.processes: expected a list" % where)
        if len(problems) > before:
            continue
        capable, enabled = _mig_state(gpu.get("mig_mode_current"))
        if isinstance(gpu.get("mig_capable"), bool):
            capable = gpu["mig_capable"]
        result.append(GpuFact(index=index, name=str(gpu.get("name") or ""), uuid=str(gpu.get("uuid") or ""),
                              memory_total_mib=float(total), memory_used_mib=float(used),
                              process_count=len(processes), mig_capable=capable, mig_enabled=enabled))
    if problems:
        raise SnapshotError(problems)
    return result
