#!/usr/bin/env bash
# test_auto_dilation.sh — dilation = "auto" (auto_dilation.lua, backend none):
#   * a light run (one slow node, 60 small gradients 20 ms apart) keeps
#     dilation 1 exactly: run.json's dilation is {"mode": "auto", "value": 1}
#     with the probe's figures as the reason (the host kept up, or on a host
#     other programs keep busy, their load), no probe run, no warning;
#   * a starving run (8 x cores busy nodes) is measured, ends, and runs again
#     at a dilation > 1 and at most the CPU demand's (ceil(8 x 1.25) = 10):
#     the rerun's run.json says so and why, the probe's records are in
#     dilation-probe/ with status "probe", and the scenario saw that dilation;
#   * --dilation auto does the same from the command line, on the same
#     scenario with a network that names no dilation (from=cli), there with
#     --dilation-max 2: the rerun runs at 2 exactly and run.json's dilation
#     says "max": 2 and its reason says the need was cut to 2 (when the
#     scenario's run needed 4 or more); --dilation autox and --dilation-max
#     0, 1001, x, 2x are refused in one line (exit 2) before a results
#     directory exists.
# Exit 77 when other programs' load, not the run, starved the starving run
# (the probe says "others' load": nothing of the rerun can be checked then).
# Usage: test_auto_dilation.sh HIERNET SCENARIO
set -u
shopt -s extglob
here=$(cd "$(dirname "$0")" && pwd)
hiernet=$(realpath "$1") scenario=$(realpath "$2")
# shellcheck source=lib.sh
source "$here/lib.sh"
in_scratch_dir

dilation_of() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["dilation"]; print(d["mode"], d["value"], d["probe_s"] > 0); print(d["reason"])' "$1"; }

# A bad value: one line naming it, exit 2, no results directory.
expect_exit 2 "--dilation autox" -- "$hiernet" run "$scenario" --out bad --dilation autox
expect_err "hiernet: --dilation 'autox': expected a number from 1 to 1000 or auto" "--dilation autox"
[[ ! -e bad ]] && ok || bad "--dilation autox left a results directory"
for m in 0 1001 x 2x; do
  expect_exit 2 "--dilation-max $m" -- "$hiernet" run "$scenario" --out bad --dilation auto --dilation-max "$m"
  expect_err "hiernet: --dilation-max '$m': expected a number from 1 to 1000" "--dilation-max $m"
done
expect_exit 2 "--dilation 4 --dilation-max 2" -- "$hiernet" run "$scenario" --out bad --dilation 4 --dilation-max 2
expect_err "hiernet: --dilation-max '2' bounds --dilation auto, not a fixed --dilation '4'" "--dilation-max beside a fixed --dilation"
[[ ! -e bad ]] && ok || bad "a bad --dilation-max left a results directory"

# A light run: 1, exactly, decided by the probe.
expect_exit 0 "light run" -- "$hiernet" run "$scenario" --out light --set load=light
d=$(dilation_of light/run.json)
[[ $(head -n1 <<<"$d") == "auto 1 False" ]] && ok || bad "light run: run.json dilation $d"
[[ $(tail -n1 <<<"$d") == *"compute commands in"*@(the host keeps up|others\' load)* ]] && ok ||
  bad "light run: reason $(tail -n1 <<<"$d")"
expect_out "dilation 1" "light run"
expect_err "dilation auto: 1 (" "light run"
[[ ! -e light/dilation-probe ]] && ok || bad "light run: a probe run was made"
grep -q "warning" light/log.txt && bad "light run warned: $(grep warning light/log.txt)" || ok

# A starving run, named by the scenario and by --dilation auto.
for how in scenario cli; do
  args=(--out "starve-$how" --set load=starve)
  # from the command line with --dilation-max 2: the rerun at 2 exactly
  [[ $how == cli ]] && args+=(--dilation auto --dilation-max 2 --set from=cli)
  expect_exit 0 "starving run ($how)" -- "$hiernet" run "$scenario" "${args[@]}"
  d=$(dilation_of "starve-$how/run.json")
  # The premise: the run starves the host by itself. Beside other programs'
  # load its nice-10 workers get a few percent of the cores, which the probe
  # rightly calls others' load (dilation would not cure it).
  if [[ $(tail -n1 <<<"$d") == *"others' load"* ]]; then
    [[ $failed -gt 0 ]] && report
    echo "skipped: other programs' load starved the run ($how): $(tail -n1 <<<"$d")"
    exit 77
  fi
  read -r mode value probed <<<"$(head -n1 <<<"$d")"
  if [[ $mode == auto && $probed == True ]] && awk -v v="$value" 'BEGIN { exit !(v >= 2 && v <= 10) }'; then
    ok
  else
    bad "starving run ($how): run.json dilation $d (want auto, 2..10, probed)"
  fi
  [[ $(tail -n1 <<<"$d") == *"% starved of CPU"*"p95 needed"* ]] && ok ||
    bad "starving run ($how): reason $(tail -n1 <<<"$d")"
  expect_out "dilation $value" "starving run ($how): the rerun's network"
  expect_err "the scenario starts again at dilation $value" "starving run ($how)"
  grep -q '"status": "probe"' "starve-$how/dilation-probe/run.json" && ok ||
    bad "starving run ($how): no probe run.json in dilation-probe/"
  grep -q '"status": "completed"' "starve-$how/run.json" && ok || bad "starving run ($how): not completed"
  if [[ $how == cli ]]; then
    most=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["dilation"].get("max"))' "starve-$how/run.json")
    [[ $value == 2 && $most == 2 ]] && ok || bad "--dilation-max 2: dilation $value, run.json max $most"
    # The same load asked for 4 or more from the scenario: the reason
    # says it was cut, and from what.
    if [[ $need_scenario -ge 4 ]]; then
      [[ $(tail -n1 <<<"$d") == *"; cut to dilation_max 2 from the "*" it asked for"* ]] && ok ||
        bad "--dilation-max 2: the reason does not say it cut the need: $(tail -n1 <<<"$d")"
    fi
  else
    need_scenario=${value%.*}
  fi
done
report
