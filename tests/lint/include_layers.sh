#!/usr/bin/env bash
# include_layers.sh SOURCE_DIR — the lint test of the C include graph: every
# quoted #include of a C/CUDA source outside tests/ (git ls-files) must point
# into a folder that the including folder may use (the layers of
# docs/design-notes.md, "Source layout"). An arrow that runs back up fails,
# naming file:line and the arrow, unless it is one of the known exceptions
# listed below; an exception that no longer occurs fails too, so the list
# only shrinks. Lua's and netlink's headers (angle brackets) only in the
# folders that own them. Exit 77 outside a git checkout.
set -uo pipefail
root=${1:?usage: include_layers.sh SOURCE_DIR}
cd "$root" || exit 1

# Which top-level folder may include which (itself always). Bottom up:
# common; proto and kernels over common; topo (the network model) over
# proto; emu (the Linux emulation backend) over topo; peer over proto and
# kernels; controller over emu and kernels (base only: devices, datasets);
# lua, the scripting face, over the controller; app (the hiernet program)
# over lua; tools (benches) over anything below lua.
declare -A allowed=(
  [common]=""
  [proto]="common"
  [kernels]="common"
  [topo]="common proto"
  [emu]="common proto topo"
  [peer]="common proto kernels"
  [controller]="common proto kernels topo emu"
  [lua]="common proto kernels topo emu controller"
  [app]="common proto kernels topo emu controller lua"
  [tools]="common proto kernels topo emu peer controller"
  [cmake]="common"
)

# Arrows that run back up and are tolerated, one "file -> included" per
# line: none since the shared wire names moved to proto/ and the program's
# entry points to app/ (issue 19). A new arrow back up fails; it does not
# join this list.
declare -A exceptions=()

# Headers generated into the build tree (cmake/version.h.in).
generated=" hiernet_version.h "

if ! files=$(git ls-files -- '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null) || [[ -z $files ]]; then
  echo "SKIP: not a git checkout: no list of sources"
  exit 77
fi

bad=0
n=0
# resolve FILE INCLUDE: the repository path the include names, as the
# compiler finds it (the file's folder first, then the source root), or
# nothing when it is in neither.
# Sets target; no subshells, which cost minutes on a loaded machine.
resolve() {
  local dir=${1%/*}
  target=""
  if [[ -f $dir/$2 ]]; then
    target=$dir/$2
    # "../x.h" from a subfolder: drop each "folder/.." pair.
    while [[ $target =~ ^(.*/)?[^/.][^/]*/\.\./(.*)$ ]]; do
      target=${BASH_REMATCH[1]}${BASH_REMATCH[2]}
    done
  elif [[ -f $2 ]]; then
    target=$2
  fi
}
# One awk over all sources lists "file:line:include"; the loop forks nothing.
mapfile -t sources < <(grep -v '^tests/' <<<"$files")
while IFS=: read -r f line inc; do
  ((n++))
  from=${f%%/*}
  if [[ -z ${allowed[$from]+set} ]]; then
    echo "$f: folder '$from' has no layer in include_layers.sh"
    bad=1
    continue
  fi
  resolve "$f" "$inc"
  if [[ -z $target ]]; then
    [[ $generated == *" $inc "* ]] && continue
    echo "$f:$line: #include \"$inc\" names no file of the repository"
    bad=1
    continue
  fi
  to=${target%%/*}
  [[ $to == "$from" || " ${allowed[$from]} " == *" $to "* ]] && continue
  arrow="$f -> $target"
  if [[ -n ${exceptions[$arrow]+set} ]]; then
    exceptions[$arrow]=seen
    continue
  fi
  echo "$f:$line: $from may not include $to (\"$inc\"): the arrow runs back up"
  bad=1
done < <(awk 'match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]+"/) {
                inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
                print FILENAME ":" FNR ":" inc }' "${sources[@]}")

# System headers of one layer: Lua's C API only in lua/ (the scripting
# face) and app/ (the scenario runner, which opens the Lua state); netlink
# only in emu/ (the Linux emulation backend) and tools/ (the benchmark of
# netlink's own floor).
while IFS=: read -r f line inc; do
  case $inc in
    lua.h | lauxlib.h | lualib.h | luaconf.h) owners="lua app" ;;
    linux/netlink.h | linux/rtnetlink.h | linux/genetlink.h | linux/if_link.h | linux/pkt_sched.h | libmnl/*)
      owners="emu tools" ;;
    *) continue ;;
  esac
  [[ " $owners " == *" ${f%%/*} "* ]] && continue
  echo "$f:$line: #include <$inc> outside ${owners// /\/, }/"
  bad=1
done < <(awk 'match($0, /^[ \t]*#[ \t]*include[ \t]*<[^>]+>/) {
                inc = $0; sub(/^[^<]*</, "", inc); sub(/>.*$/, "", inc)
                print FILENAME ":" FNR ":" inc }' "${sources[@]}")

for arrow in "${!exceptions[@]}"; do
  if [[ ${exceptions[$arrow]} == unseen ]]; then
    echo "exception '$arrow' no longer occurs: remove it from include_layers.sh"
    bad=1
  fi
done

nexc=${#exceptions[@]}
if ((bad)); then
  echo "include layers: failed ($n includes checked)"
  exit 1
fi
echo "include layers: $n includes checked, $nexc known exceptions, no new arrow back up"
