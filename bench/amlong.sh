#!/usr/bin/env bash
# AM Long (rv_put_handler) under its two protocols, over UCX shm and tcp,
# beside GASNet-EX's own testam and testqueue in the same repetitions:
# rivet's shm beside GASNet's smp conduit, rivet's tcp beside GASNet's udp
# conduit. In each repetition and transport the runs alternate (rivet,
# GASNet, rivet, the protocols' order swapping every repetition) so that
# both see the same machine states; medians over repetitions. Three parts
# (-p):
#
#   bench/amlong.sh [-r REPS] [-t "shm tcp"] [-b BUILD_DIR]
#                   [-g GASNET_BUILD] [-P PEERS_DIR]
#                   [-p "amlong rma inject"] [-a] [-s]
#
# -g GASNET_BUILD (or $GASNET_DIR): a GASNet-EX build made by the peer
# script `gasnet.sh build GASNET_BUILD`; -P PEERS_DIR (or $PEERS_DIR): the
# folder holding that script as gasnet/gasnet.sh and the machine-state
# probe c2c-probe.c. Without -g the gasnet_* columns are left empty (the
# script says so); without -P the runs are not labelled with the machine's
# state either (state "unprobed").
#
# Machine state: c2c-probe (bench/machine-state.sh) runs before and
# after each transport's runs of a repetition and prints the round trip
# of a cache line bounced between cpu 0 and cpu 1 and the time of a 1 MiB
# copy of data the other core just wrote. A probe is "fast" (line <= 300 ns and copy <= 80 us), "slow"
# (line <= 1000 ns and copy <= 300 us) or "loaded" (worse); the runs'
# state is the two probes' ("slow", or "fast>slow" if it changed). Every
# probe goes to bench/results/amlong-pingpong-state.csv or
# amlong-injection-state.csv with the columns
#   rep,transport,when,line_rtt_ns,xcore_copy1M_us,local_copy1M_us,
#   zeropage_copy1M_us,state
#
# amlong: GASNet testam's "G" pattern (rv-amlong): an AM Long request of
# 0 B - 1 MiB (powers of two; over tcp also 65000 B, the udp conduit's
# largest AM Long) into the peer's buffer, whose handler replies with an
# AM Long of the same size from the buffer the request landed in, into
# the requester's buffer. GASNet: `testam 20000 32768 G` for 0 - 32 KiB
# and `testam 2000 MAX G` for the larger sizes (MAX 1 MiB on smp, 65000 B
# on udp). Into bench/results/amlong-pingpong.csv with the columns
#   protocol,transport,size,bw_mb_per_s,rtt_us,gasnet_rtt_us,
#   rtt_ratio_rivet_over_gasnet,states
# (protocol reassembly | put_sync_send; medians; gasnet_rtt_us is
# testam's "Avg. time", the same in both protocols' rows; the ratio is the
# median of the repetitions' side-by-side ratios, above 1 where GASNet is
# faster; states counts the runs' machine states), every run to
# bench/results/amlong-pingpong-runs.csv, and a plot of bandwidth, round
# trip and the ratio against size to bench/results/amlong-pingpong.png.
# It prints reassembly/put_sync_send bandwidth per size, and rivet/GASNet
# round trip per size.
#
# rma: rv_put/rv_get bandwidth (rv-rma-bw --api) at 4 KiB, 64 KiB, 4 MiB,
# each beside ucx_perftest -t ucp_put_bw / ucp_get in the same
# repetition, into bench/results/rma-bw.csv with the columns
#   op,transport,size,rivet_mb_per_s,ucx_mb_per_s,ratio
# (medians over repetitions; ratio = median of side-by-side ratios;
# 1 MB = 10^6 B). Over tcp, rivet's puts and gets run on its AM-based
# emulation and UCX's on its own TCP RMA.
#
# inject: GASNet testqueue's pattern (rv-amlong-queue beside
# `testqueue -l -i ITERS 256 SIZE`), the injection overhead of d
# back-to-back AM Long requests all landing at one address, d = 1, 2, 4,
# ... 256, at 4 KiB, 32 KiB, 64 KiB and 1 MiB (udp: 4 and 32 KiB), into
# bench/results/amlong-injection.csv with the columns
#   protocol,transport,size,depth,inject_us,complete_us,gasnet_inject_us,
#   inject_ratio_rivet_over_gasnet,states
# (medians; microseconds per message spent in the d calls, and until all
# d handlers ran at the target; GASNet's is testqueue's injection time,
# with ITERS = 256 MiB / (16 SIZE) within [10, 2000], at most 50 on udp),
# every run to bench/results/amlong-injection-runs.csv, and a plot of
# injection time against depth, one panel per size, to
# bench/results/amlong-injection.png. It prints rivet's and GASNet's
# injection time per size at the shallowest and deepest queue.
#
# What ran: beside each medians file, *-peers.csv
# (amlong-pingpong-peers.csv, amlong-injection-peers.csv) holds one row
# per system and transport with the columns
#   reps,system,transport,version,stack,compiler,build_flags,binding,cpu
# reps: the repetitions the row describes (FIRST-LAST; with -a each
# session adds its rows); system rivet or gasnet-ex (transport: the rivet
# transport it ran beside); version: rivet's git describe, GASNet-EX's
# release; stack: the UCX and job settings under rivet, GASNet-EX's
# conduit and configuration; compiler and build_flags: read from rivet's
# CMake build, and for GASNet-EX from the identification strings it
# builds into its programs (release, configuration, compiler, configure
# options), its conduit's makefile fragment (the compiler's path) and its
# build log (the options the program was compiled with); binding: where
# each side's workers ran, from a short run of each before the
# measurements (rivet's debug log, hwloc's core index; for GASNet-EX the
# cpus the kernel lets each process run on and the cpu time it used, in
# start order: over udp the first two are the spawner and its fork, which
# only wait); cpu: lscpu's model name. One row per
# system rather than columns of the medians files: these hold per build
# and launch, not per figure.
#
# Beside each medians file, *-by-state.csv holds the same medians per
# machine state (the runs' state label first, then the key columns, the
# number of runs, rivet's and GASNet's figures and the ratio), and the
# script prints the ping-pong's by state.
#
# With -a, the amlong and inject parts add their repetitions to the
# earlier runs and state files (numbered after them) instead of starting
# new ones, so that runs of several sessions, in whatever states the
# machine was in, are summarized together. With -s, it only summarizes the
# selected parts' earlier runs files.
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init amlong-pingpong
. "$here/machine-state.sh"
. "$here/peer-info.sh"
reps=3
transports="shm tcp"
summary_only=0
parts="amlong rma inject"
gasnet_dir=${GASNET_DIR:-}
peers=${PEERS_DIR:-}
append=0
while getopts "r:t:b:p:g:P:ash" o; do
  case $o in
    p) parts=$OPTARG ;;
    s) summary_only=1 ;;
    a) append=1 ;;
    r) reps=$OPTARG ;;
    t) transports=$OPTARG ;;
    b) build=$OPTARG ;;
    g) gasnet_dir=$OPTARG ;;
    P) peers=$OPTARG ;;
    *) usage ;;
  esac
