#!/usr/bin/env bash
# The ingest API's benchmark matrix (BENCHMARKS.md, "Ingest API"): for each
# cell a fresh `hookledger serve` (embedded default config, synchronous=FULL)
# on a free loopback port and an empty data directory, one load of
# `hookledger bench` with --verify, then serve is stopped. The webhook path
# runs in the same round for comparison. Rounds interleave the cells.
#
#   go build -o /tmp/hookledger . && bench/ingest-matrix.sh /tmp/hookledger 3 > matrix.jsonl
#
# first=N starts at round N (to finish a run that was stopped).
set -euo pipefail
bin=${1:?usage: ingest-matrix.sh BINARY [ROUNDS]}
rounds=${2:-1}
export HOOKLEDGER_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
cell() { # round mode(webhook|batch N) connections events
	local round=$1 batch=$2 k=$3 n=$4 dir port pid key out
	dir=$(mktemp -d)
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	"$bin" serve --no-replication --listen 127.0.0.1:$port --data "$dir/data" 2>"$dir/serve.log" &
	pid=$!
	for _ in $(seq 300); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
	curl -fs "http://127.0.0.1:$port/healthz" >/dev/null || { echo "serve did not start:" >&2; cat "$dir/serve.log" >&2; exit 1; }
	if [ "$batch" = 0 ]; then
		out=$("$bin" bench -n "$n" -k "$k" --url "http://127.0.0.1:$port" --data "$dir/data" --verify --format json)
	else
		key=$("$bin" keys create bench --quiet --data "$dir/data")
		out=$("$bin" bench --batch "$batch" -n "$n" -k "$k" --url "http://127.0.0.1:$port" --key "$key" --data "$dir/data" --verify --format json)
	fi
	kill "$pid"; wait "$pid" || true
	echo "$out" | jq -c --arg r "$round" '{round: ($r|tonumber), batch, connections, requests, events_per_second, requests_per_second,
		p99_ms: .latency_ms.p99, verify: (.verify.problems // [] | length == 0), exactly_once: .verify.exactly_once, events: .verify.events}'
	rm -rf "$dir"
}
for r in $(seq "${first:-1}" "$rounds"); do
	for k in 8 32; do
		cell "$r" 0 "$k" 20000
		cell "$r" 1 "$k" 20000
		cell "$r" 10 "$k" 50000
		cell "$r" 100 "$k" 100000
		cell "$r" 1000 "$k" 100000
	done
done
