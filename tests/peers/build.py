"""Build the Go peers of tests/peers into a cache folder, once per source state.

    python tests/peers/build.py [--print-dir]

Every main package under cmd/ and every `tool` go.mod names (the real Helm client, helm) is
built. The binaries land in $GPUPROV_PEERS_CACHE (default ~/.cache/gpuprov/peers)/<hash>/, where
<hash> covers go.mod, go.sum and every .go file here, so a changed harness is rebuilt and an
unchanged one is reused by every checkout. Go's own module and build caches (GOMODCACHE,
GOCACHE) are reused as well. Then `go vet ./...` and the harness's own Go tests
(`go test ./internal/...`, e.g. the control plane's supervisor) run, on an up-to-date build too.
Prints the build, vet and test times; exit status 1 when `go` is missing, the build fails, vet
reports or a test fails.
"""
import hashlib
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# Every main package under cmd/ becomes one binary of the same name.
COMMANDS_DIR = os.path.join(HERE, "cmd")
# go-nvml's cgo bindings declare many functions deprecated; their warnings are noise here.
CGO_CFLAGS = "-O2 -Wno-deprecated-declarations"


def cache_root():
    return os.environ.get("GPUPROV_PEERS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "gpuprov", "peers")


def source_files():
    files = []
    for folder, dirs, names in os.walk(HERE):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.endswith(".go") or name in ("go.mod", "go.sum"):
                files.append(os.path.join(folder, name))
    return files


def source_hash():
    digest = hashlib.sha256()
    for path in source_files():
        digest.update(os.path.relpath(path, HERE).encode() + b"\0")
        with open(path, "rb") as handle:
            digest.update(handle.read() + b"\0")
    return digest.hexdigest()[:16]


def build_dir():
    """The folder the binaries of the current sources live in (built or not)."""
    return os.path.join(cache_root(), source_hash())


def tools():
    """The packages of go.mod's `tool` directives (`go get -tool PKG@VERSION` adds one)."""
    found = []
    block = False
    with open(os.path.join(HERE, "go.mod")) as handle:
        for line in handle:
            words = line.split("//")[0].split()
            if block:
                if words == [")"]:
                    block = False
                elif words:
                    found.append(words[0])
            elif words[:2] == ["tool", "("]:
                block = True
            elif words[:1] == ["tool"] and len(words) == 2:
                found.append(words[1])
    return sorted(found)


def commands():
    """The binaries' names: cmd/<name>, and each tool's last path element (go build names it so)."""
    names = [name for name in os.listdir(COMMANDS_DIR) if os.path.isdir(os.path.join(COMMANDS_DIR, name))]
    return sorted(names + [package.rstrip("/").split("/")[-1] for package in tools()])


def required_version(module):
    """The version go.mod requires of MODULE (e.g. v1.37.2), or None."""
    with open(os.path.join(HERE, "go.mod")) as handle:
        for line in handle:
            words = line.split()
            if words[:1] == ["require"]:
                words = words[1:]
            if len(words) >= 2 and words[0] == module and "=>" not in words:
                return words[1]
    return None


def kubernetes_version():
    """The k8s.io/kubernetes version go.mod requires (e.g. v1.37.2), or None."""
    return required_version("k8s.io/kubernetes")


def version_ldflags():
    """The components report the release they were built from (kubectl version, /version),
    as upstream's builds stamp it (hack/lib/version.sh: k8s.io/component-base/version).

    helm, as helm's Makefile stamps a release (helm.sh/helm/v3 v3.21.4 Makefile: LDFLAGS):
    internal/version.version is the tag (unstamped, `helm version` says only "v3.21"), metadata
    empty for a tag; and chartutil's / lint's default Kubernetes version (used where helm does
    not ask a server, e.g. `helm template`) is derived from the client-go version it builds
    with: major + 1, minor (client-go v0.37.2 here, through the replace directives, gives 1.37).
    gitCommit stays empty (the module zip carries no commit). -X of a package a binary does not
    link is ignored, so one flag set serves every binary."""
    flags = []
    version = kubernetes_version()
    if version:
        major, minor = version.lstrip("v").split(".")[:2]
        package = "k8s.io/component-base/version"
        flags += ["-X %s.%s=%s" % (package, name, value) for name, value in (
            ("gitVersion", version), ("gitMajor", major), ("gitMinor", minor), ("gitTreeState", "clean"))]
    helm = required_version("helm.sh/helm/v3")
    if helm:
        flags += ["-X helm.sh/helm/v3/internal/version.version=%s" % helm,
                  "-X helm.sh/helm/v3/internal/version.metadata=",
                  "-X helm.sh/helm/v3/internal/version.gitTreeState=clean"]
        client_go = client_go_version()
        if client_go:
            major, minor = client_go.lstrip("v").split(".")[:2]
            for package in ("helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/lint/rules"):
                flags += ["-X %s.k8sVersionMajor=%d" % (package, int(major) + 1),
                          "-X %s.k8sVersionMinor=%s" % (package, minor)]
    return ["-ldflags", " ".join(flags)] if flags else []


def client_go_version():
    """The k8s.io/client-go version the build uses: its replace target, else its requirement."""
    with open(os.path.join(HERE, "go.mod")) as handle:
        for line in handle:
            words = line.split()
            if words[:1] == ["replace"]:
                words = words[1:]
            if len(words) == 4 and words[0] == "k8s.io/client-go" and words[1] == "=>":
                return words[3]
    return required_version("k8s.io/client-go")


def find_go():
    return shutil.which("go") or ("/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None)


def _run_go(go, args, success, env=None):
    """Run `go ARGS` here, print its time, and its output only when it fails (exit status 1)."""
    started = time.monotonic()
    result = subprocess.run([go] + args, cwd=HERE, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    command = "go " + " ".join(args)
    if result.returncode != 0:
        sys.stderr.write(result.stdout + result.stderr)
        print("peers: %s failed after %.0f s" % (command, seconds), file=sys.stderr)
        return 1
    print("peers: %s %s in %.0f s" % (command, success, seconds))
    return 0


def vet(go):
    """`go vet ./...` as a developer runs it (no flags, the caller's environment), so its
    results, and the analysis facts it computes for every dependency, are in Go's cache:
    a cold vet of the Kubernetes dependencies takes minutes, a warm one seconds."""
    return _run_go(go, ["vet", "./..."], "clean")


def test(go):
    """The harness's own tests: the internal packages (no Kubernetes code, so seconds)."""
    env = dict(os.environ)
    env.setdefault("CGO_CFLAGS", CGO_CFLAGS)
    return _run_go(go, ["test", "./internal/..."], "passed", env=env)


def check(go):
    return vet(go) or test(go)


def build():
    go = find_go()
    if go is None:
        print("peers: no `go` on PATH (Go 1.26 is needed to build tests/peers)", file=sys.stderr)
        return 1
    target = build_dir()
    names = commands()
    if all(os.access(os.path.join(target, name), os.X_OK) for name in names):
        print("peers: up to date in %s (%s)" % (target, ", ".join(names)))
        return check(go)
    staging = target + ".partial-%d" % os.getpid()
    os.makedirs(staging, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("CGO_CFLAGS", CGO_CFLAGS)
    started = time.monotonic()
    # No -trimpath: it is part of every package's cache key, and without it `go vet` and
    # `go test` reuse what this build compiled.
    result = subprocess.run([go, "build", *version_ldflags(), "-o", staging + os.sep, "./cmd/...", *tools()],
                            cwd=HERE, env=env)
    seconds = time.monotonic() - started
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        print("peers: go build failed after %.0f s" % seconds, file=sys.stderr)
        return 1
    # Another checkout may have finished the same build meanwhile: either copy is good.
    try:
        os.rename(staging, target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    print("peers: built %s in %.0f s into %s" % (", ".join(names), seconds, target))
    return check(go)


if __name__ == "__main__":
    if sys.argv[1:] == ["--print-dir"]:
        print(build_dir())
        sys.exit(0)
    sys.exit(build())
