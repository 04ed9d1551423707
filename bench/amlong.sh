#!/usr/bin/env bash
# AM Long (rv_put_handler) under its two protocols, GASNet testam's "G"
# pattern: request + reply ping-pong of 0 B - 1 MiB (powers of two), over
# UCX shm and tcp, the two protocols alternating side by side in each
# repetition (the machine's speed drifts; medians over repetitions).
#
#   bench/amlong.sh [-r REPS] [-t "shm tcp"] [-b BUILD_DIR] [-s]
#
# Writes bench/results/amlong-pingpong.csv with the columns
#   protocol,transport,size,bw_mb_per_s,rtt_us
# (protocol reassembly | put_sync_send; medians), every run to
# bench/results/amlong-pingpong-runs.csv, and a plot of bandwidth and
# round-trip time against size to bench/results/amlong-pingpong.png.
# It prints reassembly/put_sync_send bandwidth per size (target: >= 1.3 at
# 4 KiB over tcp, and never below 1). With -s, it only summarizes an
# earlier runs file.
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
    *) sed -n "2,17p" "$0"; exit 2 ;;
  esac
done

results=$here/results
mkdir -p "$results"
runs=$results/amlong-pingpong-runs.csv
csv=$results/amlong-pingpong.csv
png=$results/amlong-pingpong.png
protocols="reassembly put_sync_send"

fail() { echo "amlong: $*" >&2; exit 1; }

if [ $summary_only -eq 0 ]; then
  [ -x "$build/bin/rv-amlong" ] || fail "$build/bin/rv-amlong not built"
  echo "protocol,transport,size,rep,bw_mb_per_s,rtt_us" > "$runs"
  for rep in $(seq 1 "$reps"); do
    for tl in $transports; do
      echo "== repetition $rep/$reps, $tl"
      order=$protocols
      [ $((rep % 2)) -eq 0 ] && order="put_sync_send reassembly"
      for p in $order; do
        out=$(RIVET_RMA_AM_LONG_PROTOCOL=$p timeout 600 \
              "$build/bin/rivetrun" --timeout 580 -n 2 \
              -c "$top/configs/pingpong-$tl.yaml" "$build/bin/rv-amlong" \
              --csv 2>&1) || { echo "$out" | tail -20 >&2
                               fail "run failed: $p, $tl, repetition $rep"; }
        echo "$out" | awk -F, -v p="$p" -v tl="$tl" -v rep="$rep" \
          '/^[0-9]+,/ { print p "," tl "," $1 "," rep "," $3 "," $2 }' \
          >> "$runs"
      done
    done
  done
fi
[ -s "$runs" ] || fail "no runs in $runs"

# Medians per (protocol, transport, size).
{
  echo "protocol,transport,size,bw_mb_per_s,rtt_us"
  awk -F, 'NR > 1 { k = $1 "," $2 "," $3; bw[k] = bw[k] " " $5
                    rtt[k] = rtt[k] " " $6; keys[k] = 1 }
    function median(s,   a, n, i, j, t) {
      n = split(s, a, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
        if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END { for (k in keys) printf "%s,%.1f,%.3f\n", k, median(bw[k]),
                                 median(rtt[k]) }' "$runs" |
    sort -t, -k2,2 -k1,1 -k3,3n
} > "$csv"

echo
echo "reassembly / put_sync_send (median bandwidth; round trip):"
for tl in $(awk -F, 'NR > 1 { print $2 }' "$csv" | sort -u); do
  echo "$tl:"
  awk -F, -v tl="$tl" 'NR > 1 && $2 == tl { bw[$1 "," $3] = $4; rtt[$1 "," $3] = $5
                                            s[$3] = 1 }
    END { n = 0; for (x in s) sz[++n] = x + 0
          for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
            if (sz[j] < sz[i]) { t = sz[i]; sz[i] = sz[j]; sz[j] = t }
          for (i = 1; i <= n; i++) { z = sz[i]
            r = bw["reassembly," z]; p = bw["put_sync_send," z]
            printf "  %8d B  rtt %9.2f vs %9.2f us  bw ratio %s\n", z,
                   rtt["reassembly," z], rtt["put_sync_send," z],
                   (p > 0 ? sprintf("%.2f", r / p) : "n/a") } }' "$csv"
done

if command -v gnuplot > /dev/null; then
  term=png
  gnuplot -e "set terminal" 2>&1 | grep -w pngcairo > /dev/null && term=pngcairo
  tls=$(awk -F, 'NR > 1 { print $2 }' "$csv" | sort -u)
  {
    echo "set terminal $term size 1300,560 noenhanced"
    echo "set output \"$png\""
    echo "set multiplot layout 1,2 title \"AM Long ping-pong (rv-amlong)\""
    echo "set datafile separator \",\""
    echo "set logscale x 2"
    echo "set logscale y"
    echo "set grid"
    echo "set key top left"
    echo "set xlabel \"payload bytes\""
    for what in bw rtt; do
      col=4; label="MB/s (10^6 B, both ways)"
      [ $what = rtt ] && col=5 && label="round trip (us)"
      echo "set ylabel \"$label\""
      printf 'plot '
      sep=""
      for tl in $tls; do
        for p in $protocols; do
          printf '%s"< awk -F, '"'"'NR > 1 \&\& $1 == \\"%s\\" \&\& $2 == \\"%s\\" \&\& $3 > 0'"'"' %s" using 3:%d with linespoints title "%s %s"' \
            "$sep" "$p" "$tl" "$csv" "$col" "$tl" "$p"
          sep=", "
        done
      done
      echo
    done
    echo "unset multiplot"
  } | gnuplot && echo "plot: $png"
fi
