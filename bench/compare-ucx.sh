#!/usr/bin/env bash
# Compares rivet's active messages with raw UCX (ucx_perftest) in one run.
# Every rivet measurement is taken right beside the matching ucx_perftest
# one (alternating which goes first), and the ratio reported is the median
# over repetitions of those side-by-side ratios: on a shared machine whose
# speed drifts by 2-3x over minutes, that is what stays comparable.
#
#   bench/compare-ucx.sh [-r REPS] [-t "shm tcp"] [-z "SIZES"] [-W WINDOW]
#                        [-b BUILD_DIR] [-P PEERS_DIR] [-s]
#
# For each transport (shm = UCX sm,self; tcp = UCX tcp,self on lo), and for
# REPS repetitions (default 3), it runs, alternating rivet and UCX with the
# two processes pinned to cores 0 and 1:
#   latency      rv-pingpong          vs ucp_am_lat   (8 B, 4 KiB; median)
#   message rate rv-am-bw             vs ucp_am_bw    (8, 64, 256, 4096 B)
#   bandwidth    rv-am-bw             vs ucp_am_bw    (64 KiB, 4 MiB)
# (-z keeps only the sizes it lists, e.g. -z 4194304). Both sides of a
# rate or bandwidth run keep WINDOW sends in flight (default 64: rv-am-bw
# -W, ucx_perftest -O), and both send every message of a size from one
# page-aligned buffer whose pages are present and that is not written per
# send (ucx_perftest's comes from ucp_mem_map, rv-am-bw's is written once).
# It writes bench/results/compare-ucx.csv with the columns
#   metric,transport,size,rivet,ucx,ratio,window,rivet_proto,ucx_proto,
#   states,cpu,ucx_version
# (rivet and ucx are medians over the repetitions; ratio is the median of
# the per-repetition ratios rivet/ucx for rates, ucx/rivet for latency, so
# higher is better; window is the sends in flight, 1 for latency;
# rivet_proto and ucx_proto the UCP AM protocol (egr/short, egr/bcopy,
# egr/zcopy, rndv) each side's endpoint picks for that size, rivet's
# message counting its 12-byte UCP header; states counts the runs' machine
# states; cpu is lscpu's model name), every single run to
# bench/results/compare-ucx-runs.csv (metric,transport,size,rep,impl,
# value,state), and a plot of the ratios to bench/results/compare-ucx.png.
# bench/results/compare-ucx-proto.csv keeps, per transport and size, what
# the protocols were read from: the am_send ranges and lanes rivet's UCX
# plugin logs (RIVET_LOG_LEVEL=info) for its endpoint, the ones ucx_info
# gives for ucx_perftest's context (active messages only, another process
# of this node) and the lanes ucx_perftest's own log names. The contexts
# differ in this only: rivet's asks for RMA and 64-bit atomics too (over
# shm, one more lane, posix, for atomics; the AM lane, the rendezvous
# lane and the am_send ranges are the same) and shares its context
# between workers; neither sets UCX_RNDV_THRESH or other UCX variables
# beyond UCX_TLS and UCX_NET_DEVICES.
#
# With -P PEERS_DIR (or $PEERS_DIR), the folder holding c2c-probe.c, the
# machine-state probe (bench/machine-state.sh) runs before and after each
# transport's runs of a repetition, into bench/results/compare-ucx-state.csv;
# without it runs are labelled "unprobed". With -s, it only summarizes the
# runs file of an earlier run again.
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init compare-ucx
reps=3
transports="shm tcp"
summary_only=0
only_sizes=""
window=64
peers=${PEERS_DIR:-}
while getopts "r:t:b:z:W:P:sh" o; do
  case $o in
    s) summary_only=1 ;;
    r) reps=$OPTARG ;;
    t) transports=$OPTARG ;;
    b) build=$OPTARG ;;
    z) only_sizes=$OPTARG ;;
    W) window=$OPTARG ;;
    P) peers=$OPTARG ;;
    *) usage ;;
  esac
done
[[ "$window" =~ ^[1-9][0-9]*$ ]] || { echo "compare-ucx: -W wants a count" >&2; exit 2; }

protos=$results/compare-ucx-proto.csv
states=$results/compare-ucx-state.csv
proto_header="transport,size,window,rivet_proto,ucx_proto,rivet_am_send,ucx_am_send,rivet_lanes,ucx_lanes,cpu,ucx_version"
. "$here/machine-state.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

command -v ucx_perftest > /dev/null || {
  echo "compare-ucx: ucx_perftest not found (Debian package ucx-utils)" >&2
  exit 1
}
[ -x "$build/bin/rv-pingpong" ] || {
  echo "compare-ucx: $build/bin/rv-pingpong not built; run make first" >&2
  exit 1
}
if [ $summary_only -eq 0 ]; then
  machine_probe_init "$peers" "$tmp" || exit 1
  echo "metric,transport,size,rep,impl,value,state" > "$runs"
  echo "$proto_header" > "$protos"
  echo "rep,transport,when,$machine_state_header" > "$states"
