"""The exhaustive lower bound bench/mig_transitions.py holds gpuprov's MIG planner to.

The bench runs in its own process, as it is meant to (it puts the fake pynvml first on
sys.path and imports the collection from the repository).
"""
import json
import subprocess
import sys

from testlib import REPO

SCRIPT = """
import json, sys
sys.path.insert(0, "bench")
import mig_transitions as bench
from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import Instance
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog
profiles = catalog.get("H100-80GB").solver_profiles()
cases = json.loads(sys.argv[1])
print(json.dumps([bench.proven_minimum_destroyed([Instance(*i) for i in start], wanted, profiles, 7)
                  for start, wanted in cases]))
"""


def minima(cases):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(cases)], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=True)
    return json.loads(proc.stdout)


def test_proven_minimum_by_hand():
    seven_1g = [["1g.10gb", s, 1] for s in range(7)]
    # 3g@0 + 3g@4 -> 4g + 3g: the 4g only starts at 0, so keeping the 3g@4 destroys one.
    two_3g = [["3g.40gb", 0, 4], ["3g.40gb", 4, 4]]
    # 2g@0 2g@2 2g@4 1g@6 -> 3g + 2g + 2x1g: a 3g at 0 leaves room for one 1g only (slice 6),
    # so the 3g must go to 4-7, over 2g@4 and 1g@6; of 2g@0 and 2g@2 one stays. 3 destroyed.
    three_2g = [["2g.20gb", 0, 2], ["2g.20gb", 2, 2], ["2g.20gb", 4, 2], ["1g.10gb", 6, 1]]
    assert minima([
        [seven_1g, {"7g.80gb": 1}],
        [two_3g, {"4g.40gb": 1, "3g.40gb": 1}],
        [three_2g, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}],
        [seven_1g, {"1g.10gb": 7}],
    ]) == [7, 1, 3, 0]
