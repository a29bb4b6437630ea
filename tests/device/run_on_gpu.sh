#!/usr/bin/env bash
# One read-only pass on a machine with a real NVIDIA GPU (never run in CI): gpuprov's NVML
# layer and gpu_facts module through the real pynvml, the catalog against NVML's own profile
# tables, and an MPS daemon with a private pipe directory. Nothing here changes MIG mode or
# compute mode, creates instances, or resets a GPU. nvml_real.py also records every NVML read
# path the modules use (profile info, placements with MIG off, instance listing, the MIG
# device slots, processes, compute and persistence mode, compute mode on MIG device handles
# and what the parent handle answers) and which reads NVML refuses a non-root caller, and the
# reads of a MIG mode change's reset: the pending state of every GPU, NVLink peers, the NVLink
# fabric state (Hopper+), Fabric Manager, each GPU's PCI reset function and the group one
# nvidia-smi -r would have to name; on an A30 the driver's profile counts next to NVIDIA's.
# mps_real.py runs its daemon with a private pipe directory, also the way the gpu_mps unit
# starts it (its limits step). Each step has a timeout; the pass stays under five minutes.
#
#   OUT=/tmp/out [ANSIBLE_BIN=path/to/ansible] tests/device/run_on_gpu.sh
# (PYTHONPATH may point at a folder holding nvidia-ml-py and ansible-core where they are not installed)
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpuprov-device}
mkdir -p "$OUT"
PY=$(command -v python3)
{
    echo "## python"; "$PY" --version
    echo "## nvidia-smi before"; nvidia-smi -L
    nvidia-smi --query-gpu=index,name,pci.device_id,mig.mode.current,compute_mode,memory.total --format=csv
    echo "## mps control"; command -v nvidia-cuda-mps-control || echo "not on PATH"
    echo "## services"; for unit in nvidia-persistenced nvidia-fabricmanager nvidia-dcgm dcgm nvsm; do
        printf '%s: ' "$unit"; systemctl is-active "$unit.service" 2>&1 || true; done
    echo "## topology (read-only)"; timeout 30 nvidia-smi topo -m || true
    echo "## nvlink status (read-only)"; timeout 30 nvidia-smi nvlink -s || true
} > "$OUT/env.txt" 2>&1

timeout 120 "$PY" tests/device/nvml_real.py > "$OUT/nvml_real.json" 2> "$OUT/nvml_real.err"
echo "nvml_real rc=$?" >> "$OUT/env.txt"

# The gpu_facts module itself, run by Ansible on localhost with the real pynvml.
ANSIBLE_CONFIG=$PWD/ansible.cfg ANSIBLE_LOAD_CALLBACK_PLUGINS=1 ANSIBLE_STDOUT_CALLBACK=ansible.builtin.json \
    timeout 180 "$PY" "${ANSIBLE_BIN:-$(command -v ansible)}" \
    localhost -i localhost, -c local -m gpuprov.gpu.gpu_facts -e "ansible_python_interpreter=$PY" \
    > "$OUT/gpu_facts_module.json" 2> "$OUT/gpu_facts_module.err"
echo "gpu_facts module rc=$?" >> "$OUT/env.txt"

timeout 180 "$PY" tests/device/mps_real.py > "$OUT/mps_real.json" 2> "$OUT/mps_real.err"
echo "mps_real rc=$?" >> "$OUT/env.txt"

{
    echo "## nvidia-smi after (MIG and compute mode must be unchanged)"
    nvidia-smi --query-gpu=index,mig.mode.current,compute_mode --format=csv
} >> "$OUT/env.txt" 2>&1
# The pass must leave the GPUs as it found them: compare before and after.
before=$(sed -n '/^## nvidia-smi before/,/^## mps/p' "$OUT/env.txt" | grep -E '^[0-9]+,' | cut -d, -f1,4,5 | tr -d ' ')
after=$(sed -n '/^## nvidia-smi after/,$p' "$OUT/env.txt" | grep -E '^[0-9]+,' | tr -d ' ')
if [ "$before" != "$after" ]; then
    echo "CHANGED: MIG or compute mode differs after the read-only pass" >> "$OUT/env.txt"
    exit 1
fi
echo "unchanged: MIG and compute mode as before" >> "$OUT/env.txt"
