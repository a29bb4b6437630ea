#!/usr/bin/env bash
# Set up a development environment: .venv with gpuprov (CLI + collection) and its dev tools.
# Safe to re-run. Usage: scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3

if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv with $($PYTHON --version)"
    "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
echo "==> installing gpuprov with its dev extras"
python -m pip install --quiet --upgrade pip
# A regular (not editable) install puts the collection under site-packages/ansible_collections,
# where Ansible finds it from any folder; in this repository ansible.cfg points at ./collections.
# setuptools builds in ./build and reuses it: without this, a file removed from the source (a
# module that became a package, such as gpuprov/fit.py) would still be installed.
rm -rf build
python -m pip install --quiet ".[dev]"

# The SSH test fleet needs sshd (tests skip the fleet without it).
if ! [ -x /usr/sbin/sshd ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "==> installing openssh-server for the SSH test fleet"
    (apt-get install -y -qq openssh-server >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq openssh-server >/dev/null 2>&1; }) \
        || echo "    (could not install openssh-server: fleet tests will be skipped)"
fi

# The cluster-side tests read the Node and the kubelet's configz with a real kubectl through the
# test control plane's node proxy (Debian's kubernetes-client, where the machine has none).
if ! command -v kubectl >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "==> installing kubectl (kubernetes-client) for the control-plane tests"
    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client \
                >/dev/null 2>&1; }) \
        || echo "    (could not install kubernetes-client: the kubectl tests will fail)"
fi

# `diagnose --report` is checked in a real headless browser (tests skip without it).
if ! [ -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "==> installing chromium for the diagnose --report tests"
    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium \
                >/dev/null 2>&1; }) \
        || echo "    (could not install chromium: the browser tests will be skipped)"
fi

# `diagnose --prometheus` tests run a real Prometheus server (tests skip without it). Debian's
# package would start a system service on :9090: a policy-rc.d that refuses service starts
# (invoke-rc.d exit code 101) keeps it stopped, and --no-install-recommends leaves out the
# node exporter and its timers.
if ! [ -x /usr/bin/prometheus ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "==> installing prometheus for the diagnose --prometheus tests"
    planted=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && planted=1
    fi
    (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus \
                >/dev/null 2>&1; }) \
        || echo "    (could not install prometheus: its tests will be skipped)"
    [ -n "$planted" ] && rm -f /usr/sbin/policy-rc.d
    # Without systemd as PID 1 nothing started it; where systemd runs, stop what it started.
    if [ -d /run/systemd/system ]; then
        systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
fi

# ansible-test fetches a pip bootstrap script from the internet before it builds its venv;
# with only package registries reachable, give it one that uses ensurepip + pip instead.
cache="$HOME/.ansible/test/cache"
if [ ! -f "$cache/get_pip_24_2.py" ]; then
    mkdir -p "$cache"
    cat > "$cache/get_pip_24_2.py" <<'PY'
# Offline stand-in for get-pip.py: ensurepip, then pip install with the given arguments.
import subprocess
import sys

DROP = {"--disable-pip-version-check", "--no-setuptools", "--no-wheel"}
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade"])
args = [a for a in sys.argv[1:] if a not in DROP]
if args:
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)
PY
fi
# The Go peers (tests/peers: NVIDIA's and the kubelet's own code, the control plane) are built
# once per source state into a cache folder (tests/peers/build.py). scripts/test.sh builds them
# in a stage of its own, to time it.
if [ "${GPUPROV_SETUP_PEERS:-1}" = 1 ]; then
    echo "==> building the Go test peers (tests/peers)"
    python tests/peers/build.py || echo "    (could not build tests/peers: the peer tests will be skipped)"
fi
echo "==> ready: . .venv/bin/activate"
