"""Sizing rules and SM activity thresholds, named so the report and the docs can quote them."""


# Sizing rules. Kept as named constants so the report and the docs can quote them.
# Share of a GPU's memory that the copies may fill; the rest is left for CUDA contexts,
# fragmentation and growth between samples.
MEMORY_USABLE_FRACTION = 0.9
# A MIG instance must hold the current per-pod memory use plus this margin.
MIG_MEMORY_MARGIN = 1.1
# Time-slicing replicas are also limited so that the copies' summed mean SM utilisation
# stays under this.
SM_TARGET_PERCENT = 80
# Never suggest more time-slicing replicas than this by default (--max-replicas).
DEFAULT_MAX_REPLICAS = 8

# SM activity patterns (nvidia-smi utilization.gpu: percent of the sample period in which
# at least one kernel ran; a coarse stand-in for DCGM's SM activity).
SM_IDLE_PERCENT = 5          # at or below: no kernel ran
SM_HIGH_PERCENT = 60         # at or above: a burst of work
SM_LOW_PERCENT = 30          # p95 below this while memory is in use: starved
SM_BUSY_MEAN_PERCENT = 60    # mean at or above this: the GPU is doing real work
CYCLE_MIN_SHARE = 0.2        # share of samples both idle and high to call it cycling
MEMORY_IN_USE_FRACTION = 0.05  # memory used above this share of total: someone holds it

# Memory-bandwidth bound (DCGM profiling, dcgm-exporter through Prometheus): the device-memory
# interface busy at least this share of cycles (DCGM_FI_PROF_DRAM_ACTIVE) while SMs have work
# less than SM_UNDER_DRAM_PERCENT of cycles (DCGM_FI_PROF_SM_ACTIVE). The 0.5/0.5 split is the
# PromQL heuristic (UNVERIFIED: NVIDIA's DCGM profiling-metrics docs give no fixed line).
DRAM_BOUND_PERCENT = 50
SM_UNDER_DRAM_PERCENT = 50
