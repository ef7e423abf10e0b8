#!/usr/bin/env bash
# The built-in speed client (`prgate bench`) against the simulated server (`prgate sim-server`)
# with a known time per output token: how close the measured median TPOT comes to it, at a few
# concurrencies. Run: bash bench/client.sh   (TPOT_MS, OUTPUT_LEN and REQUESTS can be set).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --bin prgate >/dev/null 2>&1
prgate=target/release/prgate
TPOT_MS="${TPOT_MS:-20}"
OUTPUT_LEN="${OUTPUT_LEN:-128}"
REQUESTS="${REQUESTS:-32}"
work="$(mktemp -d)"
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
"$prgate" sim-server --tpot-ms "$TPOT_MS" --ttft-ms 50 --address-file "$work/address" --log-file "$work/log" >/dev/null &
server=$!
for _ in $(seq 100); do [[ -s "$work/address" ]] && break; sleep 0.1; done
url="$(cat "$work/address")"
echo "| concurrency | requests | server TPOT ms | measured median TPOT ms | error |"
echo "|---|---|---|---|---|"
for concurrency in 1 8 64; do
    "$prgate" bench --url "$url" --input-len 64 --output-len "$OUTPUT_LEN" --concurrency "$concurrency" \
        --requests "$((REQUESTS > concurrency ? REQUESTS : concurrency))" --warmup 2 > "$work/result.json"
    python3 - "$work/result.json" "$TPOT_MS" "$concurrency" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
expected = float(sys.argv[2])
measured = result["median_tpot_ms"]
print(f"| {sys.argv[3]} | {result['completed']} | {expected:.1f} | {measured:.2f} | {100 * (measured - expected) / expected:+.2f}% |")
PY
done
