"""Output helpers: the streamed JSON is byte for byte the JSON of the plan contract."""
import json
import random

from gpuprov import render


def reference(data, depth=2, level=0):
    """to_json as the JSON contract describes it: the top ``depth`` levels of mappings one
    entry per line, the rest json.dumps with ", " and ": "."""
    if isinstance(data, dict) and data and level < depth:
        pad = "  " * (level + 1)
        items = ",\n".join("%s%s: %s" % (pad, json.dumps(str(k)), reference(v, depth, level + 1))
                           for k, v in data.items())
        return "{\n%s\n%s}" % (items, "  " * level)
    return json.dumps(data, separators=(", ", ": "))


def _value(rng, depth=0):
    kind = rng.random()
    if depth > 3 or kind < 0.4:
        return rng.choice([1, -2.5, 1e-7, None, True, "x", "caf\u00e9\x1b\n", "", 10 ** 20, float("inf")])
    if kind < 0.7:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return dict(("k%d" % i if rng.random() < 0.9 else i, _value(rng, depth + 1)) for i in range(rng.randint(0, 3)))


def test_streamed_json_is_the_json_of_the_contract():
    rng = random.Random(7)
    shared = {"gpus": [{"index": 0, "mig": {"instances": [1, 2]}}], "slots": []}
    for _ in range(300):
        data = {"format": 1, "nodes": dict(("n%d" % i, dict(shared, host="n%d" % i) if rng.random() < 0.5
                                            else _value(rng)) for i in range(rng.randint(0, 4))),
                "summary": _value(rng)}
        assert "".join(render.json_pieces(data)) == reference(data)
        assert render.to_json(data) == reference(data)
