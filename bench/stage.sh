#!/usr/bin/env bash
# rivet-store stage beside a plain TCP copy, between the two hosts that
# scripts/multinode.sh makes on this machine (network namespaces joined by
# a veth pair; UCX over TCP between them):
#
#   bench/stage.sh [-r REPS] [-f FILES] [-m MIB] [-b BUILD_DIR] [-P PEERS_DIR]
#                  [-p]
#
# (-p: no runs, the plot again from bench/results/stage.csv.)
# Each repetition (default 3) stages FILES (default 4) random files of MIB
# MiB (default 32) from host 0 onto both hosts, into each destination:
#   disk  a folder per host on the file system, which the two hosts share
#         here (a cluster's hosts would each write their own disk);
#   shm   each host's own /dev/shm (memory: no disk, nothing shared);
# with each of, in turn (the order alternating):
#   rivet       rivet-store stage --to DIR-%h (one process per host);
#   tcp         bench/stage_tcp.py: the files sent to host 1 over one TCP
#               connection with sendfile, as a loop of cat into /dev/tcp
#               and a listener would, while host 0 copies them into its own
#               folder (stage gives the first host a copy too);
#   tcp-sha256  the same, both writers also hashing what they write, as
#               rivet-store stage checks every file.
# Every writer writes a temporary file, fsyncs and renames it. The rate is
# host 1's, to its last file renamed: rivet's summary line counts from the
# barrier before rank 0 reads the first file, the receiver's from its
# connection's accept (its sender reads the files as it sends them).
# Open MPI's own mpirun --preload-files is not measured: it copies into
# the remote process's working folder, which on these hosts (one shared
# file system, as the namespaces share it) is the folder the file is in.
#
# Writes every run to bench/results/stage-runs.csv
# (rep,dest,impl,files,bytes,seconds,mbps,state), the medians to
# bench/results/stage.csv (dest,impl,files,file_mib,mbps,ratio,states,cpu;
# ratio: rivet's median over the implementation's, same destination), and
# a plot to
# bench/results/stage.png. With -P PEERS_DIR, the folder holding
# c2c-probe.c, each run is labelled with the machine's state.
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init stage
reps=3
nfiles=4
mib=32
peers=${PEERS_DIR:-}
plot_only=0
while getopts "r:f:m:b:P:ph" o; do
  case $o in
    r) reps=$OPTARG ;;
    f) nfiles=$OPTARG ;;
    m) mib=$OPTARG ;;
    b) build=$OPTARG ;;
    P) peers=$OPTARG ;;
    p) plot_only=1 ;;
    *) usage ;;
  esac
done
. "$here/machine-state.sh"
tmp=$(mktemp -d /tmp/rivet-stage.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
if [ $plot_only -eq 0 ]; then
machine_probe_init "$peers" "$tmp" || exit 1
mn=$top/scripts/multinode.sh
files=()
for ((i = 0; i < nfiles; i++)); do
  head -c $((mib << 20)) /dev/urandom > "$tmp/file$i.bin"
  files+=("$tmp/file$i.bin")
done
bytes=$((nfiles * (mib << 20)))

run() { # dest impl rep -> prints host 1's seconds and MB/s
  local dest=$1 impl=$2 out log=$tmp/log
  out=$tmp/out-$impl-$3
  [ "$dest" = shm ] && out=/dev/shm/rivet-stage-$impl-$3
  case $impl in
    rivet)
      "$mn" --timeout 120 -n 2 -c "$top/configs/test-ucx-hosts.yaml" \
        "$build/bin/rivet-store" stage --to "$out-%h" "${files[@]}" > "$log" 2>&1 ||
        { cat "$log" >&2; return 1; }
      sed -n 's/^host 1: staged .* in \([0-9.]*\) s, \([0-9.]*\) MB\/s$/\1 \2/p' "$log" ;;
    tcp|tcp-sha256)
      "$mn" --timeout 120 -n 2 python3 "$here/stage_tcp.py" \
        $([ "$impl" = tcp-sha256 ] && echo --sha256) 10.231.0.2 5599 "$out-%h" \
        "${files[@]}" > "$log" 2>&1 || { cat "$log" >&2; return 1; }
      sed -n 's/^tcp: [0-9]* B in \([0-9.]*\) s, \([0-9.]*\) MB\/s$/\1 \2/p' "$log" ;;
  esac
  # On disk, every host's copy whole (a host's /dev/shm goes with it).
  if [ "$dest" = disk ]; then
    local d f
    [ "$(ls -d "$out"-* | wc -l)" -eq 2 ] || { echo "stage: $impl: not on both hosts" >&2; return 1; }
    for d in "$out"-*; do
      for f in "${files[@]}"; do
        cmp -s "$f" "$d/$(basename "$f")" || { echo "stage: $impl: $d/$(basename "$f") differs" >&2; return 1; }
      done
    done
    rm -rf "$out"-*
  fi
}

