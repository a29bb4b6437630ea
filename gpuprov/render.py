"""Output for people (tables) and tools (JSON, YAML)."""
import json

import click
import yaml


def table(headers, rows):
    """A plain aligned table; every cell is str()-ed and its control characters escaped, so
    a host name or value with a newline or an escape sequence cannot forge a line."""
    from ansible_collections.gpuprov.gpu.plugins.plugin_utils.terminal_text import escape

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


def to_json(data, depth=2, _level=0):
    """JSON with the top ``depth`` levels of mappings on their own lines, the rest compact.

    A fleet plan is megabytes of JSON: fully indented output needs the pure-Python encoder
    and costs several times the planning itself, while one line per node stays readable,
    diffable and lets json.dumps use its C encoder.
    """
    if isinstance(data, dict) and data and _level < depth:
        pad = "  " * (_level + 1)
        items = ",\n".join("%s%s: %s" % (pad, json.dumps(str(k)), to_json(v, depth, _level + 1))
                           for k, v in data.items())
        return "{\n%s\n%s}" % (items, "  " * _level)
    return json.dumps(data, separators=(", ", ": "))


def emit(data, output, table_fn):
    """Print ``data`` as json, yaml, or with ``table_fn`` for people."""
    if output == "json":
        click.echo(to_json(data))
    elif output == "yaml":
        click.echo(to_yaml(data), nl=False)
    else:
        click.echo(table_fn(data))
