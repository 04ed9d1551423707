#!/usr/bin/env bash
# Rollouts per second of the distributed tree search on 11x11 Hex (Seriema,
# section 5.3.3 and its Fig. 3), for the configurations that fit this
# machine, beside a plain sequential UCT with the same playouts and no
# rivet calls (rivet-mcts --uct) in the same run.
#
#   bench/mcts-scaling.sh [-r REPS] [-n ROLLOUTS] [-b BUILD_DIR] [-s]
#
# Each configuration analyses the empty 11x11 board with ROLLOUTS rollouts
# (default 100,000; mcts.simulations_per_leaf 16, so 16 playouts each),
# REPS times (default 5), the configurations interleaved. Configurations:
# 1 worker (the framework), 1 process x 2 threads and 2 processes x 1
# thread, under trad and ovfl aggregation, with mcts.owner random and
# hash, mcts.remote_only off and on; and the sequential UCT. Every
# worker is pinned to a core of its own (job.placement core).
# Every run goes to bench/results/mcts-scaling-runs.csv, the medians to
# bench/results/mcts-scaling.csv with the columns
#   config,aggregation,owner,remote_only,workers,rollouts_per_s
# (config: PxT, or uct for the baseline), and a plot to
# bench/results/mcts-scaling.png. With -s it only summarizes an earlier
# runs file.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
median_awk=$(cat "$here/median.awk")
top=$(dirname "$here")
build=$top/build
reps=5
rollouts=100000
summary_only=0
while getopts "r:n:b:sh" o; do
  case $o in
    r) reps=$OPTARG ;;
    n) rollouts=$OPTARG ;;
    b) build=$OPTARG ;;
    s) summary_only=1 ;;
    *) sed -n "2,21p" "$0"; exit 2 ;;
  esac
done

results=$here/results
mkdir -p "$results"
runs=$results/mcts-scaling-runs.csv
csv=$results/mcts-scaling.csv
png=$results/mcts-scaling.png
fail() { echo "mcts-scaling: $*" >&2; exit 1; }

# config aggregation owner remote_only processes threads
configs="uct trad random false 1 1
1x1 trad random false 1 1
1x2 trad random false 1 2
1x2 trad random true 1 2
2x1 trad random false 2 1
2x1 trad random true 2 1
1x2 ovfl random false 1 2
2x1 ovfl random false 2 1
1x2 trad hash false 1 2
2x1 trad hash false 2 1
2x1 ovfl hash false 2 1"

run_one() {
  local config=$1 agg=$2 owner=$3 remote=$4 np=$5 nt=$6 extra=""
  [ "$config" = uct ] && extra=--uct
  RIVET_JOB_PROCESSES=$np RIVET_JOB_THREADS=$nt RIVET_AM_AGGREGATION=$agg \
  RIVET_MCTS_OWNER=$owner RIVET_MCTS_REMOTE_ONLY=$remote \
  RIVET_MCTS_SIMULATIONS_PER_LEAF=16 \
    timeout 300 "$build/bin/rivetrun" --timeout 280 \
    -c "$top/configs/mcts.yaml" "$build/bin/rivet-mcts" --size 11 \
    --rollouts "$rollouts" $extra 2>&1
}

if [ $summary_only -eq 0 ]; then
  [ -x "$build/bin/rivet-mcts" ] || fail "$build/bin/rivet-mcts not built"
  echo "rep,config,aggregation,owner,remote_only,workers,rollouts_per_s" > "$runs"
  for rep in $(seq 1 "$reps"); do
    while read -r config agg owner remote np nt; do
      out=$(run_one "$config" "$agg" "$owner" "$remote" "$np" "$nt") ||
        { echo "$out" | tail -20 >&2; fail "$config $agg $owner failed"; }
      rate=$(echo "$out" | sed -n 's/.* s: \([0-9]*\) rollouts\/s.*/\1/p')
      [ -n "$rate" ] || { echo "$out" >&2; fail "no rate from $config"; }
      echo "$rep,$config,$agg,$owner,$remote,$((np * nt)),$rate" >> "$runs"
      printf "  repetition %d: %-4s %-4s %-6s remote_only %-5s %8d rollouts/s\n" \
        "$rep" "$config" "$agg" "$owner" "$remote" "$rate"
    done <<< "$configs"
  done
fi
[ -s "$runs" ] || fail "no runs in $runs"

{
  echo "config,aggregation,owner,remote_only,workers,rollouts_per_s"
  tail -n +2 "$runs" | awk -F, "$median_awk"'
    {
      k = $2 "," $3 "," $4 "," $5 "," $6
      if (!(k in r)) order[++nk] = k
      r[k] = r[k] " " $7
    }
    END { for (i = 1; i <= nk; i++) printf "%s,%.0f\n", order[i], median(r[order[i]]) }'
} > "$csv"

rate() { # config aggregation owner remote_only
  awk -F, -v c="$1" -v a="$2" -v o="$3" -v r="$4" \
    '$1 == c && $2 == a && $3 == o && $4 == r { print $6 }' "$csv"
}
ratio() { awk -v x="$1" -v y="$2" 'BEGIN { printf "%.2f", (y > 0 ? x / y : 0) }'; }

echo
echo "rollouts/s on 11x11 Hex, 16 playouts per leaf (medians of $reps):"
awk -F, 'NR > 1 { printf "  %-4s %-4s %-6s remote_only %-5s %d workers %9d\n", $1, $2, $3, $4, $5, $6 }' "$csv"
uct=$(rate uct trad random false)
one=$(rate 1x1 trad random false)
echo
echo "targets (ratios in this run):"
for c in 1x2 2x1; do
  two=$(rate $c trad random false)
  echo "  2 workers ($c trad) / 1 worker: $(ratio "$two" "$one") (target >= 1.8)"
  on=$(rate $c trad random true)
  echo "  remote_only on / off ($c): $(ratio "$on" "$two") (target >= 0.90)"
done
echo "  1 worker / sequential UCT: $(ratio "$one" "$uct") (target >= 0.9)"

if command -v gnuplot > /dev/null; then
  awk -F, 'NR > 1 {
    label = ($1 == "uct") ? "UCT (no rivet)" : $1 " " $2 " " $3 ($4 == "true" ? " remote" : "")
    printf "\"%s\" %s\n", label, $6 / 1000
  }' "$csv" > "$results/mcts-scaling.dat"
  gnuplot <<EOF
set terminal pngcairo size 1000,560 font "sans,10"
set output "$png"
set title "Distributed MCTS on 11x11 Hex: rollouts per second (16 playouts per leaf)"
set ylabel "thousand rollouts / s"
set style fill solid 0.6 border -1
set boxwidth 0.7
set xtics rotate by -35 left
set yrange [0:*]
set grid ytics
unset key
plot "$results/mcts-scaling.dat" using 0:2:xtic(1) with boxes lc rgb "#3b6ea8"
EOF
  rm -f "$results/mcts-scaling.dat"
  echo "plot: $png"
fi
