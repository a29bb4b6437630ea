"""`gpuprov trial`: raise sharing on one canary node, step by step, until tail latency breaks the SLO.

One concept per file: `slo` (objectives, windows, histogram names), `steps` (every step
planned before any change, as an inventory source of its own), `converge` (the site
playbook for the node, as `apply -l` runs it), `metrics` (one window read from Prometheus),
`run` (the loop, its verdicts, interrupts and putting the node back), `recommend` (replicas,
vLLM memory, fit's MIG or MPS layout), `report` and `html_report` (the result).
"""
