# Sourced by the benchmark scripts: runs ucx_perftest, the raw baseline,
# with the same pinning as rivet's runs (server on core 0, client on 1,
# unless the caller sets perftest_server_cpu and perftest_client_cpu: the
# store's benchmark puts the client, which fetches, where rivet's fetching
# rank runs). Uses and advances the caller's $port.

ucx_env() { # transport -> env assignments for ucx_perftest
  case $1 in
    shm) echo "UCX_TLS=sm,self" ;;
    tcp) echo "UCX_TLS=tcp,self UCX_NET_DEVICES=lo" ;;
  esac
}

# perftest TRANSPORT TEST SIZE ITERS [OPTION...] -> its "Final:" line
# (empty if it failed); the options go to the client (e.g. -O 1)
perftest() {
  perftest_output "$@" | grep '^Final:' | tail -1 || true
}

# perftest_output TRANSPORT TEST SIZE ITERS [OPTION...] -> everything the
# client printed; assignments in $perftest_env (e.g. UCX_LOG_LEVEL=info)
# are added to both sides' environment
perftest_output() {
  local tl=$1 test=$2 size=$3 n=$4 out
  local scpu=${perftest_server_cpu:-0} ccpu=${perftest_client_cpu:-1}
  shift 4
  port=$((port + 1))
  env $(ucx_env "$tl") ${perftest_env:-} taskset -c "$scpu" \
    ucx_perftest -p $port > /dev/null 2>&1 &
  local server=$!
  sleep 0.5
  out=$(env $(ucx_env "$tl") ${perftest_env:-} taskset -c "$ccpu" timeout 120 \
        ucx_perftest 127.0.0.1 -p $port -t "$test" -s "$size" -n "$n" \
        -w $((n / 10 + 10)) "$@" 2>&1) || true
  for _ in 1 2 3 4 5 6; do
    kill -0 $server 2> /dev/null || break
    sleep 0.5
  done
  kill $server 2> /dev/null || true
  wait $server 2> /dev/null || true
  echo "$out"
}

# ucx_version -> the UCX version ucx_info reports, e.g. 1.13.1
ucx_version() {
  ucx_info -v 2> /dev/null | sed -n 's/^# Version //p' | head -1
}

# ucx_am_send TRANSPORT -> the "am_send: 0..<egr/short>..93..<egr/bcopy>
# ..8256..<rndv>..(inf)" line UCX gives an endpoint to another process of
# this node with the context ucp_am_bw and ucp_am_lat create (active
# messages only): which protocol carries a message of each size
ucx_am_send() {
  env $(ucx_env "$1") ucx_info -e -u m -P intra 2> /dev/null |
    sed -n 's/^#[[:space:]]*\(am_send:.*\)/\1/p' | head -1
}

# perftest_lanes TRANSPORT TEST -> the lanes ucx_perftest's own endpoint
# uses ("am(sysv/memory cma/memory)"), from its UCX_LOG_LEVEL=info log
perftest_lanes() {
  perftest_env=UCX_LOG_LEVEL=info perftest_output "$1" "$2" 8 100 |
    sed -n 's/.*ep_cfg\[[0-9]*\]: *//p' | head -1
}

# am_proto AM_SEND BYTES -> the protocol an am_send line (of ucx_am_send
# or rivet's log) names for a message of BYTES bytes (payload and header),
# e.g. egr/short; ranges include their upper bound
am_proto() {
  echo "$1" | awk -v b="$2" '{
    sub(/^.*am_send: */, ""); n = split($0, t, /\.\./)
    for (i = 2; i < n; i += 2) {
      hi = t[i + 1]; gsub(/[<>()]/, "", t[i])
      if (hi == "(inf)" || b + 0 <= hi + 0) { print t[i]; exit }
    }
    print "unknown" }'
}
