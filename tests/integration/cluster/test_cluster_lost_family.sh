#!/usr/bin/env bash
# test_cluster_lost_family.sh — a machine lost mid-training, one algorithm
# family per run (label netns, serial; issue 20: "a machine that dies
# mid-run ... fails the run in one line naming it, or, for asynchronous
# algorithms, is handled like a killed node"; docs/algorithms.md, "Faults"
# says what each family does). lost_family.lua places the family on the
# three machines of the namespace cluster, m3 holding the node the family
# cannot do without or several of its workers; m3's agent is SIGKILLed
# once the training made 20 steps:
#   ps      the server is on m3: no survivor holds the model, so even ASP
#           fails, in one line naming the server and m3
#   easgd   the centre is on m3: fails as ps, naming the centre and m3
#   dpsgd   w4 and w5 on m3: a step waits for every neighbour's model, so
#           the run fails in one line naming w4 or w5 and m3
#   hier    edge e2 and its terminal t3 are on m3, its terminal t4 on m2:
#           the training goes on with e1's terminals; t3 and t4 make no
#           step after the loss, t1 and t2 do; log.txt says t4 lost e2
#           with m3
#   gossip  w4 and w5 on m3: the ring's survivors go on; w4 and w5 make no
#           step after the loss
#   ring    all-reduce ring, on_failure = "drop", w4 and w5 on m3: the
#           survivors go on and end on one model (w1's, element for element)
# Every run stops its network and, after `hiernet clean --hosts`, leaves
# nothing on any machine.
# Usage: test_cluster_lost_family.sh HIERNET FAMILY
set -uo pipefail
HN=$(realpath "$1")
family=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
source "$here/../../lib/cluster_lost.sh"

cluster_spread_up 3
cluster_lost_run "$family" "$here/lost_family.lua" --set family="$family" --set hosts="$D/hosts" \
  --set up="$D/$family.up"
out=$D/$family.out
grep -E "^(lost|after|model|result) " "$out" | sed 's/^/  /'

# The survivors went on: exit 0, every one made steps after the note, the
# workers in $1 (a list) none; the nodes in $2 heard lost with m3.
went_on() {
  local stopped=$1 on_m3=$2
  expect_eq "$family: the run ends normally (exit 0)" "$RC" 0
  grep -q "^result steps " "$out" || fail "$family: no result line"
  [[ $RC -eq 0 ]] || { tail -n 5 "$D/$family.err"; tail -n 15 "$D/r-$family/log.txt"; }
  local name n
  for name in $(sed -n 's/^after \([^ ]*\) .*/\1/p' "$out"); do
    n=$(sed -n "s/^after $name //p" "$out")
    if [[ " $stopped " == *" $name "* ]]; then
      expect_eq "$family: $name's steps after the loss" "$n" 0
    else
      ((n > 0)) && pass "$family: survivor $name made $n steps after the loss" ||
        fail "$family: survivor $name made $n steps after the loss"
    fi
  done
  for name in $on_m3; do
    grep -q "^lost $name machine 'm3'" "$out" && pass "$family: $name heard lost with m3" ||
      fail "$family: no kill of $name naming m3"
  done
}

# The run failed, its error one line (the scenario's, one of D/FAMILY.err)
# matching the pattern $1.
failed_naming() {
  [[ $RC -ne 0 ]] && pass "$family: the run fails (exit $RC)" || fail "$family: exit 0"
  local line
  line=$(grep -E "lost_family.lua:[0-9]+: " "$D/$family.err" | head -n1)
  grep -qE "$1" <<<"$line" && pass "$family: one line names it: ${line#*lost_family.lua:}" ||
    fail "$family: no line matching \"$1\": $(tail -n3 "$D/$family.err")"
}

case $family in
  ps) failed_naming "server ps was lost: machine 'm3'" ;;
  easgd) failed_naming "centre c was lost: machine 'm3'" ;;
  dpsgd) failed_naming "worker w[45] was lost: machine 'm3'" ;;
  hier)
    went_on "t3 t4" "e2 t3"
    line=$(grep -F "worker t4 lost e2: machine 'm3'" "$D/r-hier/log.txt" | head -n1)
    grep -q "training goes on without it" <<<"$line" && pass "hier: log.txt: ${line#*] }" ||
      fail "hier: log.txt has no line of t4 away with e2 lost on m3"
    ;;
  gossip) went_on "w4 w5" "w4 w5" ;;
  ring)
    went_on "w4 w5" "w4 w5"
    for w in w2 w3; do
      expect_eq "ring: $w ends on w1's model" "$(grep "^model $w " "$out")" "model $w same"
    done
    ;;
  *) fail "unknown family '$family'" ;;
esac
cluster_lost_clean "$family"

cluster_down_checked cluster_down
checks_exit
