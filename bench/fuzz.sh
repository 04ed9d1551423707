#!/usr/bin/env bash
# Runs rivet's fuzz targets (tests/fuzz/fuzz_*.c: one per decoder of bytes
# from outside the process) with libFuzzer, ASan and UBSan, in a clang
# build of their own:
#
#   bench/fuzz.sh [-b BUILD_DIR] [-n RUNS] [-t SECONDS] [-o CSV] [-m] [-s]
#                 [-j JOBS] [-x] [-L MAX_LEN] [TARGET...]
#
#   -b  the clang build (default build-fuzz), configured and built here
#   -n  executions per target (default 10000000)
#   -t  most seconds per target (default 1800): a target stops at -n
#       executions or after -t seconds, whichever comes first
#   -o  the CSV (default bench/results/fuzz.csv), one line per target:
#         target,execs,execs_per_s,crashes,coverage_edges
#       crashes: inputs that crashed, leaked, ran out of memory or time
#       (libFuzzer stops at the first; it is saved in the build as
#       BUILD_DIR/tests/fuzz/NAME-crash-...); coverage_edges: the edges
#       libFuzzer's instrumentation saw covered at the end.
#   -m  merge: the CSV keeps its lines of the targets not run now (runs of
#       a few targets at a time, each line from the run that wrote it)
#   -s  the smoke of make check: every target for 2 s from its seeds, no
#       CSV; exits 77 (skipped) where clang or its libFuzzer is missing
#   -j  processes per target (default 1), on a machine with cores to spare:
#       each runs RUNS / JOBS executions on the target's one corpus folder
#       (what one finds, the others read when they restart); execs and
#       execs_per_s are their sums, coverage_edges the most one saw
#   -x  no build: the targets already built in BUILD_DIR (one copied to a
#       machine without clang)
#   -L  longest input libFuzzer makes (-max_len; default: its own choice,
#       4,096 bytes or the longest seed)
#
# New inputs a run finds go to BUILD_DIR/tests/fuzz/corpus/NAME, never to
# the committed seeds (tests/fuzz/corpus/NAME). A crash becomes a
# regression input in tests/fuzz/crashes/NAME with its fix.
set -euo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init fuzz
build=$top/build-fuzz
runs=10000000
secs=1800
csv=$here/results/fuzz.csv
smoke=0
merge=0
jobs=1
nobuild=0
maxlen=()
while getopts "b:n:t:o:msj:xL:h" o; do
  case $o in
    b) build=$OPTARG ;;
    n) runs=$OPTARG ;;
    t) secs=$OPTARG ;;
    o) csv=$OPTARG ;;
    m) merge=1 ;;
    s) smoke=1 ;;
    j) jobs=$OPTARG ;;
    x) nobuild=1 ;;
    L) maxlen=(-max_len="$OPTARG") ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))

SKIP=77
say() { echo "fuzz: $*" >&2; }
missing() {
  if [ $smoke -eq 1 ]; then say "skipped: $*"; exit $SKIP; fi
  say "$*"; exit 1
}

if [ $nobuild -eq 0 ]; then
# clang, and a libFuzzer it can link.
command -v clang >/dev/null || missing "clang is not installed (apt-get install clang)"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
  'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
  > "$probe/probe.c"
clang -fsanitize=fuzzer,address,undefined "$probe/probe.c" -o "$probe/probe" \
  >/dev/null 2>&1 || missing "clang cannot link libFuzzer (-fsanitize=fuzzer)"

# The clang build: only the fuzzers and what they link. -mcx16: clang
# inlines the 16-byte compare-and-swap of the ABA-counted objects only
# when told the CPU has cmpxchg16b (gcc's builds do it without).
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$top" -B "$build" -DCMAKE_C_COMPILER=clang \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_FLAGS=-mcx16 \
    -DRIVET_SANITIZE=fuzzer-no-link,address,undefined >/dev/null
fi
cmake --build "$build" --target rivet-fuzz -j "$(nproc)" >/dev/null ||
  { cmake --build "$build" --target rivet-fuzz -j 1; exit 1; }
