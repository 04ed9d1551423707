#!/usr/bin/env bash
# Compares rivet's active messages with raw UCX (ucx_perftest) in one run.
# Every rivet measurement is taken right beside the matching ucx_perftest
# one (alternating which goes first), and the ratio reported is the median
# over repetitions of those side-by-side ratios: on a shared machine whose
# speed drifts by 2-3x over minutes, that is what stays comparable.
#
#   bench/compare-ucx.sh [-r REPS] [-t "shm tcp"] [-b BUILD_DIR]
#
# For each transport (shm = UCX sm,self; tcp = UCX tcp,self on lo), and for
# REPS repetitions (default 3), it runs, alternating rivet and UCX with the
# two processes pinned to cores 0 and 1:
#   latency      rv-pingpong          vs ucp_am_lat   (8 B, 4 KiB; median)
#   message rate rv-am-bw             vs ucp_am_bw    (8, 64, 256, 4096 B)
#   bandwidth    rv-am-bw             vs ucp_am_bw    (64 KiB, 4 MiB)
# and writes bench/results/compare-ucx.csv with the columns
#   metric,transport,size,rivet,ucx,ratio
# (rivet and ucx are medians over the repetitions; ratio is the median of
# the per-repetition ratios rivet/ucx for rates, ucx/rivet for latency, so
# higher is better), every single run to
# bench/results/compare-ucx-runs.csv, and a plot of the ratios to
# bench/results/compare-ucx.png. With -s, it only summarizes the runs file
# of an earlier run again.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
build=$top/build
reps=3
transports="shm tcp"
summary_only=0
while getopts "r:t:b:sh" o; do
  case $o in
    s) summary_only=1 ;;
    r) reps=$OPTARG ;;
    t) transports=$OPTARG ;;
    b) build=$OPTARG ;;
    *) sed -n "2,22p" "$0"; exit 2 ;;
  esac
done

results=$here/results
mkdir -p "$results"
runs=$results/compare-ucx-runs.csv
csv=$results/compare-ucx.csv
[ $summary_only -eq 1 ] || echo "metric,transport,size,rep,impl,value" > "$runs"

command -v ucx_perftest > /dev/null || {
  echo "compare-ucx: ucx_perftest not found (Debian package ucx-utils)" >&2
  exit 1
}
[ -x "$build/bin/rv-pingpong" ] || {
  echo "compare-ucx: $build/bin/rv-pingpong not built; run make first" >&2
  exit 1
}

lat_sizes="8 4096"
rate_sizes="8 64 256 4096"
bw_sizes="65536 4194304"
port=$((20000 + RANDOM % 20000))

. "$here/ucx-perftest.sh"

iters() { # transport size kind -> iterations
  local tl=$1 size=$2 kind=$3
  if [ "$kind" = lat ]; then
    [ "$tl" = shm ] && echo 30000 || echo 10000
    return
  fi
  local budget=$((64 << 20)) max=600000
  [ "$tl" = tcp ] && budget=$((32 << 20)) max=100000
  local n=$((budget / size))
  [ $n -gt $max ] && n=$max
  [ $n -lt 500 ] && n=500
  echo $n
}


rivet() { # transport program args... -> CSV rows on stdout
  local tl=$1
  shift
  "$build/bin/rivetrun" --timeout 300 --no-prefix \
    -c "$top/configs/pingpong-$tl.yaml" "$@" --csv
}

record() { echo "$1,$2,$3,$4,$5,$6" >> "$runs"; }

# record_rate TRANSPORT SIZE REP IMPL MSGS_PER_S: a message rate in M/s up
# to 4 KiB, a bandwidth in MB/s (10^6 B) above.
record_rate() {
  local v
  if [ "$2" -le 4096 ]; then
    v=$(awk -v r="$5" 'BEGIN { printf "%.4f", r / 1e6 }')
    record msg_rate_mps "$1" "$2" "$3" "$4" "$v"
  else
    v=$(awk -v r="$5" -v s="$2" 'BEGIN { printf "%.1f", r * s / 1e6 }')
    record bandwidth_mbps "$1" "$2" "$3" "$4" "$v"
  fi
}

[ $summary_only -eq 1 ] && reps=$(awk -F, 'NR > 1 && $4 > m { m = $4 } END { print m + 0 }' "$runs")
# One measurement of one implementation: appends a row to the runs file.
measure() { # impl transport size rep kind
  local impl=$1 tl=$2 s=$3 rep=$4 kind=$5 n f
  n=$(iters "$tl" "$s" "$kind")
  if [ "$kind" = lat ]; then
    if [ "$impl" = ucx ]; then
      f=$(perftest "$tl" ucp_am_lat "$s" "$n")
      record latency_us "$tl" "$s" "$rep" ucx "$(echo "$f" | awk '{print $3}')"
    else
      rivet "$tl" "$build/bin/rv-pingpong" -s "$s" -n "$n" |
        awk -F, -v tl="$tl" -v rep="$rep" 'NR > 1 && NF >= 2 {
          printf "latency_us,%s,%s,%s,rivet,%s\n", tl, $1, rep, $2 }' >> "$runs"
    fi
  elif [ "$impl" = ucx ]; then
    f=$(perftest "$tl" ucp_am_bw "$s" "$n")
    record_rate "$tl" "$s" "$rep" ucx "$(echo "$f" | awk '{print $9}')"
  else
    f=$(rivet "$tl" "$build/bin/rv-am-bw" -s "$s" -n "$n")
    record_rate "$tl" "$s" "$rep" rivet \
      "$(echo "$f" | awk -F, 'NR > 1 && NF >= 2 { print $2 }')"
  fi
}

