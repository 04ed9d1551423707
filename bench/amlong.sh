#!/usr/bin/env bash
# AM Long (rv_put_handler) under its two protocols, over UCX shm and tcp,
# the two protocols alternating side by side in each repetition (the
# machine's speed drifts; medians over repetitions). Three parts (-p):
#
#   bench/amlong.sh [-r REPS] [-t "shm tcp"] [-b BUILD_DIR]
#                   [-p "amlong rma inject"] [-s]
#
# amlong: GASNet testam's "G" pattern, request + reply ping-pong of
# 0 B - 1 MiB (powers of two), into bench/results/amlong-pingpong.csv with
# the columns
#   protocol,transport,size,bw_mb_per_s,rtt_us
# (protocol reassembly | put_sync_send; medians), every run to
# bench/results/amlong-pingpong-runs.csv, and a plot of bandwidth and
# round-trip time against size to bench/results/amlong-pingpong.png.
# It prints reassembly/put_sync_send bandwidth per size (target: >= 1.3 at
# 4 KiB over tcp, and never below 1).
#
# rma: rv_put/rv_get bandwidth (rv-rma-bw --api) at 4 KiB, 64 KiB, 4 MiB,
# each beside ucx_perftest -t ucp_put_bw / ucp_get in the same
# repetition, into bench/results/rma-bw.csv with the columns
#   op,transport,size,rivet_mb_per_s,ucx_mb_per_s,ratio
# (medians over repetitions; ratio = median of side-by-side ratios;
# 1 MB = 10^6 B). Over tcp, rivet's puts and gets run on its AM-based
# emulation and UCX's on its own TCP RMA.
#
# inject: GASNet testqueue's pattern (rv-amlong-queue), the injection
# overhead of d back-to-back AM Long requests, d = 1, 2, 4, ... 256, at
# 4 KiB, 64 KiB and 1 MiB, into bench/results/amlong-injection.csv with
# the columns
#   protocol,transport,size,depth,inject_us,complete_us
# (medians; microseconds per message spent in the d calls, and until all
# d handlers ran at the target), every run to
# bench/results/amlong-injection-runs.csv, and a plot of injection time
# against depth, one panel per size, to bench/results/amlong-injection.png.
# It prints reassembly/put_sync_send injection time per size at the
# shallowest and deepest queue.
#
# With -s, it only summarizes the selected parts' earlier runs files.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
median_awk=$(cat "$here/median.awk")
top=$(dirname "$here")
build=$top/build
reps=3
transports="shm tcp"
summary_only=0
parts="amlong rma inject"
while getopts "r:t:b:p:sh" o; do
  case $o in
    p) parts=$OPTARG ;;
    s) summary_only=1 ;;
    r) reps=$OPTARG ;;
    t) transports=$OPTARG ;;
    b) build=$OPTARG ;;
    *) sed -n "2,39p" "$0"; exit 2 ;;
  esac
done

results=$here/results
mkdir -p "$results"
runs=$results/amlong-pingpong-runs.csv
csv=$results/amlong-pingpong.csv
png=$results/amlong-pingpong.png
protocols="reassembly put_sync_send"

fail() { echo "amlong: $*" >&2; exit 1; }
part() { [[ " $parts " == *" $1 "* ]]; } # part NAME: is it selected?
. "$here/ucx-perftest.sh"

if [ $summary_only -eq 0 ] && part amlong; then
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
if part amlong; then
  [ -s "$runs" ] || fail "no runs in $runs"

  # Medians per (protocol, transport, size).
  {
    echo "protocol,transport,size,bw_mb_per_s,rtt_us"
    awk -F, "$median_awk"'NR > 1 { k = $1 "," $2 "," $3; bw[k] = bw[k] " " $5
                      rtt[k] = rtt[k] " " $6; keys[k] = 1 }
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
fi

# --------------------------------------------------------------------------
# rv_put / rv_get beside ucx_perftest
rma_runs=$results/rma-bw-runs.csv
rma_csv=$results/rma-bw.csv
rma_sizes="4096 65536 4194304"
if [ $summary_only -eq 0 ] && part rma; then
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
if part rma && [ -s "$rma_runs" ]; then
  {
    echo "op,transport,size,rivet_mb_per_s,ucx_mb_per_s,ratio"
    awk -F, "$median_awk"'NR > 1 { k = $1 "," $2 "," $3; r[k] = r[k] " " $5
                      u[k] = u[k] " " $6; q[k] = q[k] " " ($6 > 0 ? $5 / $6 : 0)
                      keys[k] = 1 }
      END { for (k in keys) printf "%s,%.1f,%.1f,%.3f\n", k, median(r[k]),
                                   median(u[k]), median(q[k]) }' "$rma_runs" |
      sort -t, -k2,2 -k1,1 -k3,3n
  } > "$rma_csv"
  echo
  echo "rv_put / rv_get vs ucx_perftest (medians; goal >= 0.9 on shm):"
  column -s, -t < "$rma_csv" 2> /dev/null || cat "$rma_csv"
fi

if part amlong && command -v gnuplot > /dev/null; then
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