done

protocols="reassembly put_sync_send"
pp_sizes=0,1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192,16384,32768
pp_sizes_tcp=$pp_sizes,65000,65536,131072,262144,524288,1048576
pp_sizes=$pp_sizes,65536,131072,262144,524288,1048576

part() { [[ " $parts " == *" $1 "* ]]; } # part NAME: is it selected?
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --------------------------------------------------------------------------
# The peers: GASNet-EX's programs and the machine-state probe.
gasnet_sh=""
if [ $summary_only -eq 0 ]; then
  machine_probe_init "$peers" "$tmp" || exit 1
  if [ -n "$gasnet_dir" ]; then
    [ -n "$peers" ] && [ -x "$peers/gasnet/gasnet.sh" ] ||
      fail "-g $gasnet_dir needs -P PEERS_DIR holding gasnet/gasnet.sh"
    gasnet_sh=$peers/gasnet/gasnet.sh
    for c in smp udp; do
      for prog in testam testqueue; do
        [ -x "$gasnet_dir/obj/$c-conduit/$prog" ] ||
          fail "$gasnet_dir/obj/$c-conduit/$prog not built" \
               "(gasnet.sh build $gasnet_dir)"
      done
    done
  elif part amlong || part inject; then
    echo "amlong: no GASNet-EX build (-g DIR): the gasnet_* columns are" \
         "left empty, rivet runs alone" >&2
  fi
fi

# conduit TRANSPORT -> the GASNet conduit run beside it (none: empty)
conduit() {
  [ -n "$gasnet_sh" ] || return 0
  case $1 in
    shm) echo smp ;;
    tcp) echo udp ;;
  esac
}

# probe FILE REP TRANSPORT WHEN -> appends the probe's row to FILE, prints
# its state
probe() { machine_probe "$1" "$2,$3,$4"; }

