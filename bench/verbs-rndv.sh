#!/usr/bin/env bash
# Large active messages over RC: the RDMA-read rendezvous against the
# RDMA-write-with-immediate one, and rivet's own (its AM path), on the
# Soft-RoCE device rxe0 of the qemu guest of scripts/rdma-vm.sh.
#
#   bench/verbs-rndv.sh [-r REPS] [-s SIZES] [-W WINDOWS] [-b BUILD_DIR] [-S]
#
# Each repetition (default 5) runs rv-verbs-rndv once (2 processes x 1
# worker, configs/test-verbs.yaml), which at every window and size runs the
# three protocols back to back, their order rotated per repetition:
#   read       raw verbs: RTS; the receiver RDMA-READs and answers FIN
#   write_imm  raw verbs: RTS; the receiver answers CTS with a buffer; the
#              sender RDMA-WRITEs WITH IMMEDIATE into it
#   rivet      rv_send over rivet's verbs transport (read rendezvous, the
#              payload registered per message)
# Sizes default to 16 KiB - 4 MiB (-s "16384,65536,..."), windows (transfers
# in flight) to 1 and 8 (-W "1,8"); with window 1 the inverse rate is the
# latency of one transfer. Every run goes to
# bench/results/verbs-rndv-runs.csv (rep,protocol,size,window,
# transfers_per_s,mb_per_s), the medians to bench/results/verbs-rndv.csv
# (protocol,size,window,transfers_per_s,mb_per_s) and a plot to
# bench/results/verbs-rndv.png. It prints write_imm/read (the protocol
# choice) and rivet/read (rivet against the same protocol by hand), medians
# of the per-repetition ratios. Emulated Soft-RoCE: only ratios mean
# anything, and a NIC that moves payloads itself may rank them otherwise.
# With -S it only summarizes the runs file again. It waits while another
# qemu guest runs.
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init verbs-rndv
. "$here/guest.sh"
modes="read write_imm rivet"
now() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }'; }

# --- inside the guest ----------------------------------------------------
# verbs-rndv.sh --in-guest BUILD RUNS LOGDIR REPS SIZES WINDOWS
if [ "${1:-}" = --in-guest ]; then
  build=$2 runs=$3 logs=$4 reps=$5 sizes=$6 windows=$7
  for rep in $(seq 1 "$reps"); do
    m=(read write_imm rivet)
    m=("${m[@]:$(((rep - 1) % 3))}" "${m[@]:0:$(((rep - 1) % 3))}")
    order=$(IFS=,; echo "${m[*]}")
    echo "== repetition $rep/$reps: $order"
    log=$logs/rv-verbs-rndv-$rep
    if ! timeout 1800 "$build/bin/rivetrun" --timeout 1780 --no-prefix \
         -c "$top/configs/test-verbs.yaml" "$build/bin/rv-verbs-rndv" \
         -s "$sizes" -W "$windows" -m "$order" --csv > "$log" 2>&1; then
      tail -20 "$log" >&2
      exit 1
    fi
    awk -F, -v rep="$rep" '$1 !~ /^#/ && NF == 5 && $2 ~ /^[0-9]+$/ {
      print rep "," $0
      printf "  %s %s B, window %s: %s transfers/s\n", $1, $2, $3, $4 > "/dev/stderr" }' \
      "$log" >> "$runs"
  done 2>&1
  exit 0
fi

# --- on the host ---------------------------------------------------------
reps=5
sizes=16384,65536,262144,1048576,4194304
windows=1,8
summary_only=0
while getopts "r:s:W:b:Sh" o; do
  case $o in
    r) reps=$OPTARG ;;
    s) sizes=$OPTARG ;;
    W) windows=$OPTARG ;;
    b) build=$OPTARG ;;
    S) summary_only=1 ;;
    *) usage ;;
  esac
done
build=$(bench_abs "$build")


t0=$(now)
if [ $summary_only -eq 0 ]; then
  build=$(guest_ready "$build" bin/rivetrun bin/rv-verbs-rndv \
    lib/librivet-verbs.so)
  top=$(cd "$top" && pwd -P)
  export RIVET_RDMA_VM_TIMEOUT=${RIVET_RDMA_VM_TIMEOUT:-7200}
  guest_bench "$here/verbs-rndv.sh" \
    "rep,protocol,size,window,transfers_per_s,mb_per_s" "$reps" "$sizes" \
    "$windows"
  echo "verbs-rndv: $(since "$t0") s for the guest run"
  sed -n '/^# /{s/^# /rv-verbs-rndv: /p;q}' "$logs/rv-verbs-rndv-1"
