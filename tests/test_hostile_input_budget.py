"""Reading an inventory has one time budget, whatever the number of slow templates, and a
bound on the number of hosts that is checked before a range or a generator expands.

The watchdog below is no timing assertion: it turns a read that would not end into a
failure, at several times the budget the test sets."""
import re
import signal

import pytest
import yaml

from test_hostile_input import T4

FOREVER = "{% for i in range(10**9) %}x{% endfor %}"
WATCHDOG_S = 40


class Hang(Exception):
    pass


@pytest.fixture
def watchdog():
    def expire(signum, frame):
        raise Hang("no answer within %d s" % WATCHDOG_S)

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(WATCHDOG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _hosts(tmp_path, hosts):
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"all": {"hosts": hosts}}))
    return str(path)


def test_slow_templates_on_many_hosts_share_one_budget(gpuprov, tmp_path, watchdog):
    # Twelve hosts whose model never renders: 12 x 5 s with a limit per template.
    hosts = dict(("n%02d" % i, dict(T4, gpuprov_gpu_model=FOREVER)) for i in range(12))
    code, out, err = gpuprov("plan", "-i", _hosts(tmp_path, hosts), "--time-budget", "3")
    assert code == 2 and out == ""
    assert "reading the inventory took longer than its time budget of 3 s" in err, err
    assert "stopped while rendering n0" in err and ": gpuprov_gpu_model" in err
    assert "raise it with --time-budget SECONDS" in err
    assert "Traceback" not in err


def test_the_default_budget_covers_the_whole_inventory(gpuprov, tmp_path, watchdog, monkeypatch):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import inventory_limits

    monkeypatch.setattr(inventory_limits, "DEFAULT_BUDGET_SECONDS", 9)
    hosts = dict(("n%02d" % i, dict(T4, gpuprov_gpu_model=FOREVER)) for i in range(4))
    code, out, err = gpuprov("plan", "-i", _hosts(tmp_path, hosts))
    assert code == 2
    # The first host's template is stopped at its limit (5 s) as before; the second one uses
    # the rest of the budget and is stopped by it. The seconds are read, not matched: on a
    # busy machine the stop lands a little after the limit.
    found = re.search(r"time budget of 9 s \(stopped while rendering n01: gpuprov_gpu_model; most time: "
                      r"n00: gpuprov_gpu_model \((\d+\.\d) s\)", err)
    assert found, err
    assert float(found.group(1)) >= inventory_limits.TEMPLATE_SECONDS, err


def test_a_budget_that_runs_out_while_parsing_names_the_source(gpuprov, tmp_path, watchdog):
    path = tmp_path / "constructed.yml"
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"hosts": {"n1": T4}}}))
    # A compose entry is an expression, rendered while the inventory is parsed.
    path.write_text(yaml.safe_dump({"plugin": "constructed", "strict": True,
                                    "compose": {"slow": "range(10**9) | select('gt', 10**10) | list | length"}}))
    code, out, err = gpuprov("plan", "-i", str(tmp_path / "hosts.yml"), "-i", str(path), "--time-budget", "2")
    assert code == 2
    assert "reading the inventory took longer than its time budget of 2 s (stopped while parsing" in err, err


@pytest.mark.parametrize("value", ["0", "-1", "nan", "1e9", "\u0663"])
def test_the_time_budget_option_is_checked(gpuprov, tmp_path, value):
    code, out, err = gpuprov("plan", "-i", _hosts(tmp_path, {"n1": T4}), "--time-budget", value)
    assert code == 2
    assert "--time-budget" in err


@pytest.mark.parametrize("inventory, what", [
    ({"plugin": "generator", "hosts": {"name": "{{ a }}-{{ b }}-{{ c }}"},
      "layers": {"a": list(range(1000)), "b": list(range(1000)), "c": list(range(100))}},
     "its layers make 100000000 hosts"),
    ({"all": {"hosts": {"node[0:99999999]": T4}}}, "host range 'node[0:99999999]' expands to 100000000 hosts"),
    ({"all": {"hosts": {"a[0:999]-[0:999]": T4}}}, "expands to 1000000 hosts"),
])
def test_host_counts_above_the_bound_are_refused_before_they_expand(gpuprov, tmp_path, watchdog, inventory, what):
    name = "generator.yml" if "plugin" in inventory else "hosts.yml"
    path = tmp_path / name
    path.write_text(yaml.safe_dump(inventory))
    code, out, err = gpuprov("plan", "-i", str(path))
    assert code == 2
    assert what in err and "an inventory may have at most 100000 hosts" in err, err


def test_the_host_bound_counts_hosts_as_they_are_added(gpuprov, tmp_path, monkeypatch):
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils import inventory

    monkeypatch.setattr(inventory, "MAX_HOSTS", 50)
    hosts = dict(("n%03d" % i, T4) for i in range(51))
    code, out, err = gpuprov("plan", "-i", _hosts(tmp_path, hosts))
    assert code == 2
    assert "more than 50 hosts; an inventory may have at most 50 hosts" in err, err
    del hosts["n050"]
    code, out, err = gpuprov("plan", "-i", _hosts(tmp_path, hosts), "-o", "json")
    assert code == 0, err
