# shellcheck shell=bash
# What was measured, for the result files of the benchmarks that run a
# peer beside rivet: each side's version, compiler and build flags, and
# the cpus its processes or workers were pinned to. Sourced by benchmark
# scripts (bash, set -euo pipefail); every function prints one CSV field
# (commas made ";", runs of white space one space), "unknown" when it
# cannot tell. The flags are read from the builds themselves and the
# binding from runs, so that the files say what ran, not what a script
# meant to run.
#
# csv_field TEXT...: TEXT as one CSV field.
#
# rivet_version TOP: git describe of rivet's tree TOP (its commit,
# "-dirty" when it holds uncommitted changes).
#
# rivet_stack CONFIG: the UCX under rivet and the transport settings of
# the job file CONFIG: "UCX 1.13.1 tls=sm;self".
#
# rivet_compiler BUILD: the C compiler of rivet's CMake build BUILD, "ID
# VERSION (PATH)".
#
# rivet_flags BUILD PROGRAM: "BUILD_TYPE: FLAGS", FLAGS the ones
# bench/PROGRAM of BUILD was compiled with, warnings left out.
#
# rivet_binding BUILD CONFIG PROCESSES THREADS PROGRAM ARGS...: runs a
# short job under rivetrun with rivet's debug log and prints where each
# worker (rank r, thread t) ran, as rivet's placement reports it (hwloc's
# core index): "r0.t0 core 0; r1.t0 core 1".
#
# peer_binding NAME CMD...: runs CMD (its output dropped) and prints the
# cpus each process named NAME below it may run on, as the kernel reports
# them (Cpus_allowed_list) the last time it was seen, and the cpu time it
# had used by then, in the order the processes started: "cpu 0 (0.31 s);
# cpu 1 (0.30 s)". The cpu time tells the ranks from helpers that only
# wait (the udp conduit's spawner and its fork, say).

csv_field() {
  local s
  s=$(echo "$*" | tr ',\n\t' ';  ' | tr -s ' ' | sed 's/^ //; s/ $//')
  echo "${s:-unknown}"
}

rivet_version() {
  csv_field "$(git -C "$1" describe --always --dirty --abbrev=12 2> /dev/null)"
}

. "$(dirname "${BASH_SOURCE[0]}")/ucx-perftest.sh" # ucx_version

rivet_stack() {
  local set
  set=$(sed -n '/^ *ucx:/,$ s/^ *\(tls\|net_devices\): *\([^ ]*\).*/\1=\2/p' \
          "$1" 2> /dev/null | paste -sd ' ' -) || true
  csv_field "UCX $(ucx_version) $set"
}

rivet_compiler() {
  local id ver cc
  id=$(sed -n 's/^set(CMAKE_C_COMPILER_ID "\(.*\)")/\1/p' \
         "$1"/CMakeFiles/*/CMakeCCompiler.cmake 2> /dev/null | head -1) || true
  ver=$(sed -n 's/^set(CMAKE_C_COMPILER_VERSION "\(.*\)")/\1/p' \
          "$1"/CMakeFiles/*/CMakeCCompiler.cmake 2> /dev/null | head -1) || true
  cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$1/CMakeCache.txt" \
         2> /dev/null) || true
  [ -n "$cc" ] || { csv_field ""; return; }
  csv_field "$id $ver ($cc)"
}

rivet_flags() {
  local flags type
  flags=$(sed -n 's/^C_FLAGS = //p' \
            "$1/bench/CMakeFiles/$2.dir/flags.make" 2> /dev/null |
          tr ' ' '\n' | grep -v '^-W' | paste -sd ' ' -) || true
  type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$1/CMakeCache.txt" \
           2> /dev/null) || true
  [ -n "$flags" ] || { csv_field ""; return; }
  csv_field "${type:-no build type}: $flags"
}

rivet_binding() {
  local build=$1 config=$2 np=$3 th=$4 where
  shift 4
  where=$(RIVET_LOG_LEVEL=debug RIVET_JOB_THREADS=$th timeout 60 \
            "$build/bin/rivetrun" --timeout 50 --no-prefix -n "$np" \
            -c "$config" "$@" 2>&1 > /dev/null |
          sed -n 's/.*\(r[0-9]*\.t[0-9]*\)\] debug: worker [0-9]* runs on \([a-z]* [-0-9,]*\).*/\1 \2/p' |
          sort | paste -sd ';' - | sed 's/;/; /g') ||
    true
  csv_field "$where"
}

# descendants PID -> PID and every process below it, one per line
descendants() {
  local p c kids
  echo "$1"
  for c in /proc/"$1"/task/*/children; do
    kids=""
    read -r kids 2> /dev/null < "$c" || true
    for p in $kids; do descendants "$p"; done
  done
}

# running PID: is PID alive and not a zombie waiting to be reaped?
running() {
  local stat=""
  read -r stat 2> /dev/null < /proc/"$1"/stat || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

peer_binding() {
  local name=$1 pid p comm k v stat order="" out="" hz
  local -A cpus=() ticks=()
  shift
  hz=$(getconf CLK_TCK)
  "$@" > /dev/null 2>&1 &
  pid=$!
  # Poll the process tree until CMD ends; a process re-pinned after it
  # started (GASNet's smp conduit re-pins its second rank) is reported
  # where it was pinned last.
  while running "$pid"; do
    for p in $(descendants "$pid"); do
      comm=""
      read -r comm 2> /dev/null < /proc/"$p"/comm || continue
      [ "$comm" = "$name" ] || continue
      v=""
      while read -r k v; do
        [ "$k" = Cpus_allowed_list: ] && break
      done 2> /dev/null < /proc/"$p"/status || continue
      read -r stat 2> /dev/null < /proc/"$p"/stat || continue
      set -- ${stat##*) }
      [ -n "${cpus[$p]:-}" ] || order="$order $p"
      cpus[$p]=$v ticks[$p]=$((${12} + ${13}))
    done
    sleep 0.02
  done
  wait "$pid" || true
  for p in $(echo $order | tr ' ' '\n' | sort -n); do
    out="$out${out:+; }cpu ${cpus[$p]} ($(awk -v t="${ticks[$p]}" -v hz="$hz" \
                                          'BEGIN { printf "%.2f", t / hz }') s)"
  done
  csv_field "$out"
}
