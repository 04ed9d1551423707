# Sourced by the launchers of jobs across hosts (scripts/multinode.sh,
# scripts/rdma-hosts.sh): the options they take, as rivetrun's, and the
# environment they pass on to every process through mpirun.

# launch_opts ARGS...: sets timeout (when given), np and job (the job
# file, as an absolute path); launch_rest is PROGRAM and its arguments.
launch_opts() {
  while [ $# -gt 0 ]; do
    case $1 in
      --timeout) timeout=$2; shift 2 ;;
      -n) np=$2; shift 2 ;;
      -c) job=$(readlink -f "$2"); shift 2 ;;
      --) shift; break ;;
      -*) echo "usage: $0 [--timeout S] [-n PROCESSES] [-c JOB.yaml] PROGRAM [ARGS...]" >&2
          exit 2 ;;
      *) break ;;
    esac
  done
  launch_rest=("$@")
}

# launch_pass OWN: mpirun's -x options (in pass) for the RIVET_*, UCX_*
# and sanitizer variables of the environment, but the launcher's own
# (named OWN*).
launch_pass() {
  pass=()
  local v
  for v in $(env | sed -n 's/^\(\(RIVET\|UCX\|ASAN\|UBSAN\|LSAN\|TSAN\)_[A-Za-z0-9_]*\)=.*/\1/p'); do
    case $v in "$1"*) ;; *) pass+=(-x "$v") ;; esac
  done
}