# start_runs RUNS HEADER STATE_FILE -> the first repetition's number: 1
# after writing fresh headers, or (-a) the one after the runs file's last
start_runs() {
  if [ $append -eq 1 ] && [ -s "$1" ]; then
    [ "$(head -1 "$1")" = "$2" ] ||
      fail "cannot add to $1: its columns are not $2"
    [ -s "$3" ] || echo "$state_header" > "$3"
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "rep") c = i; next }
             $c > m { m = $c } END { print m + 1 }' "$1"
  else
    echo "$2" > "$1"
    echo "$state_header" > "$3"
    echo 1
  fi
}
state_header="rep,transport,when,$machine_state_header"

# gasnet_ident CONDUIT PROGRAM KEY -> the identification string $KEY: ...$
# GASNet-EX built into PROGRAM of CONDUIT (GASNetConfig, GASNetGitHash,
# GASNetCompilerID, GASNetConfigureArgs)
gasnet_ident() {
  grep -ao '\$'"$3"': [^$]*\$' "$gasnet_dir/obj/$1-conduit/$2" 2> /dev/null |
    tail -1 | sed 's/^[^:]*: *//; s/ *\$$//' || true
}

# gasnet_row CONDUIT PROGRAM -> GASNet-EX's version, stack, compiler and
# build flags, as its build recorded them, for the peers file
gasnet_row() {
  local c=$1 prog=$2 config flags cc
  config=$(gasnet_ident "$c" "$prog" GASNetConfig)
  echo -n "$(csv_field "$(echo "$config" | sed -n 's/.*RELEASE=\([^,]*\).*/\1/p')" \
                       "($(gasnet_ident "$c" "$prog" GASNetGitHash))"),"
  echo -n "$(csv_field "$c conduit: $(echo "$config" |
                        sed 's/^([^)]*) //; s/RELEASE=[^,]*,//; s/SPEC=[^,]*,//' |
                        tr , ' ')"),"
  cc=$(sed -n 's/^GASNET_CC *= *//p' "$gasnet_dir/obj/$c-conduit/$c-seq.mak" \
         2> /dev/null) || true
  echo -n "$(csv_field "$(gasnet_ident "$c" "$prog" GASNetCompilerID |
                         sed -n 's/.*COMPILER_FAMILY:\([^|]*\)|COMPILER_VERSION:\([^|]*\).*/\1 \2/p')" \
                       "(${cc:-unknown})"),"
  # The options of the command that compiled PROGRAM for this conduit,
  # from the build's log: optimization, defines and code generation, not
  # warnings or include paths.
  flags=$(grep -- "-c -o $prog.o " "$gasnet_dir/build.log" 2> /dev/null |
          grep -- "/$c-conduit " | head -1 |
          awk '{ for (i = 2; i <= NF; i++)
                   if ($i ~ /^-([ODfmg]|std)/) o = o " " $i
                   else if ($i == "--param") { o = o " " $i " " $(i + 1); i++ }
                 print substr(o, 2) }') || true
  csv_field "configure $(gasnet_ident "$c" "$prog" GASNetConfigureArgs |
                         tr -d "'"); $prog: ${flags:-unknown}"
}

# peers_header and write_peers FILE FIRST LAST "PROGRAM ARGS" "GASNET_PROGRAM
# ARGS": the rows of what ran in repetitions FIRST-LAST into FILE (fresh,
# unless -a adds to it): per transport, rivet's build and where a short
# run of PROGRAM put its workers, and GASNet-EX's, beside it, with a short
# run of GASNET_PROGRAM
peers_header="reps,system,transport,version,stack,compiler,build_flags,binding,cpu"
write_peers() {
  local f=$1 reps="$2-$3" rv_cmd gex_cmd tl c cfg cpu
  read -ra rv_cmd <<< "$4"
  read -ra gex_cmd <<< "$5"
  [ $append -eq 1 ] && [ -s "$f" ] || echo "$peers_header" > "$f"
  cpu=$(machine_model)
  for tl in $transports; do
    cfg=$top/configs/pingpong-$tl.yaml
    printf '%s,rivet,%s,%s,%s,%s,%s,%s,%s\n' "$reps" "$tl" \
      "$(rivet_version "$top")" "$(rivet_stack "$cfg")" \
      "$(rivet_compiler "$build")" "$(rivet_flags "$build" "${rv_cmd[0]}")" \
      "$(rivet_binding "$build" "$cfg" 2 1 "$build/bin/${rv_cmd[0]}" \
           "${rv_cmd[@]:1}")" "$cpu" >> "$f"
    c=$(conduit "$tl")
    [ -n "$c" ] || continue
    printf '%s,gasnet-ex,%s,%s,%s,%s\n' "$reps" "$tl" \
      "$(gasnet_row "$c" "${gex_cmd[0]}")" \
      "$(peer_binding "${gex_cmd[0]}" "$gasnet_sh" "$c" "$gasnet_dir" \
           "${gex_cmd[@]}")" "$cpu" >> "$f"
  done
  echo "what ran: $f"
  cat "$f"
}

