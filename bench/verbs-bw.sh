#!/usr/bin/env bash
# Seriema's Fig. 2 (DTutils, selective signaling of Sec. 4.1): RDMA
# messages per second against message size, 8 B - 4 KiB (powers of two),
# 128 K (131072) transmissions per point, on the Soft-RoCE device rxe0 of
# the qemu guest of scripts/rdma-vm.sh, booted once for the whole run.
#
#   bench/verbs-bw.sh [-r REPS] [-n ITERS] [-s "8 16 ... 4096"]
#                     [-b BUILD_DIR] [-S]
#
# Five modes, all in the same guest session:
#   all_signaled  rv-verbs-bw, a raw libibverbs RC QP of its own (same
#                 device, same 2 processes as rivet's): every RDMA WRITE
#                 signaled, up to 511 in flight (send queue of 512, as
#                 rivet's), the CQ polled whenever the queue is full
#   manual        the same, one WR in 64 signaled and polled (selective
#                 signaling by hand, at rivet's default interval;
#                 Seriema's "DTutils (+ss)")
#   automatic     rv-verbs-bw through rivet's verbs transport (ops->put into
#                 rank 1's registered memory, rv_progress every 64 puts, one
#                 ops->flush at the end): signaling every
#                 transport.verbs.signal_interval (64) WRs and bounce
#                 buffers recycled by flush number, automatically
#                 (Seriema's "DTutils (auto)")
#   ib_send_bw    perftest's SEND bandwidth test, RC, its defaults (on
#                 rxe: TX depth 128, a completion every 100 WRs, no inline
#                 data), client and server in the guest over 192.168.77.1
#   ib_write_bw   perftest's RDMA WRITE bandwidth test, likewise
# The three rv-verbs-bw modes (configs/test-verbs.yaml: 2 processes, 1
# worker each) write from one buffer into successive slots of a 1 MiB
# region, inline up to the QP's max_inline_data (220 B asked for, as
# rivet's put does; what rxe grants is in the log); above it the raw modes
# send from their registered buffer and rivet from a bounce buffer it
# copies into. A point ends once the last write has completed.
#
# Each repetition (default 3) goes size by size, running the three
# programs (rv-verbs-bw with its three modes, ib_send_bw, ib_write_bw) side
# by side, their order rotated per repetition. Every run goes to
# bench/results/verbs-bw-runs.csv (rep,mode,size,msgs_per_s), the medians
# to bench/results/verbs-bw.csv (mode,size,msgs_per_s) and the plot to
# bench/results/verbs-bw.png (msgs/s against size, log2 x); it prints
# automatic/manual and manual/all_signaled per size (medians of the
# per-repetition ratios; target: automatic >= 0.9 x manual, both well
# above all_signaled). Emulated Soft-RoCE: only the ratios mean anything.
# Logs of the last run: BUILD_DIR/verbs-bw/. With -S, it only summarizes
# the runs file again. It waits while another qemu guest runs (two guests
# on a small machine starve each other).
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init verbs-bw
. "$here/guest.sh"
modes="all_signaled manual automatic ib_send_bw ib_write_bw"
now() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

