#!/usr/bin/env bash
# The object store's figures ("Plasma over RDMA", Figs. 2.6-2.7 and
# 4.3-4.6) with like-for-like baselines in the same repetitions:
#   rivet   rv-store-bench: remote fetches, eager only (store.rndv_threshold
#           above every size), rendezvous only (0) and the hybrid (auto:
#           the threshold calibrated at job start, which it prints), over
#           UCX shm and UCX tcp, 2 processes pinned by placement core (the
#           fetching rank 0 on cpu 0, the objects' rank 1 on cpu 1), both
#           busy-polling; local put/get/delete and memcpy on rank 0
#   raw     the transport a fetch runs on, through ucx_perftest pinned as
#           rivet is (client on cpu 0, server on cpu 1): over shm
#           ucp_get, one at a time (-O 1), system ucx-get; over tcp, where
#           UCX's get is not a fetch's path (about 1 ms each), a fetch's
#           two messages: ucp_am_lat's one-way latency of a 64-byte
#           request plus that of SIZE bytes, system ucx-am-lat; and
#           ucp_am_bw at SIZE (its default window; op stream: the time per
#           message when they stream), system ucx-am-bw
#   redis   redis-server on loopback (cpu 1, no persistence), its client on
#           cpu 0: redis-hiredis, hiredis's blocking client, GET of keys
#           it does not hold and SET/GET/DEL; redis-bench-P1 and
#           redis-bench-P16, redis-benchmark as its users drive it
#           (`-t set,get -d SIZE -c 1 -P 1` or `-P 16`: its GET reads the
#           SIZE-byte value its SET wrote, which the script checks with
#           STRLEN); P1's latency is redis-benchmark's median (to 1 us),
#           P16's the time per GET (1 / GETs per second: a pipelined
#           GET's own latency is its batch's)
#   socket  one TCP connection on loopback (server cpu 1, client cpu 0)
#           moving the same bytes: socket-blocking, both sides blocking in
#           the kernel on every send and receive; socket-busypoll, both
#           sides busy-polling with non-blocking calls, as rivet does
#   uthash  the local operations' in-process baseline (store-peers local,
#           cpu 0): a uthash table plus memcpy, its heap faulted in at
#           start as the store's memory is (store.preallocate)
# Within a repetition the baselines run before rivet in odd repetitions
# and after it in even ones.
#
#   bench/store.sh [-r REPS] [-s SIZES] [-b BUILD_DIR] [-P PEERS_DIR]
#                  [-o OUT_DIR] [-S]
#
# Sizes (-s, comma-separated bytes) default to 1 KiB - 16 MiB in powers of
# four, and 32 KiB; repetitions (-r) to 3. -P PEERS_DIR (or $PEERS_DIR):
# the folder holding the machine-state probe c2c-probe.c, run before and
# after each repetition (the round trip of a cache line between cpu 0 and
# cpu 1, and 1 MiB copies; a repetition is "fast", "slow" or "loaded", or
# "fast>slow" if it changed, as bench/amlong.sh labels its runs); without
# it the runs are "unprobed". The files go to OUT_DIR (-o; default
# bench/results): every probe to store-state.csv, every run to
# store-runs.csv (rep, the row, state, version, binding, cpu), the medians
# over the repetitions to store.csv with the columns
#   system,transport,op,size,latency_us,mb_per_s,store_over_raw,version,
#   binding,states,cpu
# (system rivet-eager, rivet-rndv, rivet-hybrid, ucx-get, ucx-am-lat,
# ucx-am-bw, redis-hiredis, redis-bench-P1, redis-bench-P16,
# socket-blocking, socket-busypoll, uthash or memcpy; transport shm, tcp or
# local; op fetch, stream, put, get or delete; MB = 10^6 B, mb_per_s =
# size / latency). store_over_raw is, for rivet's fetches, the median over
# repetitions of the fetch's latency over the raw transport's of the same
# size in the same repetition (ucx-get over shm, ucx-am-lat over tcp) and,
# for rivet's local operations, over uthash's; empty elsewhere. version is
# the peer's (redis-server --version, ucx_info -v, the kernel for sockets;
# rivet's commit), binding its cores, states how many repetitions ran in
# each machine state, cpu lscpu's model name. A plot goes to store.png.
# At the end it prints the table of rivet beside every baseline with the
# ratios, the crossover between eager and rendezvous, and the targets. It installs redis-server and libhiredis-dev
# (Debian packages) when they are missing. With -S it only summarizes an
# earlier runs file.
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init store
reps=3
sizes=1024,4096,16384,32768,65536,262144,1048576,4194304,16777216
summary_only=0
peers=${PEERS_DIR:-}
while getopts "r:s:b:P:o:Sh" o; do
  case $o in
    r) reps=$OPTARG ;;
    s) sizes=$OPTARG ;;
    b) build=$OPTARG ;;
    P) peers=$OPTARG ;;
    o) results=$OPTARG ;;
    S) summary_only=1 ;;
    *) usage ;;
  esac
