#!/usr/bin/env bash
# Start the quickstart: an echo backend on 127.0.0.1:3000 and lychgate serving
# examples/quickstart. Ctrl-C stops both (and every Envoy lychgate started).
set -euo pipefail
bin=${1:-.venv/bin}
cd "$(dirname "$0")/.."
"$bin/lychgate" echo --port 3000 &
echo_pid=$!
trap 'kill $echo_pid 2>/dev/null || true' EXIT
echo "Try:  curl -H 'host: www.example.com' http://127.0.1.1:8080/hello"
"$bin/lychgate" run examples/quickstart