# Each rivet figure is taken right beside its UCX figure, in alternating
# order, so that the slow drifts of a shared machine cancel in the ratio.
[ $summary_only -eq 1 ] && reps=$(awk -F, 'NR > 1 && $4 > m { m = $4 } END { print m + 0 }' "$runs")
for rep in $(seq 1 "$reps"); do
  [ $summary_only -eq 1 ] && break
  order="ucx rivet"
  [ $((rep % 2)) -eq 0 ] && order="rivet ucx"
  for tl in $transports; do
    echo "== repetition $rep/$reps, $tl" >&2
    for s in $lat_sizes; do
      for impl in $order; do measure "$impl" "$tl" "$s" "$rep" lat; done
    done
    for s in $rate_sizes $bw_sizes; do
      for impl in $order; do measure "$impl" "$tl" "$s" "$rep" bw; done
    done
  done
done

# Medians and spreads (min-max) per metric, transport, size and impl.
summarize() {
  awk -F, -v order="latency_us msg_rate_mps bandwidth_mbps" '
    function median(list, n,   a, i, j, t) {
      n = split(list, a, " ")
      for (i = 2; i <= n; i++)            # insertion sort, numeric
        for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
          t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      lo = a[1]; hi = a[n]
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    NR > 1 && $6 != "" {
      k = $1 SUBSEP $2 SUBSEP $3
      if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
      v[k, $5] = v[k, $5] " " $6
      one[k, $4, $5] = $6
      if (!((k, $4) in rseen)) { rseen[k, $4] = 1; reps[k] = reps[k] " " $4 }
    }
    END {
      print "metric,transport,size,rivet,ucx,ratio" > csv
      printf "\n%-15s %-4s %8s %10s %21s %10s %21s %7s\n", "metric", "tl",
             "size", "rivet", "(min-max)", "ucx", "(min-max)", "ratio"
      nm = split(order, ms, " ")
      for (m = 1; m <= nm; m++)
        for (i = 1; i <= nk; i++) {
          split(keys[i], f, SUBSEP)
          if (f[1] != ms[m] || !((keys[i], "rivet") in v) ||
              !((keys[i], "ucx") in v))
            continue
          r = median(v[keys[i], "rivet"]); rlo = lo; rhi = hi
          u = median(v[keys[i], "ucx"]); ulo = lo; uhi = hi
          # the ratio: median over repetitions of each side-by-side pair
          pairs = ""
          nr = split(reps[keys[i]], rs, " ")
          for (j = 1; j <= nr; j++) {
            a = one[keys[i], rs[j], "rivet"] + 0
            b = one[keys[i], rs[j], "ucx"] + 0
            if (a > 0 && b > 0)
              pairs = pairs " " (f[1] == "latency_us" ? b / a : a / b)
          }
          ratio = pairs == "" ? "nan" : sprintf("%.3f", median(pairs))
          printf "%s,%s,%s,%g,%g,%s\n", f[1], f[2], f[3], r, u, ratio > csv
          printf "%-15s %-4s %8s %10g %21s %10g %21s %7s\n", f[1], f[2],
                 f[3], r, "(" rlo "-" rhi ")", u, "(" ulo "-" uhi ")", ratio
        }
    }' csv="$csv" "$runs"
}
summarize
echo
echo "medians of $reps repetitions; every run in $runs"
echo "$csv:"
cat "$csv"

if command -v gnuplot > /dev/null; then
  awk -F, 'NR > 1 { printf "\"%s %s %s\" %s\n", $1, $2, $3, $6 }' "$csv" \
    > "$results/compare-ucx.dat"
  gnuplot <<EOF
set terminal pngcairo size 1300,600 noenhanced
set output "$results/compare-ucx.png"
set title "rivet / raw UCX (ucx_perftest), same run; higher is better"
set style fill solid 0.6
set boxwidth 0.7
set yrange [0:*]
set xtics rotate by -40
set bmargin 11
set rmargin 20
set grid ytics
set arrow from graph 0, first 0.9 to graph 1, first 0.9 nohead dt 2 lc rgb "red"
set ylabel "ratio"
plot "$results/compare-ucx.dat" using 0:2:xtic(1) with boxes notitle
EOF
  rm -f "$results/compare-ucx.dat"
  echo "plot: $results/compare-ucx.png"
fi