# by_state RUNS NKEY RIVET GASNET STATE HEADER -> medians per (state, the
# runs file's first NKEY columns): runs, rivet's figure (column RIVET),
# GASNet's (column GASNET) and the median of their side-by-side ratios
by_state() {
  echo "$6"
  awk -F, -v nk="$2" -v rc="$3" -v gc="$4" -v sc="$5" "$median_awk"'
    NR > 1 { k = ($sc == "" ? "unprobed" : $sc)
             for (i = 1; i <= nk; i++) k = k "," $i
             n[k]++; r[k] = r[k] " " $rc
             if ($gc != "" && $gc > 0) { g[k] = g[k] " " $gc
                                         q[k] = q[k] " " $rc / $gc } }
    END { for (k in n)
            printf "%s,%d,%.3f,%s,%s\n", k, n[k], median(r[k]),
                   g[k] == "" ? "" : sprintf("%.3f", median(g[k])),
                   q[k] == "" ? "" : sprintf("%.3f", median(q[k])) }' "$1" |
    sort -t, -k1,1 -k3,3 -k2,2 -k4,4n -k5,5n
}

# testam CONDUIT -> "size,rtt_us" rows of GASNet's AM Long request/reply
# ping-pong (section G)
testam_rows() {
  awk '$1 == "G:" && / AMLong .*ping-pong roundtrip ReqRep:/ {
         for (i = 3; i < NF; i++) if ($i == "sec") { print $2 "," $(i + 1); break } }'
}
gasnet_testam() {
  local c=$1 max=1048576 small large
  [ "$c" = udp ] && max=65000
  small=$(timeout 600 "$gasnet_sh" "$c" "$gasnet_dir" testam 20000 32768 G 2>&1) ||
    { echo "$small" | tail -20 >&2; return 1; }
  large=$(timeout 600 "$gasnet_sh" "$c" "$gasnet_dir" testam 2000 $max G 2>&1) ||
    { echo "$large" | tail -20 >&2; return 1; }
  echo "$small" | testam_rows | awk -F, '$1 <= 32768'
  echo "$large" | testam_rows | awk -F, '$1 > 32768'
}

# gasnet_testqueue CONDUIT SIZE -> "size,depth,inject_us" rows of GASNet's
# AM Long injection (implicit-handle local completion)
gasnet_testqueue() {
  local c=$1 size=$2 n out
  n=$(( (256 << 20) / (size * 16) ))
  [ $n -lt 10 ] && n=10
  [ $n -gt 2000 ] && n=2000
  [ "$c" = udp ] && [ $n -gt 50 ] && n=50
  out=$(timeout 600 "$gasnet_sh" "$c" "$gasnet_dir" testqueue -l -i $n \
        $inj_depth "$size" 2>&1) || { echo "$out" | tail -20 >&2; return 1; }
  echo "$out" | awk -v s="$size" '
    $1 == 1 && $2 == 2 && $3 == 4 { for (i = 1; i <= NF; i++) d[i] = $i
                                    hdr = NF; next }
    hdr && $1 == s { for (i = 2; i <= NF && i - 1 <= hdr; i++)
                       print s "," d[i - 1] "," $i; exit }'
}

# order REP -> the runs of one transport in that repetition: rivet's two
# protocols around GASNet's, their order swapped every repetition
order() {
  if [ $(($1 % 2)) -eq 1 ]; then echo "reassembly gasnet put_sync_send"
  else echo "put_sync_send gasnet reassembly"; fi
}

# Human size label: 4096 -> "4 KiB".
human() {
  if [ "$1" -ge 1048576 ] && [ $(($1 % 1048576)) -eq 0 ]; then echo "$(($1 >> 20)) MiB"
  elif [ "$1" -ge 1024 ] && [ $(($1 % 1024)) -eq 0 ]; then echo "$(($1 >> 10)) KiB"
  else echo "$1 B"; fi
}
# color "TRANSPORT SERIES" -> its line colour, the same in every panel
color() {
  case $1 in
    "shm reassembly") echo '"#9400d3"' ;;
    "shm put_sync_send") echo '"#009e73"' ;;
    "shm gasnet") echo '"#56b4e9"' ;;
    "tcp reassembly") echo '"#e69f00"' ;;
    "tcp put_sync_send") echo '"#d55e00"' ;;
    "tcp gasnet") echo '"#0072b2"' ;;
    *) echo '"#000000"' ;;
  esac
}
gp_term() {
  local term=png
  gnuplot -e "set terminal" 2>&1 | grep -w pngcairo > /dev/null && term=pngcairo
  echo $term
}
# series FILE AWK_FILTER XCOL YEXPR -> writes "x y" rows of the CSV to a
# data file and prints its name (empty when nothing matched)
series() {
  local f
  f=$(mktemp "$tmp/series.XXXXXX")
  awk -F, "NR > 1 && ($2) { y = $4; if (y != \"\" && y > 0) print \$$3, y }" \
    "$1" > "$f"
  if [ -s "$f" ]; then echo "$f"; fi
}

