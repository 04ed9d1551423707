#!/usr/bin/env bash
# Playing strength of the distributed search (2 workers) against the plain
# sequential UCT with the same playouts (rv-mcts-match): G games of 7x7
# Hex in pairs from one random opening each (one stone per side, kept when
# a sequential UCT finds it balanced; colours swapped within the pair),
# (a) at equal rollouts per move and (b) at equal wall time per move, for
# each time given.
#
#   bench/mcts-strength.sh [-g GAMES] [-n ROLLOUTS] [-t MS[,MS...]]
#                          [-x GAMES:MS] [-b BUILD_DIR] [-P PEERS_DIR] [-a]
#
# What each engine starts from: (a) at equal rollouts both search every
# move from a fresh tree (the distributed engine sets the position,
# reclaiming the previous move's tree; the sequential UCT makes a tree and
# frees it); (b) at equal time both keep the subtree of the moves played,
# their own and the opponent's (rv_mcts_play; rv_mcts_uct_tree_play), from the
# first move of each game. In both, an engine's clock runs over its whole
# move: the opponent's move played in its tree (or a new game's position
# set, the old tree reclaimed), the search, and its own move played, the
# rest of the tree reclaimed.
#
# Defaults: 200 games, 5,000 rollouts per move (a), 2, 5 and 20 ms
# per move (b); -n 0 leaves out (a), -t "" leaves out (b). -x GAMES:MS
# adds one more run of (b), e.g. -x 1000:2 for 1,000 games at 2 ms. The
# job of configs/mcts.yaml (2 processes x 1 thread, pinned) with calls
# sent at once (am.aggregation: none) and 8 rollouts in flight per worker:
# a search of a few hundred rollouts loses strength to the selections
# running in parallel, and 8 unbatched keep most of the rollout rate.
# Writes bench/results/mcts-strength.csv (-a: adds to it) with the columns
#   mode,games,distributed_wins,win_rate,ci_low,ci_high,rollouts_distributed,rollouts_uct,ms_per_move,ms_distributed,ms_uct,state,machine
# (a 95 % Wilson interval of the distributed engine's win rate, each
# engine's rollouts and milliseconds per move averaged over the games, the
# machine's state over the run and lscpu's model name) and every game's
# result to bench/results/mcts-strength-games.txt. -P PEERS_DIR (or
# $PEERS_DIR): the folder holding the machine-state probe c2c-probe.c,
# run before and after each run (bench/machine-state.sh); its figures go
# to bench/results/mcts-strength-state.csv. Without it the state is
# "unprobed".
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init mcts-strength
. "$here/machine-state.sh"
games=200
rollouts=5000
ms=2,5,20
extra=""
peers=${PEERS_DIR:-}
append=0
while getopts "g:n:t:x:b:P:ah" o; do
  case $o in
    g) games=$OPTARG ;;
    n) rollouts=$OPTARG ;;
    t) ms=$OPTARG ;;
    x) extra=$OPTARG ;;
    b) build=$OPTARG ;;
    P) peers=$OPTARG ;;
    a) append=1 ;;
    *) usage ;;
  esac
done
log=$results/mcts-strength-games.txt
states=$results/mcts-strength-state.csv
header="mode,games,distributed_wins,win_rate,ci_low,ci_high,rollouts_distributed,rollouts_uct,ms_per_move,ms_distributed,ms_uct,state,machine"
[ -x "$build/bin/rv-mcts-match" ] || fail "$build/bin/rv-mcts-match not built"
[[ -z "$extra" || "$extra" =~ ^[0-9]+:[0-9.]+$ ]] || fail "-x wants GAMES:MS"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machine_probe_init "$peers" "$tmp" || exit 1
machine=$(machine_model)

# The runs: GAMES and the mode's options of rv-mcts-match, one per line.
runs() {
  [ "$rollouts" = 0 ] || echo "$games --rollouts $rollouts"
  local t
  for t in ${ms//,/ }; do echo "$games --ms $t"; done
  [ -z "$extra" ] || echo "${extra%%:*} --ms ${extra#*:}"
}

match() { # GAMES MODE VALUE
  RIVET_AM_AGGREGATION=none RIVET_MCTS_INFLIGHT=8 \
  timeout 14400 "$build/bin/rivetrun" --timeout 14000 \
    -c "$top/configs/mcts.yaml" "$build/bin/rv-mcts-match" \
    --games "$1" --size 7 "$2" "$3" 2>&1
}

if [ $append -eq 0 ] || [ ! -s "$csv" ]; then
  : > "$log"
  echo "$header" > "$csv"
  echo "mode,games,ms_per_move,when,$machine_state_header" > "$states"
fi
[ "$(head -1 "$csv")" = "$header" ] ||
  fail "cannot add to $csv: its columns are not $header"
[ -s "$states" ] || echo "mode,games,ms_per_move,when,$machine_state_header" > "$states"
while read -r n mode value; do
  [ -n "$n" ] || continue
  label="equal_rollouts,$n,0"
  [ "$mode" = --rollouts ] || label="equal_time,$n,$value"
  echo "== rv-mcts-match --games $n $mode $value" | tee -a "$log"
  s0=$(machine_probe "$states" "$label,before")
  out=$(match "$n" "$mode" "$value") ||
    { echo "$out" | tail -20 >&2; fail "$mode $value failed"; }
  st=$(machine_state_of "$s0" "$(machine_probe "$states" "$label,after")")
  echo "$out" >> "$log"
  row=$(echo "$out" | grep -E '^equal_(rollouts|time),')
  [ -n "$row" ] || { echo "$out" | tail >&2; fail "no result from $mode $value"; }
  echo "$row,$st,$machine" >> "$csv"
  echo "$out" | grep -E '^(calibration|per move)' || true
  echo "machine state: $st"
done <<< "$(runs)"

echo
echo "the distributed engine (2 workers) against the sequential UCT, 7x7 Hex ($machine):"
awk -F, 'NR > 1 {
  printf "  %-14s %3s ms %d games: %d won, %.1f %% (95 %% interval %.1f-%.1f %%), per move %d vs %d rollouts, %.2f vs %.2f ms, %s\n",
    $1, $9, $2, $3, 100 * $4, 100 * $5, 100 * $6, $7, $8, $10, $11, $12
}' "$csv"
echo "targets: equal rollouts, 50 % inside the interval; equal time, the interval above 50 %"
