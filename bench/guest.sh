# Sourced by the benchmarks that run in the Soft-RoCE guest of
# scripts/rdma-vm.sh (verbs-bw.sh, verbs-rndv.sh). Needs $top (the source
# tree) and fail().

# guest_ready BUILD FILE...: the files are built in BUILD; prints BUILD's
# physical path, after waiting (up to an hour) while another qemu guest
# runs: two guests on a small machine starve each other.
guest_ready() {
  local build=$1 f waited=0
  shift
  for f in "$@"; do
    [ -e "$build/$f" ] || fail "$build/$f not built (make build)"
  done
  while pgrep -f '^qemu-system' > /dev/null; do
    [ $waited -ge 3600 ] && fail "another qemu guest has run for an hour; giving up"
    [ $waited -eq 0 ] && echo "another qemu guest is running; waiting for it" >&2
    sleep 30
    waited=$((waited + 30))
  done
  (cd "$build" && pwd -P)
}

# guest_run BUILD CMD ARGS...: runs CMD in one guest session with the
# source tree (and BUILD, when outside it) shared at the same paths.
guest_run() {
  local build=$1 real
  shift
  real=$(cd "$top" && pwd -P)
  local shares=(--share "$real")
  case $build/ in "$real"/*) ;; *) shares+=(--share "$build") ;; esac
  "$real/scripts/rdma-vm.sh" run "${shares[@]}" -- "$@"
}

# guest_bench SCRIPT HEADER ARGS...: one benchmark session. Empties
# BUILD/<name>/ (the logs: $logs afterwards), starts $runs with the CSV
# HEADER, and runs "SCRIPT --in-guest $build $runs $logs ARGS..." in the
# guest. Needs $build (as guest_ready printed it) and $runs.
guest_bench() {
  local script=$1 header=$2 name
  shift 2
  name=$(basename "$script" .sh)
  logs=$build/$name
  rm -rf "$logs"
  mkdir -p "$logs"
  echo "$header" > "$runs"
  guest_run "$build" "$script" --in-guest "$build" "$runs" "$logs" "$@" ||
    fail "the guest run failed (logs: $logs)"
}
