#!/usr/bin/env bash
# test_cluster_agent_parts.sh — one network on two machines of the
# namespace cluster, each part built by a real `hiernet agent` over SSH
# and its peers driven only through the agents' relays (label netns;
# issue 20):
#   - hn-part-make encodes h1 - s1 on m1 and h2 on m2 (the link s1 - h2
#     cut: VXLAN);
#   - hn-agent-parts starts the agents (ssh from m1 to m1 and to m2),
#     builds both parts at once, gives the peers the data secret and h1
#     h2's address through `call` relays, makes a tensor on h1, sends it to
#     h2 across the machines (peer to peer over the VXLAN link) and reads
#     it back on h2 exactly; tears both down, each agent exiting 0;
#   - then nothing is left: no registry entry on either machine, no cgroup,
#     no process in the machines but their holders and sshd.
# Usage: test_cluster_agent_parts.sh HN_PART_MAKE HN_AGENT_PARTS HIERNET
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../../lib/cluster.sh"
source "$here/../../lib/checks.sh"
MAKE=$(realpath "$1")
DRIVE=$(realpath "$2")
HN=$(realpath "$3")
RUN=agentparts$$

cluster_require
cluster_up 2 || { echo "FAIL: cluster_up 2"; exit 1; }
dir=$CLUSTER_DIR/agentparts
mkdir -p "$dir"
"$MAKE" "$dir" "$RUN" "$((RANDOM * 256 + 1))" 20000000 >/dev/null || { echo "FAIL: hn-part-make"; exit 1; }

# The controller's end: ssh from m1, as agent_client.c starts an agent.
for i in 1 2; do
  printf '#!/bin/sh\nexec nsenter -t %s -n -u -m -- ssh -F %s m%s %s agent --machine m%s --controller %s --idle-timeout 60\n' \
    "${CLUSTER_HOLDERS[1]}" "$CLUSTER_DIR/ssh_config" "$i" "$HN" "$i" "$(cluster_addr 1)" >"$dir/agent$i"
  chmod +x "$dir/agent$i"
done

out=$("$DRIVE" "$dir/m1.part" "$dir/m2.part" "$dir/agent1" "$dir/agent2" 2>"$dir/err")
rc=$?
grep -v '^registry ' <<<"$out"
expect_eq "hn-agent-parts passed" "$rc" 0
((rc == 0)) || sed 's/^/  stderr: /' "$dir/err"
expect_eq "the parts' registry entries were named by run and machine" \
  "$(awk '$1 == "registry" {print $2, $3}' <<<"$out" | tr '\n' ' ')" "m1 $RUN-m1 m2 $RUN-m2 "

for i in 1 2; do
  expect_eq "m$i's registry is empty" "$(cluster_exec "$i" ls /run/hiernet 2>/dev/null)" ""
done
expect_eq "no cgroup is left" "$(find /sys/fs/cgroup -maxdepth 3 -type d -name "hiernet-$RUN-*" 2>/dev/null)" ""
for _ in $(seq 50); do
  rest=$(cluster_procs | grep -vxF -f <(printf '%s\n' "${CLUSTER_HOLDERS[@]}" "${CLUSTER_SSHD[@]}"))
  [[ -z $rest ]] && break
  sleep 0.1
done
expect_eq "only the machines' holders and sshd are left in them" "$rest" ""

checks_exit
