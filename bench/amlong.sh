#!/usr/bin/env bash
# AM Long (rv_put_handler) under its two protocols, GASNet testam's "G"
# pattern: request + reply ping-pong of 0 B - 1 MiB (powers of two), over
# UCX shm and tcp, the two protocols alternating side by side in each
# repetition (the machine's speed drifts; medians over repetitions).
#
#   bench/amlong.sh [-r REPS] [-t "shm tcp"] [-b BUILD_DIR] [-p "amlong rma"] [-s]
#
# Writes bench/results/amlong-pingpong.csv with the columns
#   protocol,transport,size,bw_mb_per_s,rtt_us
# (protocol reassembly | put_sync_send; medians), every run to
# bench/results/amlong-pingpong-runs.csv, and a plot of bandwidth and
# round-trip time against size to bench/results/amlong-pingpong.png.
# It prints reassembly/put_sync_send bandwidth per size (target: >= 1.3 at
# 4 KiB over tcp, and never below 1). With -s, it only summarizes an
# earlier runs file.
#
# Then rv_put/rv_get bandwidth (rv-rma-bw --api) at 4 KiB, 64 KiB, 4 MiB,
# each beside ucx_perftest -t ucp_put_bw / ucp_get in the same
# repetition, into bench/results/rma-bw.csv with the columns
#   op,transport,size,rivet_mb_per_s,ucx_mb_per_s,ratio
# (medians over repetitions; ratio = median of side-by-side ratios;
# 1 MB = 10^6 B). Over tcp, rivet's puts and gets run on its AM-based
# emulation and UCX's on its own TCP RMA.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
build=$top/build
reps=3
transports="shm tcp"
summary_only=0
parts="amlong rma"
while getopts "r:t:b:p:sh" o; do
  case $o in
    p) parts=$OPTARG ;;
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
. "$here/ucx-perftest.sh"

if [ $summary_only -eq 0 ] && [[ " $parts " == *" amlong "* ]]; then
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

# --------------------------------------------------------------------------
# rv_put / rv_get beside ucx_perftest
rma_runs=$results/rma-bw-runs.csv
rma_csv=$results/rma-bw.csv
rma_sizes="4096 65536 4194304"
if [ $summary_only -eq 0 ] && [[ " $parts " == *" rma "* ]]; then
  command -v ucx_perftest > /dev/null ||
    fail "ucx_perftest not found (Debian package ucx-utils)"
  port=$((20000 + RANDOM % 20000))
  echo "op,transport,size,rep,rivet_mb_per_s,ucx_mb_per_s" > "$rma_runs"
  for rep in $(seq 1 "$reps"); do
    for tl in $transports; do
      echo "== rma repetition $rep/$reps, $tl"
      out=$(timeout 600 "$build/bin/rivetrun" --timeout 580 -n 2 \
            -c "$top/configs/pingpong-$tl.yaml" "$build/bin/rv-rma-bw" --api \
            -s "$(echo $rma_sizes | tr ' ' ,)" --csv 2>&1) ||
        { echo "$out" | tail -20 >&2; fail "rv-rma-bw failed: $tl, repetition $rep"; }
      for op in put get; do
        for size in $rma_sizes; do
          n=$(( (64 << 20) / size )); [ $n -lt 100 ] && n=100
          [ $n -gt 100000 ] && n=100000
          [ "$tl" = tcp ] && [ $op = get ] && n=$(( n < 200 ? n : 200 ))
          [ "$tl" = tcp ] && [ $op = put ] && n=$(( n < 2000 ? n : 2000 ))
          test=ucp_put_bw
          [ $op = get ] && test=ucp_get # UCX 1.13's name for get bandwidth
          final=$(perftest "$tl" "$test" "$size" "$n")
          [ -n "$final" ] || fail "ucx_perftest -t $test failed: $tl, $size B"
          ucx=$(echo "$final" | awk -v s="$size" '{ printf "%.1f", $9 * s / 1e6 }')
          riv=$(echo "$out" | awk -F, -v op=$op -v s="$size" \
                '$1 == op && $2 == s { print $3 }')
          [ -n "$riv" ] || fail "no rivet figure: $op, $tl, $size B"
          echo "$op,$tl,$size,$rep,$riv,$ucx" >> "$rma_runs"
        done
      done
    done
  done
fi
if [ -s "$rma_runs" ]; then
  {
    echo "op,transport,size,rivet_mb_per_s,ucx_mb_per_s,ratio"
    awk -F, 'NR > 1 { k = $1 "," $2 "," $3; r[k] = r[k] " " $5
                      u[k] = u[k] " " $6; q[k] = q[k] " " ($6 > 0 ? $5 / $6 : 0)
                      keys[k] = 1 }
      function median(s,   a, n, i, j, t) {
        n = split(s, a, " ")
        for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
          if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
        return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
      }
      END { for (k in keys) printf "%s,%.1f,%.1f,%.3f\n", k, median(r[k]),
                                   median(u[k]), median(q[k]) }' "$rma_runs" |
      sort -t, -k2,2 -k1,1 -k3,3n
  } > "$rma_csv"
  echo
  echo "rv_put / rv_get vs ucx_perftest (medians; goal >= 0.9 on shm):"
  column -s, -t < "$rma_csv" 2> /dev/null || cat "$rma_csv"
fi

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