done

state_csv=$results/store-state.csv
port=$((20000 + RANDOM % 20000))
. "$here/ucx-perftest.sh"
# ucx_perftest's client is the side that fetches: where rivet's rank 0 is.
perftest_client_cpu=0
perftest_server_cpu=1
pair="client cpu 0; server cpu 1"

# iters SIZE -> operations for a baseline tool: about 256 MiB moved,
# 50 .. 10000
iters() {
  local n=$(((256 << 20) / $1))
  [ $n -lt 50 ] && n=50
  [ $n -gt 10000 ] && n=10000
  echo $n
}

# tag VERSION BINDING: appends them to the rows read, into the repetition's
# rows
tag() { awk -v v="$1" -v b="$2" '/^[A-Za-z0-9-]+,/ { print $0 "," v "," b }' >> "$tmp/rep"; }

rivet_run() { # system transport threshold [args]
  local sys=$1 tp=$2 thr=$3 cfg out
  shift 3
  cfg=$top/configs/store.yaml
  [ "$tp" = tcp ] && cfg=$tmp/store-tcp.yaml
  out=$(RIVET_STORE_RNDV_THRESHOLD=$thr RIVET_STORE_CAPACITY=4GiB \
        timeout 600 "$build/bin/rivetrun" --timeout 580 -c "$cfg" \
        "$build/bin/rv-store-bench" -s "$sizes" -m "$sys" -T "$tp" "$@" \
        2> "$tmp/err") || { tail -5 "$tmp/err" >&2; fail "$sys over $tp failed"; }
  echo "$out" | grep '^#' | sed "s/^# /  /"
  # The fetches run between both ranks; the local operations and memcpy
  # on rank 0 alone.
  echo "$out" | awk -F, '$2 != "local" && $1 != "memcpy"' | tag "$v_rivet" "$pair"
  echo "$out" | awk -F, '$2 == "local"' | tag "$v_rivet" "cpu 0"
  echo "$out" | awk -F, '$1 == "memcpy"' | tag "$v_glibc" "cpu 0"
}

rivet_all() {
  local tp
  for tp in shm tcp; do
    rivet_run rivet-eager "$tp" 1GiB
    rivet_run rivet-rndv "$tp" 0
    # The hybrid with its threshold calibrated at job start.
    if [ "$tp" = shm ]; then
      rivet_run rivet-hybrid "$tp" auto -l
    else
      rivet_run rivet-hybrid "$tp" auto
    fi
  done
}

