# The machine a benchmark ran on, for its result files; sourced by
# benchmark scripts (bash, set -euo pipefail).
#
# machine_model: lscpu's model name (commas made spaces, so that it fits
# a CSV field), or "unknown".
#
# machine_probe_init PEERS_DIR TMP_DIR: builds the machine-state probe
# c2c-probe.c of PEERS_DIR into TMP_DIR; with no PEERS_DIR it says on
# stderr that runs are not labelled, and every probe gives "unprobed".
#
# machine_probe FILE LABEL: runs the probe, appends to FILE the row
#   LABEL,line_rtt_ns,xcore_copy1M_us,local_copy1M_us,zeropage_copy1M_us,state
# (LABEL may hold several fields) and prints the state: "fast" (a cache
# line bounced between cpu 0 and cpu 1 in <= 300 ns and a 1 MiB copy of
# data the other core just wrote in <= 80 us), "slow" (<= 1000 ns and
# <= 300 us) or "loaded" (worse); "unprobed" without a probe.
#
# machine_state_of BEFORE AFTER: a run's state from the probes around it
# ("slow", or "fast>slow" if it changed).

machine_probe_bin=""

machine_model() {
  local m
  m=$(lscpu 2> /dev/null | sed -n 's/^Model name: *//p' | head -1 | tr , ' ')
  echo "${m:-unknown}"
}

machine_probe_init() {
  local peers=$1 tmp=$2
  if [ -z "$peers" ]; then
    echo "$(basename "$0"): no peers folder (-P DIR): runs are not" \
         "labelled with the machine's state" >&2
    return 0
  fi
  [ -f "$peers/c2c-probe.c" ] ||
    { echo "$(basename "$0"): no c2c-probe.c in $peers" >&2; return 1; }
  cc -O2 -pthread "$peers/c2c-probe.c" -o "$tmp/c2c-probe" ||
    { echo "$(basename "$0"): cannot build $peers/c2c-probe.c" >&2; return 1; }
  machine_probe_bin=$tmp/c2c-probe
}

machine_probe() {
  local out
  if [ -z "$machine_probe_bin" ] || ! out=$("$machine_probe_bin"); then
    echo unprobed; return
  fi
  echo "$out" | awk -v label="$2" -v f="$1" '
    $1 == "c2c:" { line = $3; x = $5
      st = "loaded"
      if (line <= 1000 && x <= 300) st = "slow"
      if (line <= 300 && x <= 80) st = "fast"
      printf "%s,%s,%s,%s,%s,%s\n", label, line, x, $7, $9, st >> f
      print st }'
}

machine_state_header="line_rtt_ns,xcore_copy1M_us,local_copy1M_us,zeropage_copy1M_us,state"

machine_state_of() { [ "$1" = "$2" ] && echo "$1" || echo "$1>$2"; }