fi
[ "$(wc -l < "$runs")" -gt 1 ] || fail "no runs in $runs"

# Medians per protocol, size and window.
awk -F, -v modes="$modes" "$median_awk"'
  NR > 1 { k = $3 SUBSEP $4; t[$2, k] = t[$2, k] " " $5; b[$2, k] = b[$2, k] " " $6
           if (!(k in seen)) { seen[k]; key[++nk] = k } }
  END {
    print "protocol,size,window,transfers_per_s,mb_per_s"
    nm = split(modes, m, " ")
    for (i = 1; i <= nm; i++) for (j = 1; j <= nk; j++)
      if ((m[i], key[j]) in t) {
        split(key[j], sw, SUBSEP)
        printf "%s,%s,%s,%.1f,%.1f\n", m[i], sw[1], sw[2],
          median(t[m[i], key[j]]), median(b[m[i], key[j]])
      }
  }' "$runs" > "$csv"

echo
echo "MB/s (median of repetitions); ratios: median of per-repetition ratios"
awk -F, "$median_awk"'
  FNR == 1 { f++; next }
  f == 1 { r[$2, $3, $4, $1] = $5; if ($1 > nrep) nrep = $1 }
  f == 2 { mb[$1, $2, $3] = $5; us[$1, $2, $3] = 1e6 / $4
           k = $3 SUBSEP $2; if (!(k in seen)) { seen[k]; key[++nk] = k } }
  END {
    printf "%6s %8s %10s %10s %10s %10s %10s %11s %11s\n", "window", "size",
      "read", "write_imm", "rivet", "read us", "rivet us", "wimm/read", "rivet/read"
    for (j = 1; j <= nk; j++) {
      split(key[j], ws, SUBSEP); w = ws[1]; s = ws[2]; wi = ri = ""
      for (k = 1; k <= nrep; k++) if (r["read", s, w, k] > 0) {
        if (r["write_imm", s, w, k] > 0) wi = wi " " r["write_imm", s, w, k] / r["read", s, w, k]
        if (r["rivet", s, w, k] > 0) ri = ri " " r["rivet", s, w, k] / r["read", s, w, k]
      }
      printf "%6s %8s %10.1f %10.1f %10.1f %10.0f %10.0f %11s %11s\n", w, s,
        mb["read", s, w], mb["write_imm", s, w], mb["rivet", s, w],
        us["read", s, w], us["rivet", s, w],
        wi == "" ? "-" : sprintf("%.3f", median(wi)),
        ri == "" ? "-" : sprintf("%.3f", median(ri))
    }
  }' "$runs" "$csv"

if command -v gnuplot > /dev/null; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  plots=""
  for m in $modes; do
    for w in ${windows//,/ }; do
      awk -F, -v m="$m" -v w="$w" 'NR > 1 && $1 == m && $3 == w { print $2, $5 }' \
        "$csv" | sort -n > "$tmp/$m-$w.dat"
      [ -s "$tmp/$m-$w.dat" ] || continue
      case $m in
        read) c="#008000" ;; write_imm) c="#c00000" ;; *) c="#0050d0" ;;
      esac
      d=$([ "$w" = 1 ] && echo 2 || echo 1)
      plots="$plots${plots:+, }'$tmp/$m-$w.dat' using 1:2 with linespoints lw 2 dashtype $d lc rgb '$c' title '$m, window $w'"
    done
  done
  gnuplot << EOF && echo "plot: $png"
set terminal pngcairo size 1000,650 font ',10'
set output '$png'
set termoption noenhanced
set title 'Large AMs on Soft-RoCE (rxe0, qemu guest): read vs write-with-immediate rendezvous, and rivet (medians)'
set xlabel 'message size (B)'; set ylabel 'MB/s'
set logscale x 2; set format x '%.0f'; set grid; set key outside right
set yrange [0:*]
plot $plots
EOF
fi
echo "csv: $csv (every run: $runs)"
echo "verbs-rndv: $(since "$t0") s in all"
