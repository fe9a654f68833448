#!/bin/sh
# Writes acme-export.jsonl, the five events acme says it sent, stamped one hour
# ago (reconcile reads a window of recent events), and prints that time.
set -eu
at=$(date -u -d '1 hour ago' +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -v-1H +%Y-%m-%dT%H:%M:%SZ)
: > acme-export.jsonl
for i in 1 2 3 4 5; do
  printf '{"data":{"customer":"cus_1","meter":"api_requests","occurred_at":"%s","quantity":%d},"id":"evt_%d","type":"usage.recorded"}\n' "$at" "$i" "$i" >> acme-export.jsonl
done
echo "$at"
