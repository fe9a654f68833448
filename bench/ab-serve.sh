#!/usr/bin/env bash
# A/B of hookledger binaries on SQLite (BENCHMARKS.md, "The change itself,
# A/B"): per round, each binary in turn gets a fresh `serve --no-replication`
# on a free loopback port and an empty data directory and one load of
# `hookledger bench -n 20000 -k 32 --dup 0.1 --verify`; serve's CPU time
# (user+system, from /proc) is taken around the load. One JSON line per load.
#
#   bench/ab-serve.sh /tmp/hookledger-before /tmp/hookledger-after > ab.jsonl
#
# ROUNDS (default 3) sets the rounds. Linux only (/proc).
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: ab-serve.sh BINARY..." >&2; exit 2; }
cputicks() { awk '{print $14+$15}' "/proc/$1/stat"; }
for r in $(seq "${ROUNDS:-3}"); do
	for bin in "$@"; do
		dir=$(mktemp -d)
		port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		"$bin" serve --no-replication --listen 127.0.0.1:$port --data "$dir/data" 2>"$dir/serve.log" &
		pid=$!
		for _ in $(seq 300); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
		before=$(cputicks "$pid")
		out=$("$bin" bench -n 20000 -k 32 --dup 0.1 --url "http://127.0.0.1:$port" --data "$dir/data" --verify --format json)
		after=$(cputicks "$pid")
		kill "$pid"; wait "$pid" || true
		echo "$out" | jq -c --arg r "$r" --arg bin "$bin" --arg ticks "$((after - before))" --arg hz "$(getconf CLK_TCK)" \
			'{round: ($r|tonumber), binary: $bin, requests_per_second, p99_ms: .latency_ms.p99,
			  serve_cpu_us_per_request: (($ticks|tonumber) / ($hz|tonumber) * 1e6 / .requests),
			  verify: (.verify.problems // [] | length == 0), exactly_once: .verify.exactly_once}'
		rm -rf "$dir"
	done
done
