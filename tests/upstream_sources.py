"""Files of the upstream Go modules tests/peers pins, read where Go keeps them (the module
cache), at the versions go.mod names: NVIDIA's own flag declarations, mig-parted's shipped
config-default.yaml. The tests read them in place; nothing is copied into the project.

Without Go or a built harness the tests skip, unless GPUPROV_REQUIRE_PEERS=1 (as for peers).
"""
import os
import re
import shutil
import subprocess

import pytest

from testlib import REPO

GO_MOD = os.path.join(REPO, "tests", "peers", "go.mod")


def pinned_version(module):
    with open(GO_MOD, encoding="utf-8") as handle:
        text = handle.read()
    match = re.search(r"^\s+%s (v\S+)" % re.escape(module), text, re.M)
    if match is None:
        raise AssertionError("%s is not required by %s" % (module, GO_MOD))
    return match.group(1)


def _unavailable(message):
    if os.environ.get("GPUPROV_REQUIRE_PEERS") == "1":
        pytest.fail(message)
    pytest.skip(message)


def module_cache():
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)
    if go is None:
        _unavailable("no `go` to locate the Go module cache")
    return subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()


def module_file(module, path):
    """The path of ``path`` inside ``module`` at its pinned version."""
    # The module cache escapes upper-case letters as !lower (golang.org/x/mod/module).
    escaped = re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)
    full = os.path.join(module_cache(), "%s@%s" % (escaped, pinned_version(module)), path)
    if not os.path.isfile(full):
        _unavailable("%s is not in the Go module cache (build tests/peers first)" % full)
    return full
