#!/usr/bin/env bash
# The object store's figures ("Plasma over RDMA", Figs. 2.6-2.7 and
# 4.3-4.6) with their baselines in the same run:
#   rivet   rv-store-bench: remote fetches, eager only (store.rndv_threshold
#           above every size), rendezvous only (0) and the hybrid (auto:
#           the threshold calibrated at job start, which it prints), over
#           UCX shm and UCX tcp, 2 processes pinned to cores 0 and 1;
#           local put/get/delete and memcpy on shm
#   redis   redis-server on loopback (pinned to core 1, no persistence),
#           GET of keys the client does not hold, and SET/GET/DEL
#   socket  a plain TCP socket transfer of the same bytes on loopback
#
#   bench/store.sh [-r REPS] [-s SIZES] [-b BUILD_DIR] [-S]
#
# Sizes default to 1 KiB - 16 MiB in powers of four, and 32 KiB. Every run
# goes to bench/results/store-runs.csv, the medians over the repetitions
# (default 3) to bench/results/store.csv with the columns
#   system,transport,op,size,latency_us,mb_per_s
# (system rivet-eager, rivet-rndv, rivet-hybrid, redis, socket or memcpy;
# transport shm, tcp or local; op fetch, put, get or delete), and a plot to
# bench/results/store.png. It prints the crossover between eager and
# rendezvous fetches it found and the targets' ratios. It installs
# redis-server and libhiredis-dev (Debian packages) when they are missing.
# With -S it only summarizes an earlier runs file.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
median_awk=$(cat "$here/median.awk")
top=$(dirname "$here")
build=$top/build
reps=3
sizes=1024,4096,16384,32768,65536,262144,1048576,4194304,16777216
summary_only=0
while getopts "r:s:b:Sh" o; do
  case $o in
    r) reps=$OPTARG ;;
    s) sizes=$OPTARG ;;
    b) build=$OPTARG ;;
    S) summary_only=1 ;;
    *) sed -n "2,22p" "$0"; exit 2 ;;
  esac
done

results=$here/results
mkdir -p "$results"
runs=$results/store-runs.csv
csv=$results/store.csv
png=$results/store.png
fail() { echo "store: $*" >&2; exit 1; }
port=$((20000 + RANDOM % 20000))

rivet_run() { # rep system transport threshold [args]
  local rep=$1 sys=$2 tp=$3 thr=$4 cfg out
  shift 4
  cfg=$top/configs/store.yaml
  [ "$tp" = tcp ] && cfg=$tmp/store-tcp.yaml
  out=$(RIVET_STORE_RNDV_THRESHOLD=$thr RIVET_STORE_CAPACITY=4GiB \
        timeout 600 "$build/bin/rivetrun" --timeout 580 -c "$cfg" \
        "$build/bin/rv-store-bench" -s "$sizes" -m "$sys" -T "$tp" "$@" \
        2> "$tmp/err") || { tail -5 "$tmp/err" >&2; fail "$sys over $tp failed"; }
  echo "$out" | grep -E '^[a-z-]+,' | sed "s/^/$rep,/" >> "$runs"
  echo "$out" | grep '^#' | sed "s/^# /  /"
}

peers_run() { # rep
  local rep=$1 out pid
  taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save "" \
    --appendonly no --daemonize no --logfile "$tmp/redis.log" &
  pid=$!
  for _ in $(seq 50); do
    redis-cli -p "$port" ping > /dev/null 2>&1 && break
    sleep 0.1
  done
  out=$(taskset -c 0 "$build/bin/store-peers" redis "$port" "$sizes") ||
    { kill "$pid"; fail "the redis client failed"; }
  kill "$pid"; wait "$pid" 2> /dev/null || true
  echo "$out" | sed "s/^/$rep,/" >> "$runs"
  taskset -c 1 "$build/bin/store-peers" socket-server $((port + 1)) &
  pid=$!
  out=$(taskset -c 0 "$build/bin/store-peers" socket $((port + 1)) "$sizes") ||
    { kill "$pid"; fail "the socket client failed"; }
  wait "$pid" 2> /dev/null || true
  echo "$out" | sed "s/^/$rep,/" >> "$runs"
}

if [ $summary_only -eq 0 ]; then
  "$top/scripts/install-deps.sh" redis-server libhiredis-dev
  if [ ! -x "$build/bin/store-peers" ] ||
     ! "$build/bin/store-peers" redis 1 1 2>&1 | grep -q "cannot connect"; then
    cmake -S "$top" -B "$build" > /dev/null
    cmake --build "$build" -j "$(nproc)" --target rv-store-bench store-peers \
      rivet-ucx > /dev/null
  fi
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  sed 's/tls: sm,self.*/tls: tcp,self\n    net_devices: lo/' \
    "$top/configs/store.yaml" > "$tmp/store-tcp.yaml"
  echo "rep,system,transport,op,size,latency_us,mb_per_s" > "$runs"
  for rep in $(seq 1 "$reps"); do
    echo "== repetition $rep/$reps"
    peers_run "$rep"
    for tp in shm tcp; do
      rivet_run "$rep" rivet-eager "$tp" 1GiB
      rivet_run "$rep" rivet-rndv "$tp" 0
      # The hybrid with its threshold calibrated at job start.
      if [ "$tp" = shm ]; then
        rivet_run "$rep" rivet-hybrid "$tp" auto -l
      else
        rivet_run "$rep" rivet-hybrid "$tp" auto
      fi
    done
  done
fi
[ -s "$runs" ] || fail "no runs in $runs"