# redis_bench SIZE PIPELINE -> a row of redis-benchmark's GET of SIZE bytes
redis_bench() {
  local s=$1 p=$2 out len
  redis-cli -p "$port" flushall > /dev/null
  out=$(taskset -c 0 redis-benchmark -p "$port" -t set,get -d "$s" \
        -n "$(iters "$s")" -c 1 -P "$p" --csv) || fail "redis-benchmark failed"
  # Its keys are literally "key:__rand_int__" without -r: the GETs read the
  # value the SETs wrote.
  len=$(redis-cli -p "$port" strlen key:__rand_int__)
  [ "$len" = "$s" ] || fail "redis-benchmark's GET read $len bytes, not $s"
  echo "$out" | awk -F, -v s="$s" -v p="$p" '
    { gsub(/"/, "") }
    $1 == "GET" { lat = p == 1 ? $5 * 1000 : 1e6 / $2
                  printf "redis-bench-P%d,tcp,fetch,%d,%.3f,%.1f\n", p, s, lat, s / lat }'
}

redis_run() {
  local pid out s
  port=$((port + 1))
  taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save "" \
    --appendonly no --daemonize no --logfile "$tmp/redis.log" &
  pid=$!; server_pid=$pid
  for _ in $(seq 50); do
    redis-cli -p "$port" ping > /dev/null 2>&1 && break
    sleep 0.1
  done
  out=$(taskset -c 0 "$build/bin/store-peers" redis "$port" "$sizes") ||
    { kill "$pid"; fail "the redis client failed"; }
  echo "$out" | tag "$v_hiredis" "$pair"
  for s in ${sizes//,/ }; do
    for p in 1 16; do
      redis_bench "$s" "$p" | tag "$v_redis" "$pair"
    done
  done
  kill "$pid"; wait "$pid" 2> /dev/null || true
  server_pid=""
}

socket_run() { # mode: socket (blocking) or socket-busy
  local pid out
  port=$((port + 1))
  taskset -c 1 "$build/bin/store-peers" "$1-server" "$port" &
  pid=$!; server_pid=$pid
  out=$(taskset -c 0 "$build/bin/store-peers" "$1" "$port" "$sizes") ||
    { kill "$pid"; fail "the $1 client failed"; }
  wait "$pid" 2> /dev/null || true
  server_pid=""
  echo "$out" | tag "$v_kernel" "$pair"
}

# raw_run -> the raw transport's rows, from ucx_perftest's Final: lines
# (field 3: the median latency in us, one way for *_lat; field 6: the
# average bandwidth in MiB/s)
raw_run() {
  local s f req
  for s in ${sizes//,/ }; do
    f=$(perftest shm ucp_get "$s" "$(iters "$s")" -O 1)
    [ -n "$f" ] || fail "ucx_perftest -t ucp_get failed: shm, $s B"
    echo "$f" | awk -v s="$s" '{ printf "ucx-get,shm,fetch,%d,%.3f,%.1f\n", s, $3, s / $3 }'
  done
  f=$(perftest tcp ucp_am_lat 64 10000)
  [ -n "$f" ] || fail "ucx_perftest -t ucp_am_lat failed: tcp, 64 B"
  req=$(echo "$f" | awk '{ print $3 }')
  for s in ${sizes//,/ }; do
    f=$(perftest tcp ucp_am_lat "$s" "$(iters "$s")")
    [ -n "$f" ] || fail "ucx_perftest -t ucp_am_lat failed: tcp, $s B"
    echo "$f" | awk -v s="$s" -v r="$req" \
      '{ lat = r + $3; printf "ucx-am-lat,tcp,fetch,%d,%.3f,%.1f\n", s, lat, s / lat }'
    f=$(perftest tcp ucp_am_bw "$s" "$(iters "$s")")
    [ -n "$f" ] || fail "ucx_perftest -t ucp_am_bw failed: tcp, $s B"
    echo "$f" | awk -v s="$s" \
      '{ mb = $6 * 1.048576; printf "ucx-am-bw,tcp,stream,%d,%.3f,%.1f\n", s, s / mb, mb }'
  done
}

baselines() {
  redis_run
  socket_run socket
  socket_run socket-busy
  raw_run | tag "$v_ucx" "$pair"
  taskset -c 0 "$build/bin/store-peers" local "$sizes" | tag "$v_uthash" "cpu 0"
}

# probe REP WHEN -> appends the probe's row to the state file, prints the
# machine's state (the thresholds of bench/amlong.sh)
probe() {
  local out
  if [ -z "$probe_bin" ] || ! out=$("$probe_bin"); then
    echo unprobed; return
  fi
  echo "$out" | awk -v rep="$1" -v when="$2" -v f="$state_csv" '
    $1 == "c2c:" { line = $3; x = $5
      st = "loaded"
      if (line <= 1000 && x <= 300) st = "slow"
      if (line <= 300 && x <= 80) st = "fast"
      printf "%s,%s,%s,%s,%s,%s,%s\n", rep, when, line, x, $7, $9, st >> f
      print st }'
}

if [ $summary_only -eq 0 ]; then
  "$top/scripts/install-deps.sh" redis-server libhiredis-dev uthash-dev ucx-utils
  # Configured every time, so that a hiredis installed just now is found.
  cmake -S "$top" -B "$build" > /dev/null
  cmake --build "$build" -j "$(nproc)" --target rv-store-bench store-peers \
    rivet-ucx rivetrun > /dev/null
  out=$("$build/bin/store-peers" redis 1 1 2>&1 || true)
  [[ $out == *"cannot connect"* ]] || fail "store-peers was built without hiredis"
  tmp=$(mktemp -d)
  server_pid=""
  trap '[ -z "$server_pid" ] || kill "$server_pid" 2> /dev/null; rm -rf "$tmp"' EXIT
  probe_bin=""
  if [ -n "$peers" ]; then
    [ -f "$peers/c2c-probe.c" ] || fail "no c2c-probe.c in $peers"
    cc -O2 -pthread "$peers/c2c-probe.c" -o "$tmp/c2c-probe" ||
      fail "cannot build $peers/c2c-probe.c"
    probe_bin=$tmp/c2c-probe
  else
    echo "store: no peers folder (-P DIR): runs are not labelled with the" \
         "machine's state" >&2
  fi
  # Versions and the machine, with no commas (they are CSV fields).
  v_ucx="UCX $(ucx_info -v | awk '/Version/ { print $3; exit }')"
  v_rivet="rivet $(git -C "$top" describe --always --dirty 2> /dev/null || echo unknown); $v_ucx"
  v_redis="Redis $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p')"
  v_hiredis="$v_redis; hiredis $(dpkg-query -W -f='${Version}' libhiredis-dev)"
  v_glibc="glibc $(ldd --version | awk 'NR == 1 { print $NF }')"
  v_kernel="Linux $(uname -r)"
  v_uthash="uthash $(dpkg-query -W -f='${Version}' uthash-dev); $v_glibc"
  cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1 | tr ',' ';')
  sed 's/tls: sm,self.*/tls: tcp,self\n    net_devices: lo/' \
    "$top/configs/store.yaml" > "$tmp/store-tcp.yaml"
  echo "rep,system,transport,op,size,latency_us,mb_per_s,state,version,binding,cpu" > "$runs"
  echo "rep,when,line_rtt_ns,xcore_copy1M_us,local_copy1M_us,zeropage_copy1M_us,state" > "$state_csv"
  for rep in $(seq 1 "$reps"); do
    echo "== repetition $rep/$reps"
    : > "$tmp/rep"
    s0=$(probe "$rep" before)
    if [ $((rep % 2)) -eq 1 ]; then baselines; rivet_all
    else rivet_all; baselines; fi
    s1=$(probe "$rep" after)
    st=$s0; [ "$s0" = "$s1" ] || st="$s0>$s1"
    awk -F, -v OFS=, -v r="$rep" -v st="$st" -v cpu="$cpu" \
      '{ print r, $1, $2, $3, $4, $5, $6, st, $7, $8, cpu }' "$tmp/rep" >> "$runs"
  done
fi
[ -s "$runs" ] || fail "no runs in $runs"

# The medians, and store_over_raw as the median of each repetition's ratio.
{
  echo "system,transport,op,size,latency_us,mb_per_s,store_over_raw,version,binding,states,cpu"
  awk -F, "$median_awk"'
    function raw_of(sys, tp, op) {
      if (sys !~ /^rivet-/) return ""
      if (tp == "local") return "uthash,local," op
      if (op != "fetch") return ""
      return tp == "shm" ? "ucx-get,shm,fetch" : tp == "tcp" ? "ucx-am-lat,tcp,fetch" : ""
    }
    FNR == 1 { next }
    NR == FNR { lat[$1, $2 "," $3 "," $4 "," $5] = $6; next }
    {
      k = $2 "," $3 "," $4 "," $5
      if (!(k in l)) order[++nk] = k
      l[k] = l[k] " " $6; m[k] = m[k] " " $7
      ver[k] = $9; bind[k] = $10; cpu[k] = $11
      st = $8 == "" ? "unprobed" : $8
      if (!((k, st) in n)) sts[k] = sts[k] " " st
      n[k, st]++
      rk = raw_of($2, $3, $4)
      if (rk != "" && (($1, rk "," $5) in lat) && lat[$1, rk "," $5] > 0)
        q[k] = q[k] " " $6 / lat[$1, rk "," $5]
    }
    END {
      for (i = 1; i <= nk; i++) {
        k = order[i]; s = ""; c = split(sts[k], a, " ")
        for (j = 1; j <= c; j++) s = s (j > 1 ? " " : "") a[j] ":" n[k, a[j]]
        printf "%s,%.3f,%.1f,%s,%s,%s,%s,%s\n", k, median(l[k]), median(m[k]),
               q[k] == "" ? "" : sprintf("%.3f", median(q[k])), ver[k], bind[k], s, cpu[k]
      }
    }' "$runs" "$runs" | sort -t, -k2,2 -k3,3 -k4,4n -k1,1
} > "$csv"

# The table: rivet beside every baseline, latency in us, and the ratios;
# a row per system, a column per size.
awk -F, '
  function h(b) { return b >= 1048576 ? b / 1048576 " MiB" : b >= 1024 ? b / 1024 " KiB" : b " B" }
  function head(title,   i) {
    printf "\n%-40s", title
    for (i = 1; i <= n; i++) printf " %9s", h(sz[i])
    printf "\n"
  }
  # line LABEL KEY_PREFIX [DIVISOR_PREFIX]: the latencies of KEY_PREFIX
  # per size, or their ratio to DIVISOR_PREFIX
  function line(label, k, d,   i, x, y, any, out) {
    out = sprintf("%-40s", label)
    for (i = 1; i <= n; i++) {
      x = k "," sz[i]; y = d "," sz[i]
      if (!(x in v) || (d != "" && (!(y in v) || v[y] <= 0))) { out = out sprintf(" %9s", "-"); continue }
      out = out sprintf(" %9.2f", d == "" ? v[x] : v[x] / v[y]); any = 1
    }
    if (any) print out
  }
  function raws(label, k,   i, x, any, out) {
    out = sprintf("%-40s", label)
    for (i = 1; i <= n; i++) {
      x = k "," sz[i]
      if (q[x] == "") { out = out sprintf(" %9s", "-"); continue }
      out = out sprintf(" %9.2f", q[x]); any = 1
    }
    if (any) print out
  }
  NR > 1 { k = $1 "," $2 "," $3 "," $4; v[k] = $5; mb[k] = $6; q[k] = $7
           if (!($4 in seen)) { seen[$4] = 1; sz[++n] = $4 } }
  END {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
      if (sz[j] + 0 < sz[i] + 0) { t = sz[i]; sz[i] = sz[j]; sz[j] = t }
    sys["shm"] = "rivet-hybrid rivet-eager rivet-rndv ucx-get memcpy"
    sys["tcp"] = "rivet-hybrid rivet-eager rivet-rndv ucx-am-lat ucx-am-bw redis-hiredis redis-bench-P1 redis-bench-P16 socket-blocking socket-busypoll"
    raw["shm"] = "ucx-get"; raw["tcp"] = "ucx-am-lat"
    for (t = 1; t <= 2; t++) {
      tp = t == 1 ? "shm" : "tcp"; ns = split(sys[tp], sy, " ")
      head("fetch over " tp ": median latency (us)")
      for (j = 1; j <= ns; j++)
        line(sy[j] (sy[j] == "ucx-am-bw" ? " (per message, streaming)" : ""),
             sy[j] "," tp "," (sy[j] == "ucx-am-bw" ? "stream" : "fetch"))
      head("fetch over " tp ": ratios")
      for (j = 1; j <= 3; j++)
        raws("store_over_raw " sy[j] " / " raw[tp], sy[j] "," tp ",fetch")
      for (j = 4; j <= ns; j++)
        line(sy[j] " / rivet-hybrid", sy[j] "," tp "," (sy[j] == "ucx-am-bw" ? "stream" : "fetch"),
             "rivet-hybrid," tp ",fetch")
    }
    print "\n(x / rivet-hybrid > 1: rivet is faster; store_over_raw: the median of each repetition'"'"'s ratio)"
    split("put get delete", ops, " ")
    head("local operations: median latency (us)")
    for (o = 1; o <= 3; o++) {
      line("rivet-hybrid " ops[o], "rivet-hybrid,local," ops[o])
      line("uthash " ops[o], "uthash,local," ops[o])
    }
    head("local operations: ratios")
    for (o = 1; o <= 3; o++)
      raws("store_over_raw " ops[o] " (rivet / uthash)", "rivet-hybrid,local," ops[o])
    line("memcpy / uthash put", "memcpy,shm,fetch", "uthash,local,put")

    print ""
    for (t = 1; t <= 2; t++) {
      tp = t == 1 ? "shm" : "tcp"; cross = ""
      for (i = 1; i <= n; i++) {
        s = sz[i]; e = mb["rivet-eager," tp ",fetch," s]; r = mb["rivet-rndv," tp ",fetch," s]
        if (cross == "" && (r > e)) cross = h(s)
      }
      printf "crossover over %s: rendezvous beats eager from %s on\n", tp, cross == "" ? "no size measured" : cross
    }
    print ""
    print "target                                       size       ratio  (met?)"
    for (t = 1; t <= 2; t++) {
      tp = t == 1 ? "shm" : "tcp"
      for (i = 1; i <= n; i++) {
        s = sz[i]; e = mb["rivet-eager," tp ",fetch," s]; r = mb["rivet-rndv," tp ",fetch," s]
        y = mb["rivet-hybrid," tp ",fetch," s]; best = (e > r) ? e : r
        if (best > 0) printf "hybrid / best of eager, rndv (%s)             %-9s  %.3f  (%s)\n", tp, h(s), y / best, (y / best >= 0.95 ? "met" : "not met")
      }
    }
    for (i = 1; i <= n; i++) {
      s = sz[i]; if (s < 4096) continue
      y = mb["rivet-hybrid,tcp,fetch," s]; d = mb["redis-bench-P1,tcp,fetch," s]; want = (s <= 262144) ? 2 : 1
      if (d > 0) printf "rivet tcp / redis-benchmark GET -P 1 (>= %d)   %-9s  %.3f  (%s)\n", want, h(s), y / d, (y / d >= want ? "met" : "not met")
    }
    s = sz[n]; y = mb["rivet-hybrid,shm,fetch," s]; m = mb["memcpy,shm,fetch," s]
    if (m > 0) printf "rivet shm / memcpy (>= 0.9)                  %-9s  %.3f  (%s)\n", h(s), y / m, (y / m >= 0.9 ? "met" : "not met")
  }' "$csv"

if command -v gnuplot > /dev/null; then
  gp=$(mktemp -d)
  systems=$(awk -F, 'NR > 1 && ($3 == "fetch" || $3 == "stream") { print $1 }' "$csv" | sort -u)
  for sys in $systems; do
    for tp in shm tcp; do
      awk -F, -v s="$sys" -v t="$tp" 'NR > 1 && $1 == s && $2 == t && ($3 == "fetch" || $3 == "stream") { print $4, $6 }' \
        "$csv" > "$gp/$sys-$tp.dat"
    done
  done
  for op in put get delete; do
    for sys in rivet-hybrid uthash; do
      awk -F, -v o="$op" -v s="$sys" 'NR > 1 && $1 == s && $2 == "local" && $3 == o { print $4, 1e6 / $5 }' \
        "$csv" > "$gp/$sys-$op.dat"
    done
  done
  # plots TRANSPORT -> gnuplot's plot list of that transport's fetches
  plots() {
    local f list=""
    for f in "$gp"/*-"$1".dat; do
      [ -s "$f" ] || continue
      list="$list${list:+, }'$f' using 1:(\$2 * 1e6) with linespoints title '$(basename "$f" "-$1.dat")'"
    done
    echo "$list"
  }
  ops=""
  for f in "$gp"/rivet-hybrid-{put,get,delete}.dat "$gp"/uthash-{put,get,delete}.dat; do
    [ -s "$f" ] || continue
    ops="$ops${ops:+, }'$f' using 1:2 with linespoints title '$(basename "$f" .dat)'"
  done
  nreps=$(awk -F, 'NR > 1 { print $1 }' "$runs" | sort -u | wc -l)
  gnuplot <<EOF
set terminal pngcairo size 1800,700 font ',10'
set output '$png'
set multiplot layout 1,3 title 'rivet object store beside the raw transport, Redis, sockets, memcpy and an in-process table (medians of $nreps runs)'
set termoption noenhanced
set logscale x 2; set logscale y; set grid; set key below maxrows 4 font ',9'
set xrange [768:22000000]
set xtics ("1 KiB" 1024, "4 KiB" 4096, "16 KiB" 16384, "64 KiB" 65536, "256 KiB" 262144, "1 MiB" 1048576, "4 MiB" 4194304, "16 MiB" 16777216)
set format y '%.0s %cB/s'
set xlabel 'object size'; set ylabel 'bytes per second (one fetch at a time; ucx-am-bw and P16 pipelined)'
set title 'remote fetch over shm'
plot $(plots shm)
set title 'remote fetch over tcp (loopback)'
plot $(plots tcp)
set ylabel 'operations per second'
set format y '%.0s %c'
set title 'local put / get / delete: rivet and a uthash table plus memcpy'
plot $ops
unset multiplot
EOF
  rm -rf "$gp"
fi
echo
echo "every run: $runs"
echo "medians:   $csv"
echo "states:    $state_csv"
echo "plot:      $png"
