"""GPU sizing: memory in GiB, MIG profiles that fit, and the sharing lines of an inventory."""

import json
import re

from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog
from gpuprov.diagnose.thresholds import MIG_MEMORY_MARGIN


MIB_PER_GIB = 1024


def gib(mib):
    return mib / MIB_PER_GIB


def format_gib(mib):
    value = gib(mib)
    return ("%.0f" % value) if value >= 10 else ("%.1f" % value)


def gpu_model(names):
    """The catalog model for the first of `names` the catalog knows, or None."""
    for name in names:
        if not name:
            continue
        # GFD's product label gets -SHARED under sharing and -MIG-<profile> under MIG single.
        name = re.sub(r"(-SHARED|-MIG-\S+)$", "", str(name))
        try:
            return catalog.lookup(name)
        except catalog.UnknownModelError:
            continue
    return None


def _mig_profiles(model):
    return [p for p in model.mig.profiles.values() if not p.media_extensions] if model and model.mig else []


def mig_option(model, need_mib):
    """The MIG profile that holds `need_mib` (plus MIG_MEMORY_MARGIN) most times per GPU, or None."""
    fitting = [p for p in _mig_profiles(model) if need_mib * MIG_MEMORY_MARGIN <= p.memory_gib * MIB_PER_GIB]
    if not fitting:
        return None
    return max(fitting, key=lambda p: (p.max_count, -p.memory_slices))


def mig_cap_option(model):
    """The largest MIG profile that still gives two or more per GPU: a memory cap per pod."""
    several = [p for p in _mig_profiles(model) if p.max_count >= 2]
    return max(several, key=lambda p: p.memory_gib) if several else None


def _flow(value):
    """A value as a one-line YAML flow collection, for inventory lines in the report."""
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s: %s" % (_flow(k), _flow(v)) for k, v in value.items())
    if isinstance(value, list):
        return "[%s]" % ", ".join(_flow(v) for v in value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", value):
        return json.dumps(value)
    return str(value)


def sharing_line(sharing):
    """The inventory line that asks gpuprov for `sharing` (intent.py's gpuprov_sharing)."""
    return "gpuprov_sharing: %s" % _flow(sharing)


def mig_sharing(profile, per_gpu):
    return {"strategy": "mig", "mig": {"devices": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {profile: per_gpu}}]}}
