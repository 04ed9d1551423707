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
  local tl=$1 test=$2 size=$3 n=$4 out
  local scpu=${perftest_server_cpu:-0} ccpu=${perftest_client_cpu:-1}
  shift 4
  port=$((port + 1))
  env $(ucx_env "$tl") taskset -c "$scpu" ucx_perftest -p $port > /dev/null 2>&1 &
  local server=$!
  sleep 0.5
  out=$(env $(ucx_env "$tl") taskset -c "$ccpu" timeout 120 ucx_perftest 127.0.0.1 \
        -p $port -t "$test" -s "$size" -n "$n" -w $((n / 10 + 10)) "$@" 2>&1 \
        | grep '^Final:' | tail -1) || true
  for _ in 1 2 3 4 5 6; do
    kill -0 $server 2> /dev/null || break
    sleep 0.5
  done
  kill $server 2> /dev/null || true
  wait $server 2> /dev/null || true
  echo "$out"
}