# --- inside the guest ----------------------------------------------------
# verbs-bw.sh --in-guest BUILD RUNS LOGDIR REPS ITERS SIZES
if [ "${1:-}" = --in-guest ]; then
  build=$2 runs=$3 logs=$4 reps=$5 iters=$6 sizes=$7
  gid=${RIVET_RDMA_VM_IPV4_GID:?not in the rdma-vm guest}
  port=18515
  ib_write_bw --help > "$logs/perftest-help.txt" 2>&1 || true
  # one perftest point: server in the background, client to it
  perftest() { # tool size rep
    local tool=$1 s=$2 rep=$3 log=$logs/$1-$2-$3 spid rate
    port=$((port + 1))
    local args=(-d rxe0 -i 1 -x "$gid" -s "$s" -n "$iters" -F -p "$port")
    timeout 600 "$tool" "${args[@]}" > "$log.server" 2>&1 &
    spid=$!
    for _ in $(seq 100); do
      ss -ltn "sport = :$port" | grep -q LISTEN && break
      sleep 0.1
    done
    timeout 600 "$tool" "${args[@]}" 192.168.77.1 > "$log.client" 2>&1 ||
      echo "verbs-bw: $tool $s B failed (exit $?), see $log.client" >&2
    wait "$spid" || true
    # the client's rate; ib_send_bw's client now and then says 0.000000,
    # then the server's (the receiver's) counts
    rate=$(awk -v s="$s" '$1 == s && NF >= 5 && $NF > 0 {
           printf "%.0f", $NF * 1e6; exit }' "$log.client" "$log.server")
    [ -n "$rate" ] || { tail -5 "$log.client" >&2; return 1; }
    echo "$rep,$tool,$s,$rate" >> "$runs"
    echo "  $tool $s B: $rate msgs/s"
  }
  rivet() { # size rep
    local s=$1 rep=$2 log=$logs/rv-verbs-bw-$1-$2 m
    m=(all_signaled manual automatic)
    m=("${m[@]:$(((rep - 1) % 3))}" "${m[@]:0:$(((rep - 1) % 3))}")
    local order
    order=$(IFS=,; echo "${m[*]}")
    if ! timeout 900 "$build/bin/rivetrun" --timeout 880 --no-prefix \
         -c "$top/configs/test-verbs.yaml" "$build/bin/rv-verbs-bw" \
         -s "$s" -n "$iters" -m "$order" --csv > "$log" 2>&1; then
      tail -20 "$log" >&2
      return 1
    fi
    awk -F, -v rep="$rep" '$1 !~ /^#/ && NF == 3 && $3 ~ /^[0-9]+$/ {
      print rep "," $0; printf "  %s %s B: %s msgs/s\n", $1, $2, $3 > "/dev/stderr" }' \
      "$log" >> "$runs"
  }
  for rep in $(seq 1 "$reps"); do
    progs=(rivet ib_send_bw ib_write_bw)
    progs=("${progs[@]:$(((rep - 1) % 3))}" "${progs[@]:0:$(((rep - 1) % 3))}")
    echo "== repetition $rep/$reps: ${progs[*]}"
    for s in $sizes; do
      for p in "${progs[@]}"; do
        if [ "$p" = rivet ]; then
          rivet "$s" "$rep" || { echo "verbs-bw: rv-verbs-bw $s B failed" >&2; exit 1; }
        else
          perftest "$p" "$s" "$rep" || perftest "$p" "$s" "$rep" ||
            { echo "verbs-bw: $p $s B: no result, twice" >&2; exit 1; }
        fi
      done 2>&1
    done
  done
  exit 0
fi

# --- on the host ---------------------------------------------------------
reps=3
iters=131072
sizes="8 16 32 64 128 256 512 1024 2048 4096"
summary_only=0
while getopts "r:n:s:b:Sh" o; do
  case $o in
    r) reps=$OPTARG ;;
    n) iters=$OPTARG ;;
    s) sizes=$OPTARG ;;
    b) build=$OPTARG ;;
    S) summary_only=1 ;;
    *) usage ;;
  esac
done
build=$(bench_abs "$build")


t0=$(now)
if [ $summary_only -eq 0 ]; then
  build=$(guest_ready "$build" bin/rivetrun bin/rv-verbs-bw \
    lib/librivet-verbs.so)
  top=$(cd "$top" && pwd -P)
  # 40-60 min of guest time with the defaults (emulated Soft-RoCE
  # moves 3-15 K messages/s)
  export RIVET_RDMA_VM_TIMEOUT=${RIVET_RDMA_VM_TIMEOUT:-10800}
  guest_bench "$here/verbs-bw.sh" "rep,mode,size,msgs_per_s" "$reps" \
    "$iters" "$sizes"
  echo "verbs-bw: $(since "$t0") s for the guest run"
  for f in "$logs"/rv-verbs-bw-*; do
    sed -n '/^# /{s/^# /rv-verbs-bw: /p;q}' "$f"
    break
  done
  for t in ib_send_bw ib_write_bw; do
    for f in "$logs/$t"-*-1.client; do
      [ -e "$f" ] && { grep -E 'Max inline|TX depth|CQ Moderation|Mtu' "$f" |
        sed -E 's/^ +//; s/ +: +/: /' | paste -sd, - | sed "s/,/, /g; s/^/$t: /" || true; }
      break
    done
  done
  awk '/^# automatic [0-9]+: rank 0 RSS/ {
      if ($3 + 0 > s || ($3 + 0 == s && $7 + 0 > v)) { s = $3 + 0; v = $7 + 0 } }
    END { if (s) printf "rivet: rank 0 resident after automatic at %d B: %d MiB (largest of the repetitions)\n", s, v }' \
    "$logs"/rv-verbs-bw-* || true
