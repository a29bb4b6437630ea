#!/usr/bin/env python3
# Copyright: (c) 2026, gpuprov maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Run one Exec*= line of a systemd unit file the way systemd would, for the fake systemctl.

    run_unit_command.py UNIT_FILE ExecStart|ExecStop

Applies the unit's EnvironmentFile= and Environment= on top of this process's environment
and feeds StandardInputText= on stdin, then exits with the command's status. Only what the
gpu_mps unit uses is understood: one command per key, no specifiers (%n ...).
"""

import os
import shlex
import subprocess
import sys


def parse_unit(path):
    service = {}
    section = None
    with open(path) as handle:
        for raw in handle:
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                continue
            if section == "Service" and "=" in line:
                key, value = line.split("=", 1)
                service.setdefault(key.strip(), []).append(value.strip())
    return service


def read_environment_file(path):
    env = {}
    with open(path) as handle:
        for raw in handle:
            line = raw.strip()
            if not line or line.startswith(("#", ";")) or "=" not in line:
                continue
            key, value = line.split("=", 1)
            words = shlex.split(value)
            env[key.strip()] = " ".join(words)
    return env


def main(unit_file, key):
    service = parse_unit(unit_file)
    env = dict(os.environ)
    for entry in service.get("EnvironmentFile", []):
        optional = entry.startswith("-")
        path = entry.lstrip("-")
        if optional and not os.path.exists(path):
            continue
        env.update(read_environment_file(path))
    for entry in service.get("Environment", []):
        for word in shlex.split(entry):
            name, _sep, value = word.partition("=")
            env[name] = value
    if key not in service:
        sys.stderr.write("%s has no %s=\n" % (unit_file, key))
        return 1
    argv = shlex.split(service[key][0].lstrip("-@+!"))
    text = "\n".join(service.get("StandardInputText", []))
    stdin = text + "\n" if text else None
    return subprocess.run(argv, input=stdin, text=True, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
