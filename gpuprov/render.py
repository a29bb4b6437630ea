"""Output for people (tables) and tools (JSON, YAML)."""
import json

import click
import yaml


def table(headers, rows):
    """A plain aligned table; every cell is str()-ed."""
    rows = [[str(c) for c in row] for row in rows]
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


def to_json(data, pretty=True):
    if pretty:
        return json.dumps(data, indent=2, sort_keys=False)
    return json.dumps(data, separators=(",", ":"))


def emit(data, output, table_fn):
    """Print ``data`` as json, yaml, or with ``table_fn`` for people."""
    if output == "json":
        click.echo(to_json(data))
    elif output == "yaml":
        click.echo(to_yaml(data), nl=False)
    else:
        click.echo(table_fn(data))