fi
[ "$(wc -l < "$runs")" -gt 1 ] || fail "no runs in $runs"

# Medians per mode and size, in mode order.
awk -F, -v modes="$modes" "$median_awk"'
  NR > 1 { v[$2, $3] = v[$2, $3] " " $4; if (!($3 in seen)) { seen[$3]; sz[++ns] = $3 } }
  END {
    print "mode,size,msgs_per_s"
    nm = split(modes, m, " ")
    for (i = 1; i <= nm; i++) for (j = 1; j <= ns; j++)
      if ((m[i], sz[j]) in v) printf "%s,%s,%.0f\n", m[i], sz[j], median(v[m[i], sz[j]])
  }' "$runs" > "$csv"

echo
echo "messages/s (median of repetitions); ratios: median of per-repetition ratios"
awk -F, "$median_awk"'
  FNR == 1 { f++; next }
  f == 1 { r[$2, $3, $1] = $4; if ($1 > nrep) nrep = $1 }
  f == 2 { med[$1, $2] = $3; if (!($2 in seen)) { seen[$2]; sz[++ns] = $2 } }
  END {
    printf "%6s %12s %12s %12s %12s %12s   %9s %9s\n", "size", "all_signaled",
      "manual", "automatic", "ib_send_bw", "ib_write_bw", "auto/man", "man/all"
    miss = 0
    for (j = 1; j <= ns; j++) {
      s = sz[j]; am = ma = ""
      for (k = 1; k <= nrep; k++) {
        if (r["automatic", s, k] > 0 && r["manual", s, k] > 0)
          am = am " " r["automatic", s, k] / r["manual", s, k]
        if (r["manual", s, k] > 0 && r["all_signaled", s, k] > 0)
          ma = ma " " r["manual", s, k] / r["all_signaled", s, k]
      }
      am = am == "" ? "-" : sprintf("%.3f", median(am))
      ma = ma == "" ? "-" : sprintf("%.3f", median(ma))
      if (am != "-" && am + 0 < 0.9) miss++
      printf "%6s %12s %12s %12s %12s %12s   %9s %9s%s\n", s, med["all_signaled", s],
        med["manual", s], med["automatic", s], med["ib_send_bw", s],
        med["ib_write_bw", s], am, ma, (am != "-" && am + 0 < 0.9) ? "  < 0.9" : ""
    }
    printf "automatic >= 0.9 x manual: %s\n", miss ? "not met at " miss " size(s)" : "met at every size"
  }' "$runs" "$csv"

if command -v gnuplot > /dev/null; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  plots=""
  for m in $modes; do
    awk -F, -v m="$m" 'NR > 1 && $1 == m { print $2, $3 }' "$csv" | sort -n > "$tmp/$m.dat"
    [ -s "$tmp/$m.dat" ] || continue
    case $m in
      all_signaled) style="linespoints lw 2 lc rgb '#c00000'" ;;
      manual) style="linespoints lw 2 lc rgb '#008000'" ;;
      automatic) style="linespoints lw 2 lc rgb '#0050d0'" ;;
      ib_send_bw) style="linespoints dashtype 2 lc rgb '#a06000'" ;;
      *) style="linespoints dashtype 2 lc rgb '#606060'" ;;
    esac
    plots="$plots${plots:+, }'$tmp/$m.dat' using 1:2 with $style title '$m'"
  done
  gnuplot << EOF && echo "plot: $png"
set terminal pngcairo size 1000,650 font ',10'
set output '$png'
set termoption noenhanced
set title 'Seriema Fig. 2 on Soft-RoCE (rxe0, qemu guest): RDMA messages/s, $(tail -n +2 "$runs" | cut -d, -f1 | sort -u | wc -l) repetitions (medians)'
set xlabel 'message size (B)'; set ylabel 'messages/s'
set logscale x 2; set format x '%.0f'; set grid; set key outside right
set yrange [0:*]
plot $plots
EOF
fi
echo "csv: $csv (every run: $runs)"
echo "verbs-bw: $(since "$t0") s in all"
