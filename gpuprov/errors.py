"""Errors the CLI reports without a traceback."""
import sys

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


def fail_bad_input(problems, header=None):
    """Print every problem (one `HOST: FIELD: reason` line each) and exit 2."""
    from gpuprov.render import echo, escape

    if header:
        echo(escape(header), err=True)
    for problem in problems:
        # Each problem is one line: a newline inside it is escaped, not printed.
        echo(escape(problem), err=True)
    sys.exit(EXIT_BAD_INPUT)
