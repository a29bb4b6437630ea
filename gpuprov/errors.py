"""Errors the CLI reports without a traceback."""
import sys

import click

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def fail_bad_input(problems, header=None):
    """Print every problem (one `HOST: FIELD: reason` line each) and exit 2."""
    if header:
        click.echo(header, err=True)
    for problem in problems:
        click.echo(str(problem), err=True)
    sys.exit(EXIT_BAD_INPUT)
