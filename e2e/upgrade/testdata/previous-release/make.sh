#!/bin/sh
# Makes the previous-release fixtures: a ledger written by hookledger as it
# was before wide quantities (commit 064ad75, schema version 13), on SQLite
# (sqlite.sql, sqlite3's .dump) and on PostgreSQL (postgres.sql, pg_dump
# --inserts). upgrade_e2e_test.go loads them, migrates them with the current
# hookledger and verifies that every row and hash is kept.
#
# Usage: make.sh OLD_BINARY POSTGRES_SERVER_URL
# (OLD_BINARY built from 064ad75, e.g. git archive 064ad75 | tar -x -C /tmp/old
# && go build -C /tmp/old -o /tmp/old/hookledger .)
set -eu
old=$1 server=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill $serve 2>/dev/null || true; rm -rf "$work"' EXIT
cp "$here/hookledger.yml" "$work/"
cd "$work"

fill() { # into HOOKLEDGER_DATABASE, if set, else data/hookledger.db
  "$old" migrate >/dev/null
  "$old" serve --no-replication >serve.log 2>&1 & serve=$!
  i=0; until "$old" send --id probe --customer cus_0 --quantity 0 --occurred-at 2026-09-01T00:00:00Z >/dev/null 2>&1; do
    i=$((i+1)); [ $i -lt 100 ] || { cat serve.log; exit 1; }; sleep 0.1; done
  send() { "$old" send "$@" >/dev/null; }
  send --id evt_1 --customer cus_1 --meter api_requests --quantity 1200 --occurred-at 2026-09-03T10:00:00Z
  send --id evt_2 --customer cus_1 --meter api_requests --quantity 0.25 --occurred-at 2026-09-04T10:00:00Z
  send --id evt_3 --customer cus_1 --meter storage_bytes --quantity 9223372036854.775807 --occurred-at 2026-09-05T10:00:00Z
  send --id evt_4 --customer cus_2 --meter storage_bytes --quantity 0.000001 --occurred-at 2026-09-06T10:00:00Z
  send --id evt_5 --customer cus_2 --meter api_requests --quantity 5000000000000 --occurred-at 2026-09-07T10:00:00Z
  send --id evt_5 --customer cus_2 --meter api_requests --quantity 5000000000000 --occurred-at 2026-09-07T10:00:00Z # a duplicate
  "$old" adjust --customer cus_1 --meter api_requests --quantity -200 --reason "test traffic" --ref event:default/evt_1 >/dev/null
  "$old" customers add cus_3 --name "Fee only" >/dev/null
  "$old" invoice close --period 2026-09 --all >/dev/null
  send --id evt_6 --customer cus_1 --meter api_requests --quantity 3000 --occurred-at 2026-09-20T10:00:00Z # late
  send --id evt_7 --customer cus_2 --meter api_requests --quantity 7 --occurred-at 2026-10-02T10:00:00Z
  "$old" invoice close --period 2026-10 --all >/dev/null
  kill $serve; wait $serve || true
  "$old" verify >/dev/null
}

fill
sqlite3 data/hookledger.db .dump >"$here/sqlite.sql"

db=hookledger_previous_release_$$
psql "$server" -qc "CREATE DATABASE $db"
url=$(echo "$server" | sed "s#/[^/?]*\(?\|\$\)#/$db\1#")
HOOKLEDGER_DATABASE=$url fill
# Without the dump's empty search_path, which would outlive the load on the
# loading connection, and without psql's meta-commands (\restrict): the test
# loads it as plain SQL.
pg_dump --inserts --no-owner --no-privileges "$url" | grep -v -e "set_config('search_path', '', false)" -e '^\\' >"$here/postgres.sql"
psql "$server" -qc "DROP DATABASE $db"
