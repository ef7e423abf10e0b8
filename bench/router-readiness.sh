#!/usr/bin/env bash
# How long after sglang-router's /health answers 200 its /readiness does (it registers its
# workers first): the wait the topology's default router health path (/readiness) adds.
# Usage: bench/router-readiness.sh [RUNS]   (needs the built prgate and .ci/setup-python's venv)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-5}"
python="${PRGATE_TEST_SGLANG_ROUTER:-$PWD/target/prgate-python/bin/python3}"
prgate="${PRGATE:-$PWD/target/debug/prgate}"
now() { date +%s.%N; }
code() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1$2" || true; }
for run in $(seq "$runs"); do
    base=$((40000 + run * 10))
    "$prgate" sim-server --listen 127.0.0.1:$base --disaggregation-mode prefill \
        --disaggregation-bootstrap-port $((base + 1)) >/dev/null 2>&1 &
    prefill=$!
    "$prgate" sim-server --listen 127.0.0.1:$((base + 2)) --disaggregation-mode decode >/dev/null 2>&1 &
    decode=$!
    until [ "$(code $base /health)" = 200 ] && [ "$(code $((base + 2)) /health)" = 200 ]; do sleep 0.02; done
    start=$(now)
    "$python" -m sglang_router.launch_router --pd-disaggregation --host 127.0.0.1 --port $((base + 3)) \
        --prometheus-port $((base + 4)) --policy round_robin --log-level warn \
        --prefill http://127.0.0.1:$base $((base + 1)) --decode http://127.0.0.1:$((base + 2)) >/dev/null 2>&1 &
    router=$!
    health="" ready=""
    while [ -z "$ready" ]; do
        [ -z "$health" ] && [ "$(code $((base + 3)) /health)" = 200 ] && health=$(now)
        [ -n "$health" ] && [ "$(code $((base + 3)) /readiness)" = 200 ] && ready=$(now)
        sleep 0.02
    done
    kill $router $prefill $decode 2>/dev/null; wait 2>/dev/null || true
    awk -v s="$start" -v h="$health" -v r="$ready" -v n="$run" \
        'BEGIN { printf "run %d: /health after %.2f s, /readiness after %.2f s (%.2f s later)\n", n, h - s, r - s, r - h }'
done