# --------------------------------------------------------------------------
# AM Long request/reply ping-pong (GASNet testam G)
pp_state=$results/amlong-pingpong-state.csv
if [ $summary_only -eq 0 ] && part amlong; then
  [ -x "$build/bin/rv-amlong" ] || fail "$build/bin/rv-amlong not built"
  r0=$(start_runs "$runs" \
        "protocol,transport,size,rep,bw_mb_per_s,rtt_us,gasnet_rtt_us,state" \
        "$pp_state")
  write_peers "$results/amlong-pingpong-peers.csv" "$r0" $((r0 + reps - 1)) \
    "rv-amlong -s 8 -n 1000" "testam 20000 8 G"
  for rep in $(seq "$r0" $((r0 + reps - 1))); do
    for tl in $transports; do
      c=$(conduit "$tl")
      echo "== repetition $rep ($((rep - r0 + 1))/$reps), $tl${c:+ beside GASNet-EX $c}"
      s0=$(probe "$pp_state" "$rep" "$tl" before)
      : > "$tmp/rivet"; : > "$tmp/gasnet"
      sizes=$pp_sizes; [ "$tl" = tcp ] && sizes=$pp_sizes_tcp
      for p in $(order "$rep"); do
        if [ "$p" = gasnet ]; then
          [ -n "$c" ] || continue
          gasnet_testam "$c" > "$tmp/gasnet" ||
            fail "GASNet-EX testam failed: $c, repetition $rep"
          [ -s "$tmp/gasnet" ] || fail "no rows from GASNet-EX testam: $c"
          continue
        fi
        out=$(RIVET_RMA_AM_LONG_PROTOCOL=$p timeout 600 \
              "$build/bin/rivetrun" --timeout 580 -n 2 \
              -c "$top/configs/pingpong-$tl.yaml" "$build/bin/rv-amlong" \
              -s "$sizes" --csv 2>&1) || { echo "$out" | tail -20 >&2
                               fail "run failed: $p, $tl, repetition $rep"; }
        echo "$out" | awk -F, -v p="$p" -v tl="$tl" -v rep="$rep" \
          '/^[0-9]+,/ { print p "," tl "," $1 "," rep "," $3 "," $2 }' \
          >> "$tmp/rivet"
      done
      st=$(machine_state_of "$s0" "$(probe "$pp_state" "$rep" "$tl" after)")
      awk -F, -v st="$st" 'FILENAME == ARGV[1] { g[$1] = $2; next }
        { print $0 "," ($3 in g ? g[$3] : "") "," st }' \
        "$tmp/gasnet" "$tmp/rivet" >> "$runs"
    done
  done