elif [ ! -f "$protos" ]; then
  # The runs of an earlier version of this script, with no protocols.
  protos=$tmp/protos
  echo "$proto_header" > "$protos"
fi

# only SIZES...: those of SIZES that -z lists (all without -z)
only() {
  local s
  for s in "$@"; do
    if [ -z "$only_sizes" ] || [[ " $only_sizes " == *" $s "* ]]; then
      echo "$s"
    fi
  done
}
lat_sizes=$(only 8 4096)
rate_sizes=$(only 8 64 256 4096)
bw_sizes=$(only 65536 4194304)
port=$((20000 + RANDOM % 20000))
# rivet's UCP AM header: the sender's worker id (4 B) and rv_msg_hdr_t
# (8 B); ucp_am_bw and ucp_am_lat send none (ucx_perftest -H 0).
rivet_am_hdr=12

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

state=unprobed
record() { echo "$1,$2,$3,$4,$5,$6,$state" >> "$runs"; }

# protocols TRANSPORT: appends to the protocols file, for each size, the
# UCP AM protocol and lanes of rivet's endpoint (from its UCX plugin's
# log) and of ucx_perftest's (ucx_info for its context, and its own log)
protocols() {
  local tl=$1 log r_send r_lanes u_send u_lanes cpu ver s
  log=$(RIVET_LOG_LEVEL=info "$build/bin/rivetrun" --timeout 60 --no-prefix \
          -c "$top/configs/pingpong-$tl.yaml" "$build/bin/rv-am-bw" -s 8 \
          -n 100 2>&1 | sed -n 's/.*r0\.t0\] info: ucx endpoint to rank 1: //p')
  r_send=$(echo "$log" | grep -m1 '^am_send:' || true)
  r_lanes=$(echo "$log" | sed -n 's/^lane\[[0-9]*\]: *[0-9]*:\([^ ]*\) .*-> [^ ]* \(.*\)/\1 (\2)/p' |
            paste -sd ';' -)
  u_send=$(ucx_am_send "$tl")
  u_lanes=$(perftest_lanes "$tl" ucp_am_bw)
  cpu=$(machine_model)
  ver=$(ucx_version)
  for s in $(echo $lat_sizes $rate_sizes $bw_sizes | tr ' ' '\n' | sort -nu); do
    echo "$tl,$s,$window,$(am_proto "$r_send" $((s + rivet_am_hdr))),$(am_proto "$u_send" "$s"),$r_send,$u_send,$r_lanes,$u_lanes,$cpu,$ver" >> "$protos"
  done
  echo "$tl: rivet $r_send; lanes $r_lanes" >&2
  echo "$tl: ucx   $u_send; lanes $u_lanes" >&2
}

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

# One measurement of one implementation: appends a row to the runs file.
measure() { # impl transport size rep kind
  local impl=$1 tl=$2 s=$3 rep=$4 kind=$5 n f
  n=$(iters "$tl" "$s" "$kind")
  if [ "$kind" = lat ]; then
    if [ "$impl" = ucx ]; then
      f=$(perftest "$tl" ucp_am_lat "$s" "$n")
      record latency_us "$tl" "$s" "$rep" ucx "$(echo "$f" | awk '{print $3}')"
    else
      f=$(rivet "$tl" "$build/bin/rv-pingpong" -s "$s" -n "$n")
      record latency_us "$tl" "$s" "$rep" rivet \
        "$(echo "$f" | awk -F, 'NR > 1 && NF >= 2 { print $2 }')"
    fi
  elif [ "$impl" = ucx ]; then
    f=$(perftest "$tl" ucp_am_bw "$s" "$n" -O "$window")
    record_rate "$tl" "$s" "$rep" ucx "$(echo "$f" | awk '{print $9}')"
  else
    f=$(rivet "$tl" "$build/bin/rv-am-bw" -s "$s" -n "$n" -W "$window")
    record_rate "$tl" "$s" "$rep" rivet \
      "$(echo "$f" | awk -F, 'NR > 1 && NF >= 2 { print $2 }')"
  fi
}