# --------------------------------------------------------------------------
# Injection overhead of d back-to-back AM Longs (GASNet testqueue)
inj_runs=$results/amlong-injection-runs.csv
inj_csv=$results/amlong-injection.csv
inj_png=$results/amlong-injection.png
inj_sizes="4096 65536 1048576"
inj_depth=256
if [ $summary_only -eq 0 ] && part inject; then
  [ -x "$build/bin/rv-amlong-queue" ] ||
    fail "$build/bin/rv-amlong-queue not built"
  echo "protocol,transport,size,depth,rep,inject_us,complete_us" > "$inj_runs"
  for rep in $(seq 1 "$reps"); do
    for tl in $transports; do
      echo "== injection repetition $rep/$reps, $tl"
      order=$protocols
      [ $((rep % 2)) -eq 0 ] && order="put_sync_send reassembly"
      for p in $order; do
        out=$(RIVET_RMA_AM_LONG_PROTOCOL=$p timeout 600 \
              "$build/bin/rivetrun" --timeout 580 -n 2 \
              -c "$top/configs/pingpong-$tl.yaml" \
              "$build/bin/rv-amlong-queue" -s "$(echo $inj_sizes | tr ' ' ,)" \
              -W $inj_depth --csv 2>&1) || { echo "$out" | tail -20 >&2
            fail "rv-amlong-queue failed: $p, $tl, repetition $rep"; }
        rows=$(echo "$out" | awk -F, -v p="$p" -v tl="$tl" -v rep="$rep" \
          '/^[0-9]+,[0-9]+,/ { print p "," tl "," $1 "," $2 "," rep "," \
                                     $4 "," $5 }')
        [ -n "$rows" ] || fail "no rows from rv-amlong-queue: $p, $tl"
        echo "$rows" >> "$inj_runs"
      done
    done
  done
fi
if part inject && [ ! -s "$inj_runs" ]; then
  echo "amlong: no injection runs in $inj_runs (run the inject part)" >&2
elif part inject; then
  # Medians per (protocol, transport, size, depth).
  {
    echo "protocol,transport,size,depth,inject_us,complete_us"
    awk -F, "$median_awk"'NR > 1 { k = $1 "," $2 "," $3 "," $4; inj[k] = inj[k] " " $6
                      comp[k] = comp[k] " " $7; keys[k] = 1 }
      END { for (k in keys) printf "%s,%.3f,%.3f\n", k, median(inj[k]),
                                   median(comp[k]) }' "$inj_runs" |
      sort -t, -k2,2 -k1,1 -k3,3n -k4,4n
  } > "$inj_csv"

  echo
  echo "AM Long injection, reassembly vs put_sync_send (median us per" \
       "message; ratio):"
  for tl in $(awk -F, 'NR > 1 { print $2 }' "$inj_csv" | sort -u); do
    echo "$tl:"
    awk -F, -v tl="$tl" 'NR > 1 && $2 == tl { v[$1 "," $3 "," $4] = $5
                                              s[$3] = 1; dep[$4] = 1 }
      function cell(z, d,   r, p) {
        r = v["reassembly," z "," d]; p = v["put_sync_send," z "," d]
        return sprintf("d=%-4d %9.3f vs %9.3f (%s)", d, r, p,
                       p > 0 ? sprintf("%.2f", r / p) : "n/a")
      }
      END { n = 0; for (x in s) sz[++n] = x + 0
            lo = -1; hi = 0
            for (x in dep) { if (lo < 0 || x + 0 < lo) lo = x + 0
                             if (x + 0 > hi) hi = x + 0 }
            for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
              if (sz[j] < sz[i]) { t = sz[i]; sz[i] = sz[j]; sz[j] = t }
            for (i = 1; i <= n; i++)
              printf "  %8d B  %s   %s\n", sz[i], cell(sz[i], lo),
                     cell(sz[i], hi) }' "$inj_csv"
  done

  if command -v gnuplot > /dev/null; then
    term=png
    gnuplot -e "set terminal" 2>&1 | grep -w pngcairo > /dev/null &&
      term=pngcairo
    tls=$(awk -F, 'NR > 1 { print $2 }' "$inj_csv" | sort -u)
    sizes=$(awk -F, 'NR > 1 { print $3 }' "$inj_csv" | sort -nu)
    npanels=$(echo $sizes | wc -w)
    {
      echo "set terminal $term size $((450 * npanels + 100)),560 noenhanced"
      echo "set output \"$inj_png\""
      echo "set multiplot layout 1,$npanels title" \
           "\"AM Long injection overhead, d back-to-back requests" \
           "(rv-amlong-queue, GASNet testqueue)\""
      echo "set datafile separator \",\""
      echo "set logscale x 2"
      echo "set logscale y"
      echo "set grid"
      echo "set key top left"
      echo "set xlabel \"queue depth d\""
      echo "set ylabel \"injection (us per message)\""
      for z in $sizes; do
        if [ "$z" -ge 1048576 ]; then label="$((z >> 20)) MiB"
        elif [ "$z" -ge 1024 ]; then label="$((z >> 10)) KiB"
        else label="$z B"; fi
        echo "set title \"$label\""
        printf 'plot '
        sep=""
        for tl in $tls; do
          for p in $protocols; do
            printf '%s"< awk -F, '"'"'NR > 1 \&\& $1 == \\"%s\\" \&\& $2 == \\"%s\\" \&\& $3 == %s'"'"' %s" using 4:5 with linespoints title "%s %s"' \
              "$sep" "$p" "$tl" "$z" "$inj_csv" "$tl" "$p"
            sep=", "
          done
        done
        echo
      done
      echo "unset multiplot"
    } | gnuplot && echo "plot: $inj_png"
  fi
fi
