"""Output for people (tables) and tools (JSON, YAML), and the one way anything is printed.

Every command prints through ``echo``: the text passes terminal_text.visible, so a name
from an inventory, a file or a cluster can never carry a control sequence, a bidi override
or an invisible character to the terminal, whichever message it ends up in. Values put into
a line go through terminal_text.escape first, so that their newlines cannot start a line.
"""
import json
import sys

import click
import yaml


_TERMINAL_TEXT = []


def _terminal_text():
    if not _TERMINAL_TEXT:
        from gpuprov import ansible_config

        # A message printed before any command ran (a mistyped command) still needs gpuprov's
        # own collection, and not one the working folder's ansible.cfg names.
        ansible_config.use_collection_safely()
        from ansible_collections.gpuprov.gpu.plugins.plugin_utils import terminal_text

        _TERMINAL_TEXT.append(terminal_text)
    return _TERMINAL_TEXT[0]


def escape_ansible_output():
    """Ansible's own messages (its Display: warnings about the inventory name hosts and
    groups) pass the same escaping: a warning is one message, its newlines escaped too."""
    from ansible.utils.display import Display

    display = Display()
    if getattr(display, "_gpuprov_escaped", False):
        return
    show, warn = display.display, display.warning

    def shown(msg, *args, **kwargs):
        return show(_terminal_text().visible(msg) if isinstance(msg, str) else msg, *args, **kwargs)

    def warned(msg, *args, **kwargs):
        return warn(_terminal_text().escape(msg) if isinstance(msg, str) else msg, *args, **kwargs)

    display.display, display.warning, display._gpuprov_escaped = shown, warned, True


def echo(text="", err=False, nl=True):
    """Print ``text`` (stdout, or stderr with ``err``), every character that does not show
    as itself written as an escape; the text's own newlines stay."""
    click.echo(_terminal_text().visible(text), err=err, nl=nl)


def clear_screen():
    """Home the cursor and clear the screen (ESC [H ESC [2J, as top does): gpuprov's own
    sequence, the only one it sends."""
    click.echo("\x1b[H\x1b[2J", nl=False)


def escape(text):
    """One value for a line of output (terminal_text.escape)."""
    return _terminal_text().escape(text)


def lines(items):
    """Lines a renderer composed, one string each, joined: a newline a value brought into one
    of them is escaped, so it cannot start a line of its own."""
    return "\n".join(escape(item) for item in items)


def table(headers, rows):
    """A plain aligned table; every cell is str()-ed and its control characters escaped, so
    a host name or value with a newline or an escape sequence cannot forge a line."""
    rows = [[escape(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


class _Dumper(yaml.SafeDumper):
    pass


def _str_presenter(dumper, data):
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str_presenter)


def to_yaml(data):
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)


def json_pieces(data, depth=2, _level=0, _shared=None):
    """The text of to_json(data) in pieces, one per line of its top levels.

    A fleet plan is tens of megabytes of JSON: fully indented output needs the pure-Python
    encoder and costs several times the planning itself, while one line per node stays
    readable, diffable and lets json.dumps use its C encoder. Written piece by piece, the
    whole text is never held in memory at once; a list or mapping that several lines share
    (the planner plans identical hosts once, and their plans share those parts) is encoded
    once.
    """
    shared = {} if _shared is None else _shared
    if isinstance(data, dict) and data and _level < depth:
        pad = "  " * (_level + 1)
        yield "{\n"
        for number, (key, value) in enumerate(data.items()):
            yield "%s%s%s: " % (",\n" if number else "", pad, json.dumps(str(key)))
            yield from json_pieces(value, depth, _level + 1, shared)
        yield "\n%s}" % ("  " * _level)
    elif isinstance(data, dict) and data and all(type(key) is str for key in data):
        # What json.dumps(data, separators=(", ", ": ")) writes, with shared parts from the cache.
        yield "{%s}" % ", ".join("%s: %s" % (json.dumps(key), _encoded(value, shared)) for key, value in data.items())
    else:
        yield json.dumps(data, separators=(", ", ": "))


def _encoded(value, shared):
    if not isinstance(value, (dict, list)):
        return json.dumps(value, separators=(", ", ": "))
    known = shared.get(id(value))
    if known is None or known[0] is not value:
        # The value is kept with its text, so its id cannot be taken by another object meanwhile.
        known = shared[id(value)] = (value, json.dumps(value, separators=(", ", ": ")))
    return known[1]


def to_json(data, depth=2):
    """JSON with the top ``depth`` levels of mappings on their own lines, the rest compact."""
    return "".join(json_pieces(data, depth))


def echo_json(data, depth=2):
    """Print to_json(data), streamed. json.dumps escapes every control and non-ASCII
    character (ensure_ascii), so the text is plain ASCII and needs no escaping pass."""
    stream = sys.stdout
    batch, size = [], 0
    for piece in json_pieces(data, depth):
        batch.append(piece)
        size += len(piece)
        if size > 1 << 20:
            stream.write("".join(batch))
            batch, size = [], 0
    batch.append("\n")
    stream.write("".join(batch))
    stream.flush()


def emit(data, output, table_fn):
    """Print ``data`` as json, yaml, or with ``table_fn`` for people."""
    if output == "json":
        echo_json(data)
    elif output == "yaml":
        echo(to_yaml(data), nl=False)
    else:
        echo(table_fn(data))
