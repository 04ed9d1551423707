#!/usr/bin/env bash
# Reproduces Seriema's Table 2 (call throughput) for rivet's invocation
# layer: rv-call-bw in four modes beside raw UCX active messages
# (ucx_perftest -t ucp_am_bw, "max-raw"), in one run. Every rivet figure is
# taken right beside the UCX figure of the same size, alternating which
# goes first, and every ratio is the median over repetitions of
# side-by-side ratios (a shared machine drifts by 2-3x over minutes).
#
#   bench/seriema-table2.sh [-r REPS] [-t "shm tcp"] [-b BUILD_DIR] [-s]
#
# For each transport (shm = configs/pingpong-shm.yaml and UCX sm,self;
# tcp = configs/pingpong-tcp.yaml and UCX tcp,self on lo; the two
# processes pinned to cores 0 and 1) and for REPS repetitions (default 3):
#   send     rv-call-bw, RIVET_AM_PATH=send  RIVET_AM_AGGREGATION=none
#   write    rv-call-bw, RIVET_AM_PATH=write RIVET_AM_AGGREGATION=none
#   trad     rv-call-bw, RIVET_AM_PATH=write RIVET_AM_AGGREGATION=trad
#   ovfl     rv-call-bw, RIVET_AM_PATH=write RIVET_AM_AGGREGATION=ovfl
#   max-raw  ucx_perftest -t ucp_am_bw
# at 8, 64 and 256 B (max-raw also at 4096 B). It writes every run to
# bench/results/seriema-table2-runs.csv, the medians to
# bench/results/seriema-table2.csv (mode,transport,size,calls_per_s,
# mb_per_s; MB = 10^6 B of arguments), the ratios below to
# bench/results/seriema-table2-ratios.csv (transport,ratio,value,target)
# and a plot of MB/s to bench/results/seriema-table2.png:
#   write/max-raw, ovfl/max-raw at 8, 64, 256 B   (target 0.9)
#   trad@256/max-raw@4096, in MB/s                (target 0.9)
#   trad@8/write@8, in calls/s                    (target 20)
# With -s, it only summarizes the runs file of an earlier run again.
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init seriema-table2
reps=3
transports="shm tcp"
summary_only=0
while getopts "r:t:b:sh" o; do
  case $o in
    s) summary_only=1 ;;
    r) reps=$OPTARG ;;
    t) transports=$OPTARG ;;
    b) build=$OPTARG ;;
    *) usage ;;
  esac
done

ratios=$results/seriema-table2-ratios.csv

modes="send write trad ovfl"
sizes="8 64 256"
raw_only_sizes="4096"


if [ $summary_only -eq 1 ]; then
  [ -s "$runs" ] || fail "no runs file $runs to summarize"
else
  command -v ucx_perftest > /dev/null ||
    fail "ucx_perftest not found (Debian package ucx-utils)"
  [ -x "$build/bin/rv-call-bw" ] ||
    fail "$build/bin/rv-call-bw not built; run make first"
  echo "mode,transport,size,rep,calls_per_s,mb_per_s" > "$runs"
fi
port=$((20000 + RANDOM % 20000))
errlog=$(mktemp)
trap 'rm -f "$errlog"' EXIT

. "$here/ucx-perftest.sh"

mode_env() { # mode -> env assignments for rivetrun
  case $1 in
    send) echo "RIVET_AM_PATH=send RIVET_AM_AGGREGATION=none" ;;
    write) echo "RIVET_AM_PATH=write RIVET_AM_AGGREGATION=none" ;;
    trad) echo "RIVET_AM_PATH=write RIVET_AM_AGGREGATION=trad" ;;
    ovfl) echo "RIVET_AM_PATH=write RIVET_AM_AGGREGATION=ovfl" ;;
  esac
}

# Calls per run: about 64 MiB of arguments on shm (200000 to 4000000
# calls, as rv-call-bw's default); fewer over tcp, whose AM rate is about
# 0.4 M/s.
iters() { # transport size -> calls
  local budget=$((64 << 20)) min=200000 max=4000000
  [ "$1" = tcp ] && budget=$((32 << 20)) min=100000 max=400000
  local n=$((budget / $2))
  [ $n -gt $max ] && n=$max
  [ $n -lt $min ] && n=$min
  echo $n
}

record() { echo "$1,$2,$3,$4,$5,$6" >> "$runs"; }


