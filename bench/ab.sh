#!/usr/bin/env bash
# Two builds of rivet measured against each other in one sitting: a bench
# script run with -b BUILD_A and with -b BUILD_B, alternating which goes
# first, ROUNDS times, so that the machine's drift over minutes falls on
# both alike. Each run's CSV (the script's own, bench/results/CSV.csv) is
# kept with its build and round; the medians of each build, their ratio
# and each build's run-to-run spread go to bench/results/ab-NAME.csv.
#
#   bench/ab.sh -A BUILD_A -B BUILD_B -c CSV -k KEYS -v COL [-n ROUNDS]
#               [-N NAME] -- SCRIPT [ARGS...]
#
#   -A, -B  the two builds (e.g. one of the commit before a change, made
#           with `git worktree add`, and build/)
#   -c      the CSV the script writes, without .csv (seriema-table2-ratios)
#   -k      its key columns, comma-separated numbers (1,2,3)
#   -v      the column compared (a ratio to the baseline of the same run,
#           where the script writes one: that cancels the drift too)
#   -n      rounds (default 3)        -N  the results' name (default CSV)
#   -s      no runs: the summary again from ab-NAME-runs.csv
#   -d TPL  compare each value divided by the value of key TPL of the same
#           run (%1 in TPL: the key's first column), e.g. a baseline run
#           in the same script run: -d "%1/bale/Conveyor/2x1/shm" for
#           bale.sh; the machine's drift between runs then cancels
#
# Writes bench/results/ab-NAME-runs.csv (build,round,KEY...,value) and
# bench/results/ab-NAME.csv with the columns
#   key,a_median,b_median,b_over_a,a_spread,b_spread
# (key: the key columns joined by '/'; spread: (max - min) / median over
# the rounds). The script's own CSVs are left as the last run wrote them;
# restore the committed ones with git if the runs were not meant to
# replace them.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init ab
rounds=3
a="" b="" csv="" keys="" col="" name="" summary_only=0 denom=""
while getopts "A:B:c:k:v:n:N:sd:h" o; do
  case $o in
    A) a=$OPTARG ;;
    B) b=$OPTARG ;;
    c) csv=$OPTARG ;;
    k) keys=$OPTARG ;;
    v) col=$OPTARG ;;
    n) rounds=$OPTARG ;;
    N) name=$OPTARG ;;
    s) summary_only=1 ;;
    d) denom=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ "${1:-}" = -- ] && shift
name=${name:-$csv}
runs=$results/ab-$name-runs.csv
out=$results/ab-$name.csv
if [ $summary_only -eq 0 ]; then
[ -n "$a" ] && [ -n "$b" ] && [ -n "$csv" ] && [ -n "$keys" ] && [ -n "$col" ] &&
  [ $# -ge 1 ] || usage

echo "build,round,key,value" >"$runs"
for r in $(seq 1 "$rounds"); do
  order="A B"
  [ $((r % 2)) -eq 0 ] && order="B A"
  for which in $order; do
    dir=$a
    [ "$which" = B ] && dir=$b
    echo "ab: round $r, build $which ($dir): $*" >&2
    "$@" -b "$dir" >"$results/.ab-$name.log" 2>&1 ||
      { echo "ab: $* -b $dir failed:" >&2; tail -20 "$results/.ab-$name.log" >&2; exit 1; }
    tail -n +2 "$results/$csv.csv" |
      awk -F, -v k="$keys" -v c="$col" -v w="$which" -v r="$r" '
        BEGIN { nk = split(k, ks, ",") }
        { key = $ks[1]; for (i = 2; i <= nk; i++) key = key "/" $ks[i]
          print w "," r "," key "," $c }' >>"$runs"
  done
done
rm -f "$results/.ab-$name.log"
fi

echo "key,a_median,b_median,b_over_a,a_spread,b_spread" >"$out"
# With -d, each value over its run's denominator row (rows without one
# are left out).
tail -n +2 "$runs" | awk -F, -v tpl="$denom" '
  { val[$1, $2, $3] = $4; row[NR] = $0 }
  END { for (i = 1; i <= NR; i++) { split(row[i], f, ",")
          if (tpl == "") { print row[i]; continue }
          split(f[3], k, "/"); d = tpl; gsub(/%1/, k[1], d)
          if (((f[1], f[2], d) in val) && val[f[1], f[2], d] > 0)
            print f[1] "," f[2] "," f[3] "," f[4] / val[f[1], f[2], d] } }' |
  awk -F, "$median_awk"'
  { v[$1, $3] = v[$1, $3] " " $4
    if (!($3 in seen)) { seen[$3] = 1; order[n++] = $3 } }
  function spread(s,   x, m, i, lo, hi) {
    m = split(s, x, " "); lo = hi = x[1]
    for (i = 2; i <= m; i++) { if (x[i] < lo) lo = x[i]; if (x[i] > hi) hi = x[i] }
    return median(s) > 0 ? (hi - lo) / median(s) : 0 }
  END { for (i = 0; i < n; i++) { k = order[i]; ma = median(v["A", k]); mb = median(v["B", k])
        printf "%s,%g,%g,%.3f,%.3f,%.3f\n", k, ma, mb, (ma > 0 ? mb / ma : 0),
          spread(v["A", k]), spread(v["B", k]) } }' >>"$out"
column -s, -t "$out"
echo "wrote $out" >&2
