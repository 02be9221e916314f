#!/usr/bin/env bash
# `magnetar perf e2e` on an external AWS endpoint (the one AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> name):
# starts `magnetar local up --aws-endpoint $AWS_ENDPOINT_URL` on a free port, runs perf against it (the raw
# limits measured on the same endpoints, DynamoDB's where AWS_ENDPOINT_URL_DYNAMODB points), stops local up.
#
#   scripts/emulators.sh scripts/perf-external.sh --duration 20 --json bench/results/perf-e2e-localstack.json
#
# Arguments go to `magnetar perf e2e`. `magnetar perf e2e` alone starts its own moto instead.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BIN="${BIN:-$ROOT/.venv/bin}"
: "${AWS_ENDPOINT_URL:?AWS_ENDPOINT_URL names the endpoint (scripts/emulators.sh sets it)}"
PORT="$("$BIN/python" -c 'from magnetar.local.cluster import free_port; print(free_port())')"
URL="http://127.0.0.1:$PORT"
LOG="${EMULATORS_DIR:-$ROOT/.localstack}/local-up.log"
mkdir -p "$(dirname "$LOG")"

"$BIN/magnetar" local up --port "$PORT" --aws-endpoint "$AWS_ENDPOINT_URL" >"$LOG" 2>&1 &
LOCAL_UP=$!
# SIGTERM: a background job of a non-interactive shell ignores SIGINT (Ctrl-C)
trap 'kill -TERM "$LOCAL_UP" 2>/dev/null && wait "$LOCAL_UP" || true' EXIT
for _ in $(seq 1 120); do
    [ "$(curl -sf --max-time 2 "$URL/admin/v2/brokers/health" 2>/dev/null)" = "ok" ] && break
    kill -0 "$LOCAL_UP" 2>/dev/null || { echo "local up exited:" >&2; tail -n 30 "$LOG" >&2; exit 1; }
    sleep 1
done
"$BIN/magnetar" perf e2e --service-url "$URL" --aws-endpoint "$AWS_ENDPOINT_URL" "$@"