# One measurement: appends a row to the runs file, or stops the script
# saying which run failed.
measure() { # mode transport size rep
  local mode=$1 tl=$2 s=$3 rep=$4 n out row rate
  n=$(iters "$tl" "$s")
  if [ "$mode" = max-raw ]; then
    out=$(perftest "$tl" ucp_am_bw "$s" "$n")
    [ -n "$out" ] || out=$(perftest "$tl" ucp_am_bw "$s" "$n") # once more, new port
    rate=$(echo "$out" | awk '{ print $9 }')
    [ -n "$rate" ] ||
      fail "run failed: max-raw (ucx_perftest -t ucp_am_bw), $tl, $s B," \
           "repetition $rep: no result line"
    record max-raw "$tl" "$s" "$rep" "$rate" \
      "$(awk -v r="$rate" -v s="$s" 'BEGIN { printf "%.1f", r * s / 1e6 }')"
    return
  fi
  if ! out=$(env $(mode_env "$mode") "$build/bin/rivetrun" --timeout 120 \
             --no-prefix -c "$top/configs/pingpong-$tl.yaml" \
             "$build/bin/rv-call-bw" -s "$s" -n "$n" -w $((n / 10 + 10)) \
             --csv 2> "$errlog"); then
    tail -n 20 "$errlog" >&2
    fail "run failed: $mode ($(mode_env "$mode")), $tl, $s B, repetition $rep"
  fi
  row=$(echo "$out" | awk -F, -v s="$s" 'NR > 1 && $1 == s && NF == 3 {
    print $2 "," $3 }')
  if [ -z "$row" ]; then
    tail -n 20 "$errlog" >&2
    fail "run failed: $mode ($(mode_env "$mode")), $tl, $s B, repetition" \
         "$rep: no result row"
  fi
  echo "$mode,$tl,$s,$rep,$row" >> "$runs"
}

for rep in $(seq 1 "$reps"); do
  [ $summary_only -eq 1 ] && break
  # rivet and UCX alternate which goes first, size by size
  for tl in $transports; do
    echo "== repetition $rep/$reps, $tl" >&2
    for s in $sizes; do
      if [ $((rep % 2)) -eq 1 ]; then
        order="max-raw $modes"
      else
        order="$modes max-raw"
      fi
      for mode in $order; do measure "$mode" "$tl" "$s" "$rep"; done
    done
    for s in $raw_only_sizes; do measure max-raw "$tl" "$s" "$rep"; done
  done
done