fi
if part amlong; then
  [ -s "$runs" ] || fail "no runs in $runs"

  # Medians per (protocol, transport, size); the ratio is the median of
  # the side-by-side ratios.
  {
    echo "protocol,transport,size,bw_mb_per_s,rtt_us,gasnet_rtt_us,rtt_ratio_rivet_over_gasnet,states"
    awk -F, "$median_awk"'NR > 1 { k = $1 "," $2 "," $3; bw[k] = bw[k] " " $5
                      rtt[k] = rtt[k] " " $6; keys[k] = 1
                      if ($7 != "" && $7 > 0) { g[k] = g[k] " " $7
                                                r[k] = r[k] " " $6 / $7 }
                      st = $8 == "" ? "unprobed" : $8
                      if (!((k, st) in n)) sts[k] = sts[k] " " st
                      n[k, st]++ }
      END { for (k in keys) {
              s = ""; m = split(sts[k], a, " ")
              for (i = 1; i <= m; i++) s = s (i > 1 ? " " : "") a[i] ":" n[k, a[i]]
              printf "%s,%.1f,%.3f,%s,%s,%s\n", k, median(bw[k]), median(rtt[k]),
                     g[k] == "" ? "" : sprintf("%.3f", median(g[k])),
                     r[k] == "" ? "" : sprintf("%.3f", median(r[k])), s } }' "$runs" |
      sort -t, -k2,2 -k1,1 -k3,3n
  } > "$csv"
  by_state "$runs" 3 6 7 8 \
    "state,protocol,transport,size,runs,rtt_us,gasnet_rtt_us,rtt_ratio_rivet_over_gasnet" \
    > "$results/amlong-pingpong-by-state.csv"

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

  echo
  echo "rivet / GASNet-EX testam G (median round trip, us; ratio = median of" \
       "side-by-side ratios, > 1: GASNet faster):"
  if awk -F, 'NR > 1 && $6 != "" { found = 1 } END { exit !found }' "$csv"; then
    for tl in $(awk -F, 'NR > 1 { print $2 }' "$csv" | sort -u); do
      c=smp; [ "$tl" = tcp ] && c=udp
      echo "$tl (GASNet-EX $c):"
      awk -F, -v tl="$tl" 'NR > 1 && $2 == tl && $6 != "" {
          k = $1 "," $3; rtt[k] = $5; g[$3] = $6; q[k] = $7; s[$3] = 1
          st[$3] = st[$3] == "" ? $8 : st[$3] }
        END { n = 0; for (x in s) sz[++n] = x + 0
              for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
                if (sz[j] < sz[i]) { t = sz[i]; sz[i] = sz[j]; sz[j] = t }
              for (i = 1; i <= n; i++) { z = sz[i]
                printf "  %8d B  reassembly %9.2f (%5.2f)  put_sync_send %9.2f (%5.2f)  GASNet %9.2f  [%s]\n",
                       z, rtt["reassembly," z], q["reassembly," z],
                       rtt["put_sync_send," z], q["put_sync_send," z], g[z], st[z] } }' "$csv"
    done
    echo
    echo "the same by machine state (runs whose probes before and after" \
         "agree; bench/results/amlong-pingpong-by-state.csv):"
    awk -F, 'NR > 1 && $1 !~ />/ && $7 != "" {
        k = $1 "," $3 "," $4; rtt[k "," $2] = $6; q[k "," $2] = $8; g[k] = $7
        runs[k] = runs[k] == "" ? $5 : runs[k]; keys[k] = 1 }
      END { for (k in keys) {
              split(k, a, ",")
              printf "%s,%s,%d,%s,%.2f,%.2f,%.2f,%.2f,%.2f\n", a[1], a[2], a[3],
                     runs[k], rtt[k ",reassembly"], q[k ",reassembly"],
                     rtt[k ",put_sync_send"], q[k ",put_sync_send"], g[k] } }' \
      "$results/amlong-pingpong-by-state.csv" | sort -t, -k1,1 -k2,2 -k3,3n |
      awk -F, '{ if ($1 "," $2 != last) { printf "%s, %s (runs: %s):\n", $1, $2, $4
                                          last = $1 "," $2 }
                 printf "  %8d B  reassembly %9.2f (%5.2f)  put_sync_send %9.2f (%5.2f)  GASNet %9.2f\n",
                        $3, $5, $6, $7, $8, $9 }'
  else
    echo "  (no GASNet-EX figures: run with -g GASNET_BUILD -P PEERS_DIR)"
  fi
fi

