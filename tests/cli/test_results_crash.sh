#!/usr/bin/env bash
# No lost results: a controller SIGKILLed in the middle of writing rows
# leaves whole rows only (each row is one write), a run.json that parses and
# says "running", no peer; `hiernet clean`, or the start of the next run,
# marks that run.json "crashed" with the time of its last write and removes
# the registry entry. Results files are 0644 whatever the umask, are never
# created through a planted symlink, and a scenario's odd file name makes a
# plain results directory name.
# Usage: test_results_crash.sh HIERNET_BINARY
set -u
HN=$(readlink -f "$1")
here=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
source "$here/lib.sh"
in_scratch_dir registry

# json FILE EXPR: a Python expression over the parsed file `j`.
json() { python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

cat >rows.lua <<'LUA'
local hn = require("hiernet")
local net = hn.network{ name = "c", backend = "none" }
local a, b = net:node("crash_a"), net:node("crash_b")
net:start()
local rec = hn.record("rows", { "i", "text" })
local ready = false
for i = 1, 100000000 do
  rec:add{ i = i, text = string.rep("x", i % 70) .. ',"q"' } -- quoted cells too
  if i % 50 == 0 then a:ping() end
  if i == 3000 and not ready then
    local f = io.open(os.getenv("READY_FILE"), "w")
    f:write(a:stats().pid, " ", b:stats().pid)
    f:close()
    ready = true
  end
end
LUA

# start_and_kill OUT: runs rows.lua, SIGKILLs the controller once 3000 rows are in.
start_and_kill() {
  rm -f ready
  READY_FILE=$PWD/ready "$HN" run rows.lua --out "$1" --quiet 2>/dev/null &
  local pid=$!
  wait_until 200 0.05 test -s ready
  # Killed mid-run: once rows past the 3000th are being written (up to 5 s).
  local size
  size=$(stat -c %s "$1/rows.csv" 2>/dev/null || echo 0)
  rows_grew() { (($(stat -c %s "$2/rows.csv" 2>/dev/null || echo 0) > $1)); }
  wait_until 250 0.02 rows_grew "$size" "$1"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null
  PEERS=$(cat ready 2>/dev/null)
}

# whole_rows CSV: every line a whole row, numbered 1.. without a gap.
whole_rows() {
  python3 - "$1" <<'PY'
import csv, sys
data = open(sys.argv[1], newline="").read()
assert data.endswith("\n"), "the file ends inside a row"
rows = list(csv.reader(data.splitlines()))
assert rows[0] == ["i", "text"], rows[0]
for n, row in enumerate(rows[1:], 1):
    assert len(row) == 2 and row[0] == str(n), (n, row)
    assert row[1] == "x" * (n % 70) + ',"q"', (n, row)
print(len(rows) - 1)
PY
}

# --- SIGKILL mid-run: what is on disk ---
start_and_kill r-kill1
rows=$(whole_rows r-kill1/rows.csv) && ok || bad "rows.csv holds a torn or missing row: $rows"
[[ ${rows:-0} -ge 3000 ]] && ok || bad "only ${rows:-0} rows were on disk after the kill"
[[ $(json r-kill1/run.json 'j["status"]') == running ]] && ok || bad "run.json of a killed run must say running"
# peers_alive: how many of $PEERS still run (a zombie has died: only its new
# parent's wait is missing).
peers_alive() {
  local p n=0
  for p in $PEERS; do
    [[ $(awk '{print $3}' "/proc/$p/stat" 2>/dev/null) =~ ^[RSDT]$ ]] && n=$((n + 1))
  done
  echo "$n"
}
for _ in $(seq 100); do # they follow their controller within moments: up to 5 s
  alive=$(peers_alive)
  [[ $alive -eq 0 ]] && break
  sleep 0.05
done
[[ $alive -eq 0 && -n $PEERS ]] && ok || bad "peers ($PEERS) outlived their controller"
[[ $(ls "$HIERNET_RUN_DIR" | wc -l) -eq 1 ]] && ok || bad "the killed run has no registry entry"
size_before=$(stat -c %s r-kill1/rows.csv)

# --- hiernet clean marks it crashed ---
expect_exit 0 "clean after a kill" -- "$HN" clean
expect_out "r-kill1/run.json of run r-kill1 crashed" "clean names the marked run.json"
expect_out "marked 1 run.json crashed" "clean counts the marked run.json"
[[ $(json r-kill1/run.json 'j["status"]') == crashed ]] && ok || bad "clean did not mark run.json crashed"
json r-kill1/run.json 'j["error"]' | grep -q "marked by hiernet clean" && ok || bad "the error names who marked it"
[[ $(json r-kill1/run.json 'j["end_time"] is not None and j["scenario"] == "rows.lua"') == True ]] &&
  ok || bad "crashed run.json keeps its fields and gets an end time: $(cat r-kill1/run.json)"
[[ $(stat -c %s r-kill1/rows.csv) -eq $size_before ]] && ok || bad "clean changed rows.csv"
[[ -z $(ls -A "$HIERNET_RUN_DIR") ]] && ok || bad "clean left the registry entry: $(ls -A "$HIERNET_RUN_DIR")"
expect_exit 0 "clean again" -- "$HN" clean
expect_out "clean: nothing stale" "a second clean finds nothing"
[[ $(json r-kill1/run.json 'j["status"]') == crashed ]] && ok || bad "a second clean changed run.json"

# --- the next run marks it ---
start_and_kill r-kill2
printf 'return 1\n' >ok.lua
expect_exit 0 "a run after a kill" -- "$HN" run ok.lua --out r-next --quiet
[[ $(json r-kill2/run.json 'j["status"]') == crashed ]] && ok || bad "the next run did not mark run.json crashed"
json r-kill2/run.json 'j["error"]' | grep -q "the start of a later run" && ok || bad "the error names the later run"
grep -q "removed what 1 crashed run(s) left behind (1 run.json marked crashed)" r-next/log.txt &&
  ok || bad "the next run logs its sweep: $(cat r-next/log.txt)"
[[ $(json r-next/run.json 'j["status"]') == completed ]] && ok || bad "the next run completed"
[[ -z $(ls -A "$HIERNET_RUN_DIR") ]] && ok || bad "a completed run left its registry entry"

# --- a run.json that is not the killed controller's is never touched ---
mkdir r-foreign
printf '{"status": "running", "pid": 1}\n' >r-foreign/run.json
start_and_kill r-kill3
cp r-foreign/run.json r-kill3/run.json # as if another controller had written it
expect_exit 0 "clean beside a foreign run.json" -- "$HN" clean
[[ $(json r-kill3/run.json 'j["status"]') == running ]] && ok || bad "clean marked another controller's run.json"

# --- permissions and planted links ---
(umask 000 && start_and_kill r-umask) 2>/dev/null
"$HN" clean >/dev/null
for f in r-umask/run.json r-umask/log.txt r-umask/rows.csv; do
  [[ $(stat -c %a "$f") == 644 ]] && ok || bad "$f has mode $(stat -c %a "$f") under umask 000"
done
mkdir r-planted
echo precious >target.txt
ln -s "$work/target.txt" r-planted/log.txt
expect_exit 2 "a planted log.txt link" -- "$HN" run ok.lua --out r-planted --quiet
expect_err "log.txt: it exists already" "the planted link is named"
[[ $(cat target.txt) == precious ]] && ok || bad "the run wrote through a planted link"
[[ ! -e r-planted/run.json ]] && ok || bad "a refused run left a run.json"
cat >rec2.lua <<'LUA'
local hn = require("hiernet")
local ok, err = pcall(hn.record, "victim", { "a" })
assert(not ok and err:find("already exists", 1, true), tostring(err))
LUA
mkdir r-csv
ln -s "$work/target.txt" r-csv/victim.csv
touch r-csv/placeholder
expect_exit 0 "a planted CSV link" -- "$HN" run rec2.lua --out r-csv --quiet
[[ $(cat target.txt) == precious ]] && ok || bad "a record wrote through a planted link"

# --- a scenario file name with shell and path characters ---
cp ok.lua 'we$(x) ird;name.lua'
expect_exit 0 "odd scenario name" -- "$HN" run 'we$(x) ird;name.lua' --quiet
[[ $(ls results | grep -c '^we--x--ird-name-') -eq 1 ]] && ok || bad "results name not made safe: $(ls results)"
report