# Medians per mode, transport and size; the table; the ratios.
awk -F, -v csv="$csv" -v ratios="$ratios" -v dat="$results/seriema-table2" '
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 2; i <= n; i++)              # insertion sort, numeric
      for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
        t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  # median over repetitions of num/den, both of column col (5: calls/s,
  # 6: MB/s), each pair from the same repetition
  function ratio(tl, m1, s1, m2, s2, col,   r, a, b, list) {
    list = ""
    for (r = 1; r <= maxrep; r++) {
      a = one[m1, tl, s1, r, col] + 0
      b = one[m2, tl, s2, r, col] + 0
      if (a > 0 && b > 0)
        list = list " " a / b
    }
    return list == "" ? "nan" : sprintf("%.3f", median(list))
  }
  function put_ratio(tl, name, v, target) {
    printf "%s,%s,%s,%s\n", tl, name, v, target > ratios
    verdict = v == "nan" ? "(missing)" : (v + 0 >= target ? "met" : "not met")
    printf "  %-26s %8s   target %-4s %s\n", name, v, target, verdict
  }
  NR > 1 && NF == 6 && $5 != "" {
    k = $1 SUBSEP $2 SUBSEP $3
    calls[k] = calls[k] " " $5; mb[k] = mb[k] " " $6
    one[$1, $2, $3, $4, 5] = $5; one[$1, $2, $3, $4, 6] = $6
    if ($4 + 0 > maxrep) maxrep = $4 + 0
    if (!($2 in tseen)) { tseen[$2] = 1; tls[++ntl] = $2 }
  }
  END {
    nm = split("send write trad ovfl max-raw", ms, " ")
    ns = split("8 64 256 4096", ss, " ")
    print "mode,transport,size,calls_per_s,mb_per_s" > csv
    print "transport,ratio,value,target" > ratios
    for (t = 1; t <= ntl; t++) {
      tl = tls[t]
      printf "\n%s: calls/s (M)%41s\n", tl, "MB/s (10^6 B of arguments)"
      printf "%6s", "size"
      for (m = 1; m <= nm; m++) printf " %8s", ms[m]
      printf "   "
      for (m = 1; m <= nm; m++) printf " %8s", ms[m]
      printf "\n"
      print "size send write trad ovfl max-raw" > (dat "-" tl ".dat")
      for (i = 1; i <= ns; i++) {
        line = sprintf("%6s", ss[i]); mline = "   "; drow = ss[i]; any = 0
        for (m = 1; m <= nm; m++) {
          k = ms[m] SUBSEP tl SUBSEP ss[i]
          if (k in calls) {
            c = median(calls[k]); b = median(mb[k]); any = 1
            printf "%s,%s,%s,%.0f,%.1f\n", ms[m], tl, ss[i], c, b > csv
            line = line sprintf(" %8.3f", c / 1e6)
            mline = mline sprintf(" %8.1f", b)
            drow = drow " " b
          } else {
            line = line sprintf(" %8s", "-")
            mline = mline sprintf(" %8s", "-")
            drow = drow " -"
          }
        }
        if (any) {
          print line mline
          print drow > (dat "-" tl ".dat")
        }
      }
      close(dat "-" tl ".dat")
      printf "ratios (median of side-by-side ratios over %d repetitions):\n",
             maxrep
      for (i = 1; i <= 3; i++)
        put_ratio(tl, "write/max-raw@" ss[i],
                  ratio(tl, "write", ss[i], "max-raw", ss[i], 5), 0.9)
      for (i = 1; i <= 3; i++)
        put_ratio(tl, "ovfl/max-raw@" ss[i],
                  ratio(tl, "ovfl", ss[i], "max-raw", ss[i], 5), 0.9)
      put_ratio(tl, "trad@256/max-raw@4096",
                ratio(tl, "trad", 256, "max-raw", 4096, 6), 0.9)
      put_ratio(tl, "trad@8/write@8", ratio(tl, "trad", 8, "write", 8, 5), 20)
    }
  }' "$runs"
echo
echo "every run in $runs"
echo "$csv:"
cat "$csv"
echo "$ratios:"
cat "$ratios"

# The plot: MB/s per size and mode, one panel per transport.
plot_tls=$(awk -F, 'NR > 1 && !($2 in s) { s[$2] = 1; printf "%s ", $2 }' \
           "$runs")
if command -v gnuplot > /dev/null; then
  term=png
  gnuplot -e "set terminal" 2>&1 | grep -w pngcairo > /dev/null && term=pngcairo
  {
    echo "set terminal $term size 1300,560 noenhanced"
    echo "set output \"$png\""
    echo "set multiplot layout 1,$(echo "$plot_tls" | wc -w)" \
         "title \"rivet calls (rv-call-bw) vs raw UCX AM (ucp_am_bw):" \
         "medians of $(awk -F, 'NR > 1 && $4 > m { m = $4 } END { print m + 0 }' "$runs")" \
         "repetitions\""
    echo "set style data histograms"
    echo "set style histogram clustered gap 1"
    echo "set style fill solid 0.8 border -1"
    echo "set datafile missing \"-\""
    echo "set logscale y"
    echo "set grid ytics"
    echo "set key top left"
    echo "set xlabel \"argument bytes per call\""
    echo "set ylabel \"MB/s (10^6 B)\""
    for tl in $plot_tls; do
      d=$results/seriema-table2-$tl.dat
      # the log axis starts a decade below the smallest bar, so all show
      echo "set yrange [$(awk -F, -v tl="$tl" 'NR > 1 && $2 == tl && $5 > 0 &&
        (m == "" || $5 < m) { m = $5 } END {
        e = log(m / 2) / log(10); f = int(e); if (f > e) f--
        printf "%g", 10 ^ f }' "$csv"):*]"
      echo "set title \"$tl\""
      echo "plot for [c=2:6] \"$d\" using c:xtic(1) title columnheader(c)"
    done
    echo "unset multiplot"
  } | gnuplot
  for tl in $plot_tls; do rm -f "$results/seriema-table2-$tl.dat"; done
  echo "plot: $png"
else
  for tl in $plot_tls; do rm -f "$results/seriema-table2-$tl.dat"; done
  echo "seriema-table2: gnuplot not found, no plot" >&2
fi