fi

bin=$build/tests/fuzz
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$bin"/rv-fuzz-*; do targets+=("${f##*/rv-fuzz-}"); done
fi

# Runs target $1; prints its CSV line.
run_target() {
  local t=$1 exe=$bin/rv-fuzz-$1 log rc=0
  local work=$bin/corpus/$t seeds=("$top/tests/fuzz/corpus/$t")
  [ -x "$exe" ] || { say "no target $t in $bin"; return 1; }
  [ -d "$top/tests/fuzz/crashes/$t" ] && seeds+=("$top/tests/fuzz/crashes/$t")
  mkdir -p "$work"
  rm -f "$bin/$t"-crash-* "$bin/$t"-leak-* "$bin/$t"-oom-* "$bin/$t"-timeout-*
  log=$bin/$t.log
  if [ $smoke -eq 1 ]; then
    limits=(-max_total_time=2)
  else
    limits=(-runs="$runs" -max_total_time="$secs")
  fi
  # JOBS processes on the one corpus, each with its share of the runs.
  [ $smoke -eq 1 ] || [ "$jobs" -le 1 ] ||
    limits=(-runs=$(((runs + jobs - 1) / jobs)) -max_total_time="$secs")
  # -malloc_limit_mb: a verbs RTS may announce the largest message the
  # transport carries, 2 GiB, which its receiver allocates; libFuzzer's
  # default limit (-rss_limit_mb, 2 GiB) would report that as a crash.
  local pids=() i
  for ((i = 0; i < jobs; i++)); do
    "$exe" "${limits[@]}" "${maxlen[@]}" -close_fd_mask=3 -print_final_stats=1 \
      -malloc_limit_mb=4096 -rss_limit_mb=6144 -seed=$((i + 1)) \
      -artifact_prefix="$bin/$t-" "$work" "${seeds[@]}" >"$log.$i" 2>&1 &
    pids+=($!)
  done
  for i in "${!pids[@]}"; do wait "${pids[$i]}" || rc=$?; done
  cat "$log".* >"$log"
  rm -f "$log".*
  local execs rate edges crashes
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | awk '{n += $1} END {print n + 0}')
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | awk '{n += $1} END {print n + 0}')
  edges=$(grep -o ' cov: [0-9]*' "$log" | tr -dc '0-9\n' | sort -n | tail -1)
  crashes=$(find "$bin" -maxdepth 1 \( -name "$t-crash-*" -o -name "$t-leak-*" \
            -o -name "$t-oom-*" -o -name "$t-timeout-*" \) | wc -l)
  if [ $rc -ne 0 ] && [ "$crashes" -eq 0 ]; then
    crashes=1 # it died without saving an input (see the log)
  fi
  echo "$t,${execs:-0},${rate:-0},$crashes,${edges:-0}"
  if [ $rc -ne 0 ]; then
    say "$t failed (exit $rc); its log: $log"
    grep -m1 -A12 -E 'ERROR|==[0-9]+==|runtime error|abort' "$log" >&2 || tail -20 "$log" >&2
  fi
  [ $rc -eq 0 ]
}

failed=0
lines=()
for t in "${targets[@]}"; do
  line=$(run_target "$t") || failed=1
  [ -n "$line" ] || continue
  lines+=("$line")
  say "$line"
done

if [ $smoke -eq 0 ]; then
  mkdir -p "$(dirname "$csv")"
  kept=()
  if [ $merge -eq 1 ] && [ -f "$csv" ]; then
    ran=" ${targets[*]} "
    while IFS= read -r l; do
      case "$ran" in *" ${l%%,*} "*) ;; *) kept+=("$l") ;; esac
    done < <(tail -n +2 "$csv")
  fi
  { echo "target,execs,execs_per_s,crashes,coverage_edges"
    printf '%s\n' "${kept[@]}" "${lines[@]}" | sort; } > "$csv"
  say "wrote $csv"
fi
exit $failed
