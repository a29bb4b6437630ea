"""The exhaustive lower bound bench/mig_transitions.py holds gpuprov's MIG planner to."""
import importlib.util
import os

from ansible_collections.gpuprov.gpu.plugins.module_utils.mig_solver import Instance
from ansible_collections.gpuprov.gpu.plugins.plugin_utils import catalog
from testlib import REPO


def _bench():
    spec = importlib.util.spec_from_file_location("mig_transitions_bench", os.path.join(REPO, "bench", "mig_transitions.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_proven_minimum_by_hand():
    bench = _bench()
    profiles = catalog.get("H100-80GB").solver_profiles()
    seven_1g = [Instance("1g.10gb", s, 1) for s in range(7)]
    assert bench.proven_minimum_destroyed(seven_1g, {"7g.80gb": 1}, profiles, 7) == 7
    # 3g@0 + 3g@4 -> 4g + 3g: the 4g only starts at 0, so keeping the 3g@4 destroys one.
    two_3g = [Instance("3g.40gb", 0, 4), Instance("3g.40gb", 4, 4)]
    assert bench.proven_minimum_destroyed(two_3g, {"4g.40gb": 1, "3g.40gb": 1}, profiles, 7) == 1
    # 2g@0 2g@2 2g@4 1g@6 -> 3g + 2g + 2x1g: a 3g at 0 leaves room for one 1g only (slice 6),
    # so the 3g must go to 4-7, over 2g@4 and 1g@6; of 2g@0 and 2g@2 one stays. 3 destroyed.
    three_2g = [Instance("2g.20gb", 0, 2), Instance("2g.20gb", 2, 2), Instance("2g.20gb", 4, 2),
                Instance("1g.10gb", 6, 1)]
    wanted = {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}
    assert bench.proven_minimum_destroyed(three_2g, wanted, profiles, 7) == 3
