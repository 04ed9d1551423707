#!/usr/bin/env bash
# Soak: rivet under continuous load, with every rank's memory, open
# descriptors and shared memory sampled every second, to show that nothing
# leaks slowly. Loopback only; it stops by itself.
#
#   bench/soak.sh [-d SECONDS] [-B BUILD] [-c JOB.yaml] [-o CSV] [-l LOADS]
#                 [-p]
#
# (-p: no runs, the plot of CSV again.)
# Three loads (-l: a comma-separated choice of them, default all), an
# equal share of the time each (default 30 minutes in all), as
# 2 processes of 2 worker threads:
#   am     rv-soak -m am: calls among all workers, blocking and
#          asynchronous, a quiesce per round
#   store  rv-soak -m store: objects created, fetched while their owner
#          deletes them, and deleted
#   mcts   rv-mcts-match: Hex games between the distributed search and the
#          sequential UCT, one after another (ops_per_s: games per second,
#          at the end of each game)
# Writes bench/results/soak.csv (t_s,test,rank,rss_kib,fds,shm_kib,
# ops_per_s; shm_kib: the /dev/shm files the rank maps, each counted
# once), bench/results/soak.png, soak-peaks.csv beside the CSV
# (t_s,rank,objects,kib: each new peak of the objects a rank's store held
# at once, as rv-soak printed it, to read the store's RSS steps against),
# and prints per test and rank the slope of
# RSS and descriptors after the warm-up (the first fifth of the test's
# time), as percent per 10 minutes of their mean: the target is below 1.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init soak
seconds=1800
job=$top/configs/test-ucx-shm.yaml
out=$here/results/soak.csv
loads=am,store,mcts
plot_only=0
while getopts d:B:c:o:l:ph opt; do
  case $opt in
    d) seconds=$OPTARG ;;
    B) build=$OPTARG ;;
    c) job=$OPTARG ;;
    o) out=$OPTARG ;;
    l) loads=$OPTARG ;;
    p) plot_only=1 ;;
    *) usage ;;
  esac
done
IFS=, read -r -a load_list <<< "$loads"
for l in "${load_list[@]}"; do
  case $l in am|store|mcts) ;; *) echo "$0: unknown load $l" >&2; exit 2 ;; esac