{
  echo "system,transport,op,size,latency_us,mb_per_s"
  tail -n +2 "$runs" | awk -F, "$median_awk"'
    {
      k = $2 "," $3 "," $4 "," $5
      if (!(k in l)) order[++nk] = k
      l[k] = l[k] " " $6; m[k] = m[k] " " $7
    }
    END {
      for (i = 1; i <= nk; i++)
        printf "%s,%.3f,%.1f\n", order[i], median(l[order[i]]), median(m[order[i]])
    }'
} > "$csv"

# The targets, from the medians.
awk -F, '
  function h(b) { return b >= 1048576 ? b / 1048576 " MiB" : b / 1024 " KiB" }
  NR > 1 { v[$1 "," $2 "," $3 "," $4] = $6; if (!($4 in seen)) { seen[$4] = 1; sz[++n] = $4 } }
  END {
    for (t = 1; t <= 2; t++) {
      tp = t == 1 ? "shm" : "tcp"; cross = ""
      for (i = 1; i <= n; i++) {
        s = sz[i]; e = v["rivet-eager," tp ",fetch," s]; r = v["rivet-rndv," tp ",fetch," s]
        if (cross == "" && (r > e)) cross = h(s)
      }
      printf "crossover over %s: rendezvous beats eager from %s on\n", tp, cross == "" ? "no size measured" : cross
    }
    print ""
    print "target                                   size       ratio  (met?)"
    for (t = 1; t <= 2; t++) {
      tp = t == 1 ? "shm" : "tcp"
      for (i = 1; i <= n; i++) {
        s = sz[i]; e = v["rivet-eager," tp ",fetch," s]; r = v["rivet-rndv," tp ",fetch," s]
        y = v["rivet-hybrid," tp ",fetch," s]; best = (e > r) ? e : r
        if (best > 0) printf "hybrid / best of eager, rndv (%s)         %-9s  %.3f  (%s)\n", tp, h(s), y / best, (y / best >= 0.95 ? "met" : "not met")
      }
    }
    for (i = 1; i <= n; i++) {
      s = sz[i]; if (s < 4096) continue
      y = v["rivet-hybrid,tcp,fetch," s]; d = v["redis,tcp,fetch," s]; want = (s <= 262144) ? 2 : 1
      if (d > 0) printf "rivet tcp / redis GET (>= %d)              %-9s  %.3f  (%s)\n", want, h(s), y / d, (y / d >= want ? "met" : "not met")
    }
    s = sz[n]; y = v["rivet-hybrid,shm,fetch," s]; m = v["memcpy,shm,fetch," s]
    if (m > 0) printf "rivet shm / memcpy (>= 0.9)              %-9s  %.3f  (%s)\n", h(s), y / m, (y / m >= 0.9 ? "met" : "not met")
    split("put get delete", ops, " ")
    for (i = 1; i <= n; i++)
      for (o = 1; o <= 3; o++) {
        s = sz[i]; y = v["rivet-hybrid,local," ops[o] "," s]; d = v["redis,tcp," ops[o] "," s]
        if (d > 0 && s <= 65536) printf "local %-6s / redis (>= 5)               %-9s  %.3f  (%s)\n", ops[o], h(s), y / d, (y / d >= 5 ? "met" : "not met")
      }
  }' "$csv"

if command -v gnuplot > /dev/null; then
  gp=$(mktemp -d)
  for sys in rivet-eager rivet-rndv rivet-hybrid redis socket memcpy; do
    for tp in shm tcp; do
      awk -F, -v s="$sys" -v t="$tp" 'NR > 1 && $1 == s && $2 == t && $3 == "fetch" { print $4, $6 }' \
        "$csv" > "$gp/$sys-$tp.dat"
    done
  done
  for op in put get delete; do
    awk -F, -v o="$op" 'NR > 1 && $1 == "rivet-hybrid" && $3 == o { print $4, 1e6 / $5 }' "$csv" > "$gp/rivet-$op.dat"
    awk -F, -v o="$op" 'NR > 1 && $1 == "redis" && $3 == o { print $4, 1e6 / $5 }' "$csv" > "$gp/redis-$op.dat"
  done
  plots=""
  for f in "$gp"/*-shm.dat "$gp"/*-tcp.dat; do
    [ -s "$f" ] || continue
    name=$(basename "$f" .dat)
    plots="$plots${plots:+, }'$f' using 1:2 with linespoints title '$name'"
  done
  ops=""
  for f in "$gp"/rivet-put.dat "$gp"/rivet-get.dat "$gp"/rivet-delete.dat \
           "$gp"/redis-put.dat "$gp"/redis-get.dat "$gp"/redis-delete.dat; do
    [ -s "$f" ] || continue
    ops="$ops${ops:+, }'$f' using 1:2 with linespoints title '$(basename "$f" .dat)'"
  done
  gnuplot <<EOF
set terminal pngcairo size 1400,600 font ',10'
set output '$png'
set multiplot layout 1,2 title 'rivet object store vs Redis, a socket and memcpy (medians of $reps runs)'
set termoption noenhanced
set logscale x 2; set logscale y; set grid; set key top left
set xrange [768:22000000]
set xtics ("1 KiB" 1024, "4 KiB" 4096, "16 KiB" 16384, "64 KiB" 65536, "256 KiB" 262144, "1 MiB" 1048576, "4 MiB" 4194304, "16 MiB" 16777216)
set xlabel 'object size'; set ylabel 'MB/s (one fetch at a time)'
set title 'remote fetch throughput'
plot $plots
set ylabel 'operations per second'
set title 'local put / get / delete (rivet) and SET / GET / DEL (Redis)'
plot $ops
unset multiplot
EOF
  rm -rf "$gp"
fi
echo
echo "every run: $runs"
echo "medians:   $csv"
echo "plot:      $png"