# Each rivet figure is taken right beside its UCX figure, in alternating
# order, so that the slow drifts of a shared machine cancel in the ratio.
[ $summary_only -eq 1 ] && reps=$(awk -F, 'NR > 1 && $4 > m { m = $4 } END { print m + 0 }' "$runs")
[ $summary_only -eq 1 ] || for tl in $transports; do protocols "$tl"; done
for rep in $(seq 1 "$reps"); do
  [ $summary_only -eq 1 ] && break
  order="ucx rivet"
  [ $((rep % 2)) -eq 0 ] && order="rivet ucx"
  for tl in $transports; do
    echo "== repetition $rep/$reps, $tl" >&2
    # The runs are labelled with the state only once both probes are in:
    # they are written to a scratch file first.
    final_runs=$runs
    runs=$tmp/runs
    : > "$runs"
    before=$(machine_probe "$states" "$rep,$tl,before")
    for s in $lat_sizes; do
      for impl in $order; do measure "$impl" "$tl" "$s" "$rep" lat; done
    done
    for s in $rate_sizes $bw_sizes; do
      for impl in $order; do measure "$impl" "$tl" "$s" "$rep" bw; done
    done
    state=$(machine_state_of "$before" "$(machine_probe "$states" "$rep,$tl,after")")
    sed "s/,unprobed\$/,$state/" "$runs" >> "$final_runs"
    runs=$final_runs
    state=unprobed
  done
done

# Medians and spreads (min-max) per metric, transport, size and impl.
summarize() {
  awk -F, -v order="latency_us msg_rate_mps bandwidth_mbps" '
    FNR == 1 { file++ }
    file == 1 && FNR > 1 {            # the protocols file
      k = $1 SUBSEP $2
      win[$1] = $3; rproto[k] = $4; uproto[k] = $5; cpu = $10; ver = $11
      next
    }
    function median(list, n,   a, i, j, t) {
      n = split(list, a, " ")
      for (i = 2; i <= n; i++)            # insertion sort, numeric
        for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
          t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
      lo = a[1]; hi = a[n]
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    file == 2 && FNR > 1 && $6 != "" {
      k = $1 SUBSEP $2 SUBSEP $3
      if ($5 == "rivet") { st = ($7 == "" ? "unprobed" : $7)
                           if (!index(sts[k], " " st "=")) sts[k] = sts[k] " " st "="
                           nst[k, st]++ }
      if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
      v[k, $5] = v[k, $5] " " $6
      one[k, $4, $5] = $6
      if (!((k, $4) in rseen)) { rseen[k, $4] = 1; reps[k] = reps[k] " " $4 }
    }
    END {
      print "metric,transport,size,rivet,ucx,ratio,window,rivet_proto,ucx_proto,states,cpu,ucx_version" > csv
      printf "\n%-15s %-4s %8s %10s %21s %10s %21s %7s %s\n", "metric", "tl",
             "size", "rivet", "(min-max)", "ucx", "(min-max)", "ratio",
             "protocols (rivet/ucx)"
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
          # states: "fast:2 slow:1", the rivet runs per machine state
          ns = split(sts[keys[i]], sl, " "); states = ""
          for (j = 1; j <= ns; j++) {
            st = substr(sl[j], 1, length(sl[j]) - 1)
            states = states (j > 1 ? " " : "") st ":" nst[keys[i], st]
          }
          pk = f[2] SUBSEP f[3]
          printf "%s,%s,%s,%g,%g,%s,%s,%s,%s,%s,%s,%s\n", f[1], f[2], f[3],
                 r, u, ratio, f[1] == "latency_us" ? 1 : win[f[2]],
                 rproto[pk], uproto[pk], states, cpu, ver > csv
          printf "%-15s %-4s %8s %10g %21s %10g %21s %7s %s/%s\n", f[1],
                 f[2], f[3], r, "(" rlo "-" rhi ")", u, "(" ulo "-" uhi ")",
                 ratio, rproto[pk], uproto[pk]
        }
    }' csv="$csv" "$protos" "$runs"
}
summarize
echo
echo "medians of $reps repetitions; every run in $runs; protocols in $protos"
echo "$csv:"
cat "$csv"

if command -v gnuplot > /dev/null; then
  # Labels people read: "latency, 8 B, shm", "bandwidth, 4 MiB, tcp".
  awk -F, 'function size(b) {
             return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B"
           }
           NR > 1 {
             m = $1 == "latency_us" ? "latency" : $1 == "msg_rate_mps" ? "message rate" : "bandwidth"
             printf "\"%s, %s, %s\" %s\n", m, size($3), $2, $6
           }' "$csv" > "$results/compare-ucx.dat"
  gnuplot <<EOF
set terminal pngcairo size 1300,600 noenhanced
set output "$results/compare-ucx.png"
set title "rivet's active messages over raw UCX AM (ucx_perftest), side by side in one run: rivet / UCX, higher is better (latency: UCX / rivet)"
set style fill solid 0.6
set boxwidth 0.7
set yrange [0:*]
set xtics rotate by -40
set bmargin 11
set rmargin 20
set grid ytics
set arrow from graph 0, first 0.9 to graph 1, first 0.9 nohead dt 2 lc rgb "red"
set ylabel "rivet / raw UCX"
plot "$results/compare-ucx.dat" using 0:2:xtic(1) with boxes notitle
EOF
  rm -f "$results/compare-ucx.dat"
  echo "plot: $results/compare-ucx.png"
fi