done
# The plot of $out: every load's ranks' resident memory over time, one
# data block per load and rank (the CSV interleaves them).
plot() {
  command -v gnuplot > /dev/null || return 0
  local png=${out%.csv}.png dat=${out%.csv}.plot.dat secs titles=() test rank
  secs=$(awk -F, 'NR > 1 && $1 > m { m = $1 } END { print m + 1 }' "$out")
  : > "$dat"
  for test in "${load_list[@]}"; do
    for rank in 0 1; do
      awk -F, -v t="$test" -v r="$rank" 'NR > 1 && $2 == t && $3 == r { print $1 / 60, $4 / 1024 }' \
        "$out" >> "$dat"
      printf '\n\n' >> "$dat"
      titles+=("$test-rank-$rank")
    done
  done
  gnuplot <<GP && echo "plot: $png"
set terminal pngcairo size 1000,500 noenhanced
set output '$png'
set title "Soak: each rank's resident memory under continuous load, sampled every second (about $secs s per load)"
set xlabel 'time in the test (min)'; set ylabel 'resident memory (MiB)'
set key outside; set grid
plot for [i=0:${#titles[@]}-1] '$dat' index i using 1:2 with lines lw 2 title word("${titles[*]}", i+1)
GP
  rm -f "$dat"
}
if [ $plot_only -eq 1 ]; then
  # The loads the CSV holds, in the order of -l.
  kept=()
  for l in "${load_list[@]}"; do
    grep -q "^[0-9.]*,$l," "$out" && kept+=("$l")
  done
  load_list=("${kept[@]}")
  plot
  exit 0
fi
cmake --build "$build" -j "$(nproc)" --target rv-soak rv-mcts-match rivetrun \
  rivet-ucx > /dev/null
per=$(( seconds / ${#load_list[@]} ))
[ "$per" -ge 10 ] || { echo "$0: -d must give each load 10 s at least" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RIVET_JOB_THREADS=2

# One sample of rank pid $3 of test $1 at time $2: appended to the CSV.
sample() {
  local test=$1 t=$2 pid=$3 rank=$4 ops=$5 rss fds shm
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2> /dev/null) || return 0
  [ -n "$rss" ] || return 0
  fds=$(ls "/proc/$pid/fd" 2> /dev/null | wc -l)
  # The /dev/shm files the rank maps, each once, by their size on disk.
  shm=$(awk '$6 ~ /^\/dev\/shm\// { print $6 }' "/proc/$pid/maps" 2> /dev/null |
        sort -u | while read -r f; do stat -Lc %s "$f" 2> /dev/null || echo 0; done |
        awk '{ s += $1 } END { printf "%d", s / 1024 }')
  echo "$t,$test,$rank,$rss,$fds,${shm:-0},$ops" >> "$out"
}

# Runs job "$@" as test $1 for $per seconds, sampling its ranks.
run_test() {
  local test=$1 log=$work/$1.log t0 t ops pids
  shift
  : > "$log"
  "$build/bin/rivetrun" --no-prefix --timeout $(( per + 30 )) -c "$job" -n 2 \
    "$@" > "$log" 2>&1 &
  local runpid=$!
  t0=$(date +%s.%N)
  while kill -0 "$runpid" 2> /dev/null; do
    sleep 1
    t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.0f", b - a }')
    ops=$(tail -n 50 "$log" | sed -n 's/^soak: t=[0-9.]* ops_per_s=\([0-9.]*\)$/\1/p' | tail -n 1)
    # (grep -c exits 1 while no game has ended: not a failure here)
    [ "$test" = mcts ] && ops=$({ grep -c '^game ' "$log" || true; } |
                               awk -v t="$t" '{ if (t > 0) printf "%.3f", $1 / t }')
    pids=$(pgrep -P "$runpid" || true)
    local rank=0
    for pid in $pids; do
      sample "$test" "$t" "$pid" "$rank" "${ops:-}"
      rank=$(( rank + 1 ))
    done
    if [ "$test" = mcts ] && [ "$t" -ge "$per" ]; then
      kill -TERM "$runpid" 2> /dev/null || true
    fi
  done
  if [ "$test" = store ]; then
    { echo "t_s,rank,objects,kib"
      sed -n 's/^soak: rank \([0-9]*\) t=\([0-9.]*\) store_peak_objects=\([0-9]*\) store_peak_kib=\([0-9]*\)$/\2,\1,\3,\4/p' "$log"
    } > "${out%.csv}-peaks.csv"
  fi
  wait "$runpid" || {
    rc=$?
    # The MCTS games are ended by the clock: rivetrun then exits 143.
    if [ "$test" != mcts ] || [ "$rc" != 143 ]; then
      echo "$0: the $test load failed ($rc):" >&2
      tail -n 20 "$log" >&2
      return 1
    fi
  }
}

echo "t_s,test,rank,rss_kib,fds,shm_kib,ops_per_s" > "$out"
for l in "${load_list[@]}"; do
  case $l in
    am) run_test am "$build/bin/rv-soak" -m am -d "$per" ;;
    store) run_test store "$build/bin/rv-soak" -m store -d "$per" ;;
    mcts) run_test mcts "$build/bin/rv-mcts-match" --games 1000000 --size 7 \
            --ms 20 ;;
  esac
done
echo "$0: wrote $out ($(( $(wc -l < "$out") - 1 )) samples, job file $job)"

# The slopes after the warm-up: least squares over t, as percent of the
# mean per 10 minutes.
awk -F, -v warm=$(( per / 5 )) 'NR > 1 && $1 >= warm {
    k = $2 "," $3; n[k]++; st[k] += $1; stt[k] += $1 * $1
    sr[k] += $4; str[k] += $1 * $4; sf[k] += $5; stf[k] += $1 * $5
  }
  END {
    for (k in n) {
      d = n[k] * stt[k] - st[k] * st[k]
      if (n[k] < 3 || d == 0) continue
      br = (n[k] * str[k] - st[k] * sr[k]) / d
      bf = (n[k] * stf[k] - st[k] * sf[k]) / d
      mr = sr[k] / n[k]; mf = sf[k] / n[k]
      printf "%s,%d,%.0f,%.2f,%.1f,%.2f\n", k, n[k], mr,
        mr ? 100 * br * 600 / mr : 0, mf, mf ? 100 * bf * 600 / mf : 0
    }
  }' "$out" | sort |
  { echo "test,rank,samples,rss_mean_kib,rss_slope_pct_per_10min,fds_mean,fds_slope_pct_per_10min"
    cat; } | tee "${out%.csv}-slopes.csv" | column -s, -t

plot