echo "rep,dest,impl,files,bytes,seconds,mbps,state" > "$runs"
impls="rivet tcp tcp-sha256"
for ((rep = 1; rep <= reps; rep++)); do
  for dest in disk shm; do
    order=$impls
    [ $((rep % 2)) -eq 0 ] && order=$(echo $impls | tr ' ' '\n' | tac | tr '\n' ' ')
    for impl in $order; do
      before=$(machine_probe "$tmp/states.csv" "$rep,$dest,$impl,before")
      r=$(run "$dest" "$impl" "$rep") && [ -n "$r" ] ||
        { echo "stage: $dest $impl: no rate in its output" >&2; exit 1; }
      after=$(machine_probe "$tmp/states.csv" "$rep,$dest,$impl,after")
      set -- $r
      echo "$rep,$dest,$impl,$nfiles,$bytes,$1,$2,$(machine_state_of "$before" "$after")" >> "$runs"
      echo "rep $rep $dest $impl: $2 MB/s ($1 s)"
    done
  done
done

cpu=$(machine_model)
awk -F, -v files="$nfiles" -v mib="$mib" -v cpu="$cpu" "$median_awk"'
  NR > 1 { k = $2 "," $3; v[k] = v[k] " " $7; s[k] = s[k] (s[k] ? ";" : "") $8
           if (!(k in seen)) { seen[k] = 1; order[n++] = k } }
  END {
    print "dest,impl,files,file_mib,mbps,ratio,states,cpu"
    for (i = 0; i < n; i++) {
      split(order[i], p, ",")
      m = median(v[order[i]]); r = median(v[p[1] ",rivet"])
      printf "%s,%d,%d,%.1f,%.2f,%s,%s\n", order[i], files, mib, m, (m > 0 ? r / m : 0), s[order[i]], cpu
    }
  }' "$runs" > "$csv"
echo; cat "$csv"
fi # plot_only
nfiles=$(awk -F, 'NR == 2 {print $3}' "$csv")
mib=$(awk -F, 'NR == 2 {print $4}' "$csv")
reps=$(awk -F, 'NR == 2 {print split($7, a, ";")}' "$csv")

command -v gnuplot > /dev/null || { echo "stage: no gnuplot, no plot"; exit 0; }
awk -F, 'NR > 1 { printf "\"%s, %s\" %s\n", $2, ($1 == "disk" ? "disk" : "/dev/shm"), $5 }' \
  "$csv" > "$tmp/plot.dat"
gnuplot <<GP
set terminal pngcairo size 1080,540 noenhanced
set output "$png"
set title "Staging $nfiles files of $mib MiB onto a second host over TCP (a veth pair), into a disk the hosts share or each host's /dev/shm\nhost 1's rate: fetch or receive, check, write with fsync; medians of $reps runs"
set style fill solid 0.7 border -1
set boxwidth 0.6
set yrange [0:*]
set ylabel "MB/s (10^6 bytes per second)"
set xtics rotate by -25
set bmargin 6
set rmargin 14
set grid ytics
plot "$tmp/plot.dat" using 0:2:xtic(1) with boxes notitle, \
     "" using 0:2:(sprintf("%.0f MB/s", \$2)) with labels offset 0,1 notitle
GP
echo "plot: $png"
