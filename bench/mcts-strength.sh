#!/usr/bin/env bash
# Playing strength of the distributed search (2 workers) against the plain
# sequential UCT with the same playouts (rv-mcts-match): G games of 7x7
# Hex in pairs from one random opening each (one stone per side, kept when
# a sequential UCT finds it balanced; colours swapped within the pair),
# (a) at equal rollouts per move, each engine searching from a
# fresh tree, and (b) at equal wall time per move, for each time given,
# the distributed engine keeping its subtree between moves.
#
#   bench/mcts-strength.sh [-g GAMES] [-n ROLLOUTS] [-t MS[,MS...]] [-b BUILD_DIR]
#
# Defaults: 200 games, 5,000 rollouts per move (a), 2, 5 and 20 ms
# per move (b); the job of configs/mcts.yaml (2 processes x 1 thread,
# pinned) with calls sent at once (am.aggregation: none) and 8 rollouts in
# flight per worker. A search of a few hundred rollouts loses strength to
# the selections running in parallel: with the job file's 32 in flight
# per worker and trad batching, the distributed engine won 47 % of 400
# games at equal rollouts (2,500), against 51.5 % with 4 in flight, while
# 8 in flight without batching keeps 93 % of the rollout rate.
# Writes bench/results/mcts-strength.csv with the columns
#   mode,games,distributed_wins,win_rate,ci_low,ci_high,rollouts_distributed,rollouts_uct,ms_per_move,ms_distributed,ms_uct
# (a 95 % Wilson interval of the distributed engine's win rate, and each
# engine's rollouts and milliseconds per move averaged over the games) and
# every game's result to bench/results/mcts-strength-games.txt.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
build=$top/build
games=200
rollouts=5000
ms=2,5,20
while getopts "g:n:t:b:h" o; do
  case $o in
    g) games=$OPTARG ;;
    n) rollouts=$OPTARG ;;
    t) ms=$OPTARG ;;
    b) build=$OPTARG ;;
    *) sed -n "2,24p" "$0"; exit 2 ;;
  esac
done
results=$here/results
mkdir -p "$results"
csv=$results/mcts-strength.csv
log=$results/mcts-strength-games.txt
fail() { echo "mcts-strength: $*" >&2; exit 1; }
[ -x "$build/bin/rv-mcts-match" ] || fail "$build/bin/rv-mcts-match not built"

match() {
  RIVET_AM_AGGREGATION=none RIVET_MCTS_INFLIGHT=8 \
  timeout 3600 "$build/bin/rivetrun" --timeout 3500 \
    -c "$top/configs/mcts.yaml" "$build/bin/rv-mcts-match" \
    --games "$games" --size 7 "$@" 2>&1
}

: > "$log"
echo "mode,games,distributed_wins,win_rate,ci_low,ci_high,rollouts_distributed,rollouts_uct,ms_per_move,ms_distributed,ms_uct" > "$csv"
for mode in "--rollouts $rollouts" $(echo "$ms" | tr , "\n" | sed "s/^/--ms=/"); do
  mode=${mode/--ms=/--ms }
  echo "== rv-mcts-match $mode" | tee -a "$log"
  out=$(match $mode) || { echo "$out" | tail -20 >&2; fail "$mode failed"; }
  echo "$out" >> "$log"
  row=$(echo "$out" | grep -E '^equal_(rollouts|time),')
  [ -n "$row" ] || { echo "$out" | tail >&2; fail "no result from $mode"; }
  echo "$row" >> "$csv"
  echo "$out" | grep -E '^(calibration|per move)' || true
done

echo
echo "the distributed engine (2 workers) against the sequential UCT, 7x7 Hex:"
awk -F, 'NR > 1 {
  printf "  %-14s %3s ms %d games: %d won, %.1f %% (95 %% interval %.1f-%.1f %%), per move %d vs %d rollouts, %.2f vs %.2f ms\n",
    $1, $9, $2, $3, 100 * $4, 100 * $5, 100 * $6, $7, $8, $10, $11
}' "$csv"
echo "targets: equal rollouts, 50 % inside the interval; equal time, the interval above 50 %"
