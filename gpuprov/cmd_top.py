"""`gpuprov top`: every GPU and MIG instance of the fleet, live, over SSH."""
import json
import os
import sys
import time

import click

from gpuprov import options, render
from gpuprov.errors import EXIT_FAILED, EXIT_OK, fail_bad_input


@click.command("top")
@options.inventory_options
@options.reading_options
@options.trust_ansible_cfg_option
@click.option("--interval", default=2.0, show_default=True, type=click.FloatRange(0.5, 60), metavar="SECONDS",
              help="Seconds between samples on each node.")
@click.option("--once", is_flag=True, help="Print one sample of every node and exit (for scripts).")
@click.option("-n", "--frames", type=click.IntRange(1, None), metavar="N",
              help="Refresh N times, then exit (default: until Ctrl-C).")
@click.option("--known-hosts", "known_hosts", multiple=True, metavar="FILE",
              help="known_hosts file(s) to check host keys against (default: the inventory's "
                   "UserKnownHostsFile, else ~/.ssh/known_hosts). Repeatable.")
@options.output_option(["table", "json"], help_text="table: a live view for people; json: one sample (with --once).")
def top(inventory, limit, vault, reading, interval, once, frames, known_hosts, output):
    """Show utilisation, memory and processes of every GPU and MIG instance, live.

    Opens one SSH session per node with paramiko (the inventory's ansible_host,
    ansible_port, ansible_user and ansible_ssh_private_key_file; host keys must be in
    known_hosts: unknown or changed keys are refused, never added) and runs a fixed NVML
    sampling program there (the node's ansible_python_interpreter with pynvml). A node that
    cannot be reached, refuses, or drops out shows as such; the others go on.

    NVML has no utilisation per MIG instance (UTIL n/a): use `gpuprov diagnose --prometheus`
    with dcgm-exporter for that.

    Exit status: 0 every node sampled, 1 a node unreachable or refused, 2 bad input.
    """
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.inventory import InventoryError

    from gpuprov.top import connections, view

    problems = [("--known-hosts %s: no such file" % path) for path in known_hosts if not os.path.isfile(path)]
    if once and frames:
        problems.append("--once prints one sample; --frames N refreshes N times: give one")
    if output == "json" and not once:
        problems.append("-o json needs --once (a live view is for people)")
    if problems:
        fail_bad_input(problems, header="gpuprov top: cannot start:")
    try:
        targets = connections.load_targets(list(inventory), limit, list(known_hosts), vault=vault.reader_options(),
                                               reading=reading.reader_options())
    except InventoryError as error:
        fail_bad_input(str(error).splitlines(), header="gpuprov top: cannot read the inventory:")
    streams = {t.name: connections.Stream(t, interval).start() for t in targets}
    live = not once and sys.stdout.isatty()
    shown = 0
    try:
        if once:
            # Until every node has one sample or has failed (a connect times out after 10 s).
            deadline = time.monotonic() + 30 + interval
            while time.monotonic() < deadline and any(
                    s.snapshot()["status"] in ("connecting", "streaming") for s in streams.values()):
                time.sleep(0.1)
        else:
            time.sleep(min(interval, 1.0))
        while True:
            result = view.report({name: stream.snapshot() for name, stream in streams.items()})
            if output == "json":
                render.echo(json.dumps(result, indent=2))
            else:
                if live:
                    render.clear_screen()
                render.echo("gpuprov top  %s  every %gs%s" % (time.strftime("%H:%M:%S"), interval,
                                                             "  (Ctrl-C quits)" if live else ""))
                render.echo(view.table(result))
                if not live:
                    render.echo("")
            shown += 1
            if once or (frames and shown >= frames):
                break
            time.sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        for stream in streams.values():
            stream.close()
    ok = all(node["status"] == "ok" for node in result["nodes"].values())
    raise SystemExit(EXIT_OK if ok else EXIT_FAILED)
