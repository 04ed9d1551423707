#!/usr/bin/env bash
# The epoch manager's microbenchmarks (Dewan et al. Figs. 2-5) against
# processes x threads, each run beside liburcu (urcu-memb, one process
# with as many threads as the job has workers) in the same program run:
#   fig2  delete, try_reclaim every 1024 iterations
#   fig3  delete, try_reclaim every iteration
#   fig4  delete, reclamation only at the end (rv_epoch_clear), with 0, 50
#         and 100 % of the objects owned by other processes
#   fig5  read-only: pin/unpin
#
#   bench/epoch.sh [-r REPS] [-n ITERS] [-c "1x1 1x2 2x1 4x1"] [-b BUILD_DIR] [-s]
#
# Writes bench/results/epoch.csv with the columns
#   figure,workload,reclaim,remote_pct,procs,threads,ops,rivet_mops,urcu_mops,ratio
# (medians over repetitions; ratio = median of the per-run ratios), every
# run to bench/results/epoch-runs.csv, and bench/results/epoch.png (Mops/s
# against workers, one panel per figure). With -s, it only summarizes an
# earlier runs file. The machine has 2 cores: configurations with more
# workers than cores are oversubscribed (marked in the summary).
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init epoch
reps=3
iters=200000
configs="1x1 1x2 2x1 4x1"
summary_only=0
while getopts "r:n:c:b:sh" o; do
  case $o in
    r) reps=$OPTARG ;;
    n) iters=$OPTARG ;;
    c) configs=$OPTARG ;;
    b) build=$OPTARG ;;
    s) summary_only=1 ;;
    *) usage ;;
  esac
done


# figure|arguments
workloads="fig2|-m delete -r 1024
fig3|-m delete -r every
fig4|-m delete -r end -p 0
fig4|-m delete -r end -p 50
fig4|-m delete -r end -p 100
fig5|-m read"

if [ $summary_only -eq 0 ]; then
  [ -x "$build/bin/rv-epoch-bench" ] || fail "$build/bin/rv-epoch-bench not built"
  echo "figure,rep,workload,reclaim,remote_pct,procs,threads,ops,rivet_mops,urcu_mops,ratio" > "$runs"
  for rep in $(seq 1 "$reps"); do
    for cfg in $configs; do
      np=${cfg%x*}
      nt=${cfg#*x}
      echo "== repetition $rep/$reps, $np process(es) x $nt thread(s)"
      while IFS='|' read -r fig args; do
        # every-iteration runs are slow (a tenth of the iterations), pin/unpin
        # fast (fifty times as many)
        n=$iters
        [[ $args == *"-r every"* ]] && n=$((iters / 10))
        [[ $args == *"-m read"* ]] && n=$((iters * 50))
        # shellcheck disable=SC2086
        out=$(RIVET_JOB_THREADS=$nt timeout 600 "$build/bin/rivetrun" \
              --timeout 580 -n "$np" -c "$top/configs/pingpong-shm.yaml" \
              "$build/bin/rv-epoch-bench" $args -n "$n" --csv 2>&1) ||
          { echo "$out" | tail -20 >&2; fail "run failed: $fig $args, $cfg"; }
        row=$(echo "$out" | grep -E '^(read|delete),' | tail -1)
        [ -n "$row" ] || { echo "$out" >&2; fail "no result: $fig $args"; }
        echo "$fig,$rep,$row" >> "$runs"
        echo "  $fig $args: $row"
      done <<< "$workloads"
    done
  done
fi
[ -s "$runs" ] || fail "no runs in $runs"

# Medians per (figure, workload, reclaim, remote, procs, threads).
{
  echo "figure,workload,reclaim,remote_pct,procs,threads,ops,rivet_mops,urcu_mops,ratio"
  tail -n +2 "$runs" | sort -t, -k1,1 -k3,7 | awk -F, "$median_awk"'
    {
      k = $1 "," $3 "," $4 "," $5 "," $6 "," $7 "," $8
      if (!(k in r)) order[++nk] = k
      r[k] = r[k] " " $9; u[k] = u[k] " " $10; q[k] = q[k] " " $11
    }
    END {
      for (i = 1; i <= nk; i++) {
        k = order[i]
        printf "%s,%.3f,%.3f,%.3f\n", k, median(r[k]), median(u[k]), median(q[k])
      }
    }'
} > "$csv"

echo
echo "rivet / urcu (median ratio of side-by-side runs; * = more workers than cores)"
ncores=$(nproc)
awk -F, -v cores="$ncores" 'NR > 1 {
  w = $5 * $6
  printf "  %-5s %-6s reclaim %-5s remote %3s%%  %dx%d%s  rivet %8.2f  urcu %8.2f Mops/s  ratio %.2f\n",
    $1, $2, $3, $4, $5, $6, (w > cores ? "*" : " "), $8, $9, $10
}' "$csv"

if command -v gnuplot > /dev/null; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for fig in fig2 fig3 fig4 fig5; do
    awk -F, -v f="$fig" 'NR > 1 && $1 == f {
      print $5 * 100 + $6, $5 "x" $6, $8, $9 > ("'"$tmp"'/" f "-" $4 ".dat") }' "$csv"
  done
  {
    echo "set terminal pngcairo size 1400,1000 font ',10'"
    echo "set output '$png'"
    echo "set multiplot layout 2,2 title 'rivet epoch manager vs liburcu (urcu-memb), shm, Mops/s'"
    echo "set termoption noenhanced"
    echo "set xlabel 'processes x threads'; set ylabel 'Mops/s (job total)'"
    echo "set logscale y; set grid; set key top left"
    for fig in fig2 fig3 fig4 fig5; do
      case $fig in
        fig2) title="Fig. 2: delete, try_reclaim every 1024" ;;
        fig3) title="Fig. 3: delete, try_reclaim every iteration" ;;
        fig4) title="Fig. 4: delete, reclaim at the end" ;;
        fig5) title="Fig. 5: read-only (pin/unpin)" ;;
      esac
      plots=""
      for f in "$tmp/$fig"-*.dat; do
        [ -e "$f" ] || continue
        pct=${f##*-}; pct=${pct%.dat}
        sort -n "$f" -o "$f"
        plots="$plots${plots:+, }'$f' using 0:3:xtic(2) with linespoints title 'rivet, ${pct}% remote', '$f' using 0:4 with lines dashtype 2 title 'urcu, ${pct}% remote'"
      done
      echo "set title '$title'"
      [ -n "$plots" ] && echo "plot $plots"
    done
    echo "unset multiplot"
  } > "$tmp/plot.gp"
  gnuplot "$tmp/plot.gp" && echo "plot: $png"
fi
echo "csv: $csv"