if part amlong && command -v gnuplot > /dev/null; then
  tls=$(awk -F, 'NR > 1 { print $2 }' "$csv" | sort -u)
  by_state=$results/amlong-pingpong-by-state.csv
  states=$(awk -F, 'NR > 1 && $1 !~ />/ && $7 != "" { print $1 }' "$by_state" | sort -u)
  xt='("1 B" 1, "16 B" 16, "256 B" 256, "4 KiB" 4096, "64 KiB" 65536, "1 MiB" 1048576)'
  {
    echo "set terminal $(gp_term) size 1900,700 noenhanced"
    echo "set output \"$png\""
    echo "set multiplot layout 1,3 title \"AM Long ping-pong, testam G: rv-amlong beside GASNet-EX testam (medians; ratio per machine state)\""
    echo "set logscale x 2"
    echo "set logscale y"
    echo "set grid"
    echo "set key below"
    echo "set xtics $xt"
    echo "set xlabel \"payload\""
    for what in bw rtt ratio; do
      case $what in
        bw) echo "set ylabel \"MB/s (10^6 B, both ways)\"" ;;
        rtt) echo "set ylabel \"round trip (us)\"" ;;
        ratio) echo "set ylabel \"rivet reassembly / GASNet-EX round trip (> 1: GASNet faster)\"" ;;
      esac
      plots=""
      for tl in $tls; do
        c=smp; [ "$tl" = tcp ] && c=udp
        if [ $what = ratio ]; then
          dt=0
          for st in $states; do
            dt=$((dt + 1))
            f=$(series "$by_state" "\$1 == \"$st\" && \$2 == \"reassembly\" && \$3 == \"$tl\" && \$4 > 0" 4 '$8')
            n=$(awk -F, -v st="$st" -v tl="$tl" '$1 == st && $3 == tl { print $5; exit }' "$by_state")
            if [ -n "$f" ]; then plots="$plots${plots:+, }\"$f\" using 1:2 with linespoints dashtype $dt lc rgb $(color "$tl reassembly") title \"$tl / $c, $st ($n runs)\""; fi
          done
          continue
        fi
        for p in $protocols; do
          y='$4'; [ $what = rtt ] && y='$5'
          f=$(series "$csv" "\$1 == \"$p\" && \$2 == \"$tl\" && \$3 > 0" 3 "$y")
          if [ -n "$f" ]; then plots="$plots${plots:+, }\"$f\" using 1:2 with linespoints lc rgb $(color "$tl $p") title \"rivet $tl $p\""; fi
        done
        y='2 * $3 / $6'; [ $what = rtt ] && y='$6'
        f=$(series "$csv" "\$1 == \"reassembly\" && \$2 == \"$tl\" && \$3 > 0 && \$6 != \"\"" 3 "$y")
        if [ -n "$f" ]; then plots="$plots${plots:+, }\"$f\" using 1:2 with linespoints dashtype 2 lc rgb $(color "$tl gasnet") title \"GASNet-EX $c\""; fi
      done
      [ $what = ratio ] && plots="$plots${plots:+, }1 with lines lc rgb \"black\" notitle"
      [ -n "$plots" ] && echo "plot $plots" || echo "plot 1 notitle"
    done
    echo "unset multiplot"
  } | gnuplot && echo "plot: $png"
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


# --------------------------------------------------------------------------
# Injection overhead of d back-to-back AM Longs at one address (GASNet
# testqueue -l -i)
inj_runs=$results/amlong-injection-runs.csv
inj_csv=$results/amlong-injection.csv
inj_png=$results/amlong-injection.png
inj_state=$results/amlong-injection-state.csv
inj_sizes="4096 32768 65536 1048576"
inj_depth=256
if [ $summary_only -eq 0 ] && part inject; then
  [ -x "$build/bin/rv-amlong-queue" ] ||
    fail "$build/bin/rv-amlong-queue not built"
  r0=$(start_runs "$inj_runs" \
        "protocol,transport,size,depth,rep,inject_us,complete_us,gasnet_inject_us,state" \
        "$inj_state")
  write_peers "$results/amlong-injection-peers.csv" "$r0" $((r0 + reps - 1)) \
    "rv-amlong-queue -s 4096 -W 16 -n 100" "testqueue -l -i 200 16 4096"
  for rep in $(seq "$r0" $((r0 + reps - 1))); do
    for tl in $transports; do
      c=$(conduit "$tl")
      echo "== injection repetition $rep ($((rep - r0 + 1))/$reps), $tl${c:+ beside GASNet-EX $c}"
      s0=$(probe "$inj_state" "$rep" "$tl" before)
      : > "$tmp/rivet"; : > "$tmp/gasnet"
      for p in $(order "$rep"); do
        if [ "$p" = gasnet ]; then
          [ -n "$c" ] || continue
          for size in $inj_sizes; do
            [ "$c" = udp ] && [ "$size" -gt 65000 ] && continue
            gasnet_testqueue "$c" "$size" >> "$tmp/gasnet" ||
              fail "GASNet-EX testqueue failed: $c, $size B, repetition $rep"
          done
          [ -s "$tmp/gasnet" ] || fail "no rows from GASNet-EX testqueue: $c"
          continue
        fi
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
        echo "$rows" >> "$tmp/rivet"
      done
      st=$(machine_state_of "$s0" "$(probe "$inj_state" "$rep" "$tl" after)")
      awk -F, -v st="$st" 'FILENAME == ARGV[1] { g[$1 "," $2] = $3; next }
        { k = $3 "," $4; print $0 "," (k in g ? g[k] : "") "," st }' \
        "$tmp/gasnet" "$tmp/rivet" >> "$inj_runs"
    done
  done
fi
if part inject && [ ! -s "$inj_runs" ]; then
  echo "amlong: no injection runs in $inj_runs (run the inject part)" >&2
