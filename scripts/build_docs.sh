#!/usr/bin/env bash
# Build the collection's module, role and plugin documentation as HTML with antsibull-docs and
# Sphinx, the way collections publish it; any warning fails the build.
# Usage: scripts/build_docs.sh [OUTPUT_DIR]      (default build/collection-docs; open index.html)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
out=${1:-build/collection-docs}
case $out in /*) ;; *) out="$REPO/$out" ;; esac
# The collection as this repository has it (ansible.cfg: collections_path = ./collections).
export ANSIBLE_CONFIG="$REPO/ansible.cfg"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
antsibull-docs sphinx-init --use-current --fail-on-error --no-add-antsibull-docs-version \
    --project gpuprov.gpu --copyright "gpuprov maintainers" --title "gpuprov.gpu" \
    --html-short-title "gpuprov.gpu" --dest-dir "$work" gpuprov.gpu >/dev/null
cat docs/collection-docs.conf.py >> "$work/conf.py"
mkdir -p "$work/rst"
chmod og-w "$work/rst"   # antsibull-docs wants its output folder writable only by itself
antsibull-docs --config-file "$work/antsibull-docs.cfg" collection --cleanup everything --fail-on-error \
    --use-current --no-add-antsibull-docs-version --dest-dir "$work/rst" gpuprov.gpu
rm -rf "$out"
sphinx-build -q -W --keep-going -b html -c "$work" "$work/rst" "$out"
echo "collection docs: $out/index.html"