elif part inject; then
  # Medians per (protocol, transport, size, depth); the ratio is the median
  # of the side-by-side ratios.
  {
    echo "protocol,transport,size,depth,inject_us,complete_us,gasnet_inject_us,inject_ratio_rivet_over_gasnet,states"
    awk -F, "$median_awk"'NR > 1 { k = $1 "," $2 "," $3 "," $4; inj[k] = inj[k] " " $6
                      comp[k] = comp[k] " " $7; keys[k] = 1
                      if ($8 != "" && $8 > 0) { g[k] = g[k] " " $8
                                                r[k] = r[k] " " $6 / $8 }
                      st = $9 == "" ? "unprobed" : $9
                      if (!((k, st) in n)) sts[k] = sts[k] " " st
                      n[k, st]++ }
      END { for (k in keys) {
              s = ""; m = split(sts[k], a, " ")
              for (i = 1; i <= m; i++) s = s (i > 1 ? " " : "") a[i] ":" n[k, a[i]]
              printf "%s,%.3f,%.3f,%s,%s,%s\n", k, median(inj[k]), median(comp[k]),
                     g[k] == "" ? "" : sprintf("%.3f", median(g[k])),
                     r[k] == "" ? "" : sprintf("%.3f", median(r[k])), s } }' "$inj_runs" |
      sort -t, -k2,2 -k1,1 -k3,3n -k4,4n
  } > "$inj_csv"
  by_state "$inj_runs" 4 6 8 9 \
    "state,protocol,transport,size,depth,runs,inject_us,gasnet_inject_us,inject_ratio_rivet_over_gasnet" \
    > "$results/amlong-injection-by-state.csv"

  echo
  echo "AM Long injection, reassembly / put_sync_send / GASNet-EX testqueue" \
       "(median us per message; rivet/GASNet ratio):"
  for tl in $(awk -F, 'NR > 1 { print $2 }' "$inj_csv" | sort -u); do
    c=smp; [ "$tl" = tcp ] && c=udp
    if awk -F, -v tl="$tl" 'NR > 1 && $2 == tl && $7 != "" { found = 1 }
                            END { exit !found }' "$inj_csv"; then
      echo "$tl (GASNet-EX $c):"
    else
      echo "$tl (no GASNet-EX figures: run with -g GASNET_BUILD -P PEERS_DIR):"
    fi
    awk -F, -v tl="$tl" 'NR > 1 && $2 == tl { v[$1 "," $3 "," $4] = $5
                                              g[$3 "," $4] = $7
                                              q[$1 "," $3 "," $4] = $8
                                              s[$3] = 1; dep[$4] = 1 }
      function cell(z, d,   r, p, k) {
        k = z "," d; r = v["reassembly," k]; p = v["put_sync_send," k]
        if (g[k] == "")
          return sprintf("d=%-4d %8.3f %8.3f %8s        ", d, r, p, "-")
        return sprintf("d=%-4d %8.3f %8.3f %8.3f (%.2f)", d, r, p, g[k],
                       q["reassembly," k])
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
    tls=$(awk -F, 'NR > 1 { print $2 }' "$inj_csv" | sort -u)
    sizes=$(awk -F, 'NR > 1 { print $3 }' "$inj_csv" | sort -nu)
    npanels=$(echo $sizes | wc -w)
    {
      echo "set terminal $(gp_term) size $((450 * npanels + 100)),700 noenhanced"
      echo "set output \"$inj_png\""
      echo "set multiplot layout 1,$npanels title" \
           "\"AM Long injection overhead, d back-to-back requests at one" \
           "address (rv-amlong-queue beside GASNet-EX testqueue -l -i; medians)\""
      echo "set logscale x 2"
      echo "set logscale y"
      echo "set grid"
      echo "set key below"
      echo "set xlabel \"queue depth d\""
      echo "set ylabel \"injection (us per message)\""
      for z in $sizes; do
        echo "set title \"$(human "$z")\""
        plots=""
        for tl in $tls; do
          c=smp; [ "$tl" = tcp ] && c=udp
          for p in $protocols; do
            f=$(series "$inj_csv" "\$1 == \"$p\" && \$2 == \"$tl\" && \$3 == $z" 4 '$5')
            if [ -n "$f" ]; then plots="$plots${plots:+, }\"$f\" using 1:2 with linespoints lc rgb $(color "$tl $p") title \"rivet $tl $p\""; fi
          done
          f=$(series "$inj_csv" "\$1 == \"reassembly\" && \$2 == \"$tl\" && \$3 == $z && \$7 != \"\"" 4 '$7')
          if [ -n "$f" ]; then plots="$plots${plots:+, }\"$f\" using 1:2 with linespoints dashtype 2 lc rgb $(color "$tl gasnet") title \"GASNet-EX $c\""; fi
        done
        [ -n "$plots" ] && echo "plot $plots" || echo "plot 1 notitle"
      done
      echo "unset multiplot"
    } | gnuplot && echo "plot: $inj_png"
  fi
fi
