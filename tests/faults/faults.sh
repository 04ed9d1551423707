#!/usr/bin/env bash
# faults.c (and blocking.c, the kill-in-* scenarios) as a test: runs one
# scenario and checks how the job ended.
#   faults.sh SCENARIO -- RIVETRUN ARGS... FAULTS_BIN ARG
# (the job command as tests/job_test.cmake's rivet_job_test builds it; ARG
# is SCENARIO, or "wait" for the scenarios that signal rivetrun).
#
# For every scenario: the job ends within END_LIMIT_S of the fault (the
# stall excepted, which must not end the job at all), with the exit status
# the scenario gives; rivetrun names the rank and its exit code or signal
# (a crash also prints a backtrace); no process of the job survives (the
# pids and process groups the ranks printed); and nothing is left behind:
# no launcher directory in the job's own TMPDIR, no new /dev/shm entry, no
# SysV segment a process of the job created. The last line is a summary:
#   faults-summary: SCENARIO,END_S,EXIT,NAMED,LEFT
set -uo pipefail
if [ $# -lt 4 ] || [ "$2" != -- ]; then
  echo "usage: faults.sh SCENARIO -- RIVETRUN ARGS... FAULTS_BIN ARG" >&2
  exit 2
fi
scenario=$1
shift 2
cmd=("$@")
END_LIMIT_S=5
STALL_S=10

# What each scenario must end with: rivetrun's exit status and the line
# that names the rank (a regular expression; empty: a clean end).
want_named=""
want_bt=0
case $scenario in
  exit-collective|stall) want_rc=0 ;;
  return-early) want_rc=1
    want_named="rank 0 [(]pid [0-9]+[)] exited with code 0 without rv_finalize" ;;
  exit-mid-traffic) want_rc=3 ;;
  exit-in-handler) want_rc=4 ;;
  exit-thread) want_rc=5 ;;
  abort) want_rc=134; want_bt=1 ;;
  segv) want_rc=139; want_bt=1 ;;
  sigbus) want_rc=135; want_bt=1 ;;
  sigfpe) want_rc=136; want_bt=1 ;;
  sigkill-rank|sigkill-in-segment|sigkill-in-sysv|kill-in-*) want_rc=137 ;;
  sigint-rivetrun) want_rc=130; want_named="received signal 2 " ;;
  sigterm-rivetrun) want_rc=143; want_named="received signal 15 " ;;
  sigkill-rivetrun) want_rc=137 ;;
  *) echo "faults.sh: unknown scenario $scenario" >&2; exit 2 ;;
esac
case $want_rc in
  3|4|5) want_named="rank 1 [(]pid [0-9]+[)] exited with code $want_rc" ;;
  134|135|136|137|139)
    [ "$scenario" = sigkill-rivetrun ] ||
      want_named="rank 1 [(]pid [0-9]+[)] killed by signal $((want_rc - 128)) " ;;
esac
# Under Open MPI's mpirun (a subset of the scenarios), mpirun names the
# rank in its own words; the program's own crash handler is UCX's there
# too.
launcher=$(basename "${cmd[0]}")
# Two hosts (scripts/multinode.sh) are under mpirun too, or under srun
# (RIVET_TEST_MN_LAUNCHER=srun), which names the task: "srun: error:
# HOST: task 1: Exited with exit code 3", "...: task 1: Killed". The ranks
# live in the hosts' own PID namespaces, so the pids they print are not
# this machine's: their survivors are looked for by the program's path.
hosts=0
[ "$launcher" = multinode.sh ] && hosts=1
if [ $hosts = 1 ] && [ "${RIVET_TEST_MN_LAUNCHER:-}" = srun ]; then
  case $want_rc in
    3|4|5) want_named="srun: error: [^:]+: task 1: Exited with exit code $want_rc" ;;
    137) want_named="srun: error: [^:]+: task 1: Killed" ;;
    139) want_named="srun: error: [^:]+: task 1: Segmentation fault" ;;
    0) ;;
    *) echo "faults.sh: $scenario is not run under srun" >&2; exit 2 ;;
  esac
  # srun exits with the largest of its tasks' statuses, and it ends the
  # others with SIGTERM (--kill-on-bad-exit): 143, whatever the victim's.
  [ "$want_rc" = 0 ] || want_rc=143
elif [ "$launcher" = mpirun ] || [ "$launcher" = prterun ] || [ $hosts = 1 ]; then
  case $want_rc in
    3|4|5) want_named="Exit code: +$want_rc" ;;
    134|135|136|137|139)
      want_named="process rank 1 with PID [0-9]+ on node [^ ]+ exited on signal $((want_rc - 128)) " ;;
    0) ;;
    *) echo "faults.sh: $scenario is not run under $launcher" >&2; exit 2 ;;
  esac
fi

# The job's own TMPDIR holds rivetrun's directory; it must be empty after.
work=$(mktemp -d)
log=$work/log
jobtmp=$work/tmp
mkdir "$jobtmp"
trap 'rm -rf "$work"' EXIT
# The sanitizers' handlers would replace the crash a scenario is about, and
# a process that exits from one thread while others run leaks by design.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}handle_segv=0:handle_sigbus=0:handle_sigfpe=0:handle_abort=0:detect_leaks=0"

ls -A /dev/shm 2>/dev/null | sort > "$work/shm.before"
now() { date +%s.%N; }

# sigkill-rivetrun starts the program through a wrapper script that does
# not exec it, so that the rank is not rivetrun's own child.
if [ "$scenario" = sigkill-rivetrun ]; then
  n=${#cmd[@]}
  cmd=("${cmd[@]:0:n-2}" sh -c '"$@"; exit $?' faults-wrapper "${cmd[@]:n-2}")
fi

TMPDIR=$jobtmp "${cmd[@]}" > "$log" 2>&1 &
runpid=$!
case $scenario in
  sig*-rivetrun)
    # Signal rivetrun once every rank is calling.
    for _ in $(seq 1 600); do
      [ "$(grep -c '^.*faults: rank [0-9]* pid' "$log")" -ge 2 ] && break
      sleep 0.1
    done
    sleep 1
    sig=${scenario#sig}; sig=${sig%-rivetrun}; sig=${sig^^}
    t_fault=$(now)
    kill -s "$sig" "$runpid"
    ;;
esac
wait "$runpid"
rc=$?
t_end=$(now)
cat "$log"
# multinode.sh skipped: no namespaces here.
[ $hosts = 1 ] && [ $rc = 77 ] && exit 77

fail=0
bad() { echo "faults.sh: $scenario: $*" >&2; fail=1; }

pids=$(sed -n 's/.*faults: rank [0-9]* pid \([0-9]*\) pgid \([0-9]*\).*/\1 \2/p' "$log")
[ "$scenario" = return-early ] || [ "$(echo "$pids" | grep -c .)" -ge 2 ] ||
  bad "not every rank started"
# The processes of the job: by pid and by process group (a wrapper's
# children are in the rank's group). The sigkill-rivetrun scenario waits
# for them; the others must have none left when rivetrun returns.
survivors() {
  local pg
  if [ $hosts = 1 ]; then
    ps -e -o pid=,stat=,args= | awk -v b="${cmd[${#cmd[@]}-2]}" '
      { pid = $1; st = $2; $1 = $2 = ""; sub(/^ +/, "") }
      st !~ /^Z/ && index($0, b) == 1 { print pid }'
    return
  fi
  for p in $pids; do
    ps -e -o pid=,pgid=,stat= | awk -v p="$p" '($1 == p || $2 == p) && $3 !~ /^Z/ { print $1 }'
  done | sort -u
}
if [ "$scenario" = sigkill-rivetrun ]; then
  for _ in $(seq 1 100); do
    [ -z "$(survivors)" ] && break
    sleep 0.05
  done
  t_end=$(now)
fi
left=""
s=$(survivors | tr '\n' ' ')
[ -n "$s" ] && { left="$left processes:$s"; kill -KILL $s 2>/dev/null; }

if [ -z "${t_fault:-}" ]; then
  t_fault=$(sed -n 's/.*faults: rank [0-9]* faults at \([0-9.]*\).*/\1/p' "$log" | head -n 1)
fi
end_s=""
if [ -n "${t_fault:-}" ]; then
  end_s=$(awk -v a="$t_fault" -v b="$t_end" 'BEGIN { printf "%.2f", b - a }')
fi

[ "$rc" = "$want_rc" ] || bad "rivetrun exited $rc, expected $want_rc"
named=""
if [ -n "$want_named" ]; then
  named=$(grep -E -m 1 "$want_named" "$log")
  [ -n "$named" ] || bad "no line matches '$want_named'"
fi
if [ "$want_bt" = 1 ] && ! grep -qi 'backtrace' "$log"; then
  bad "the crash printed no backtrace"
fi
case $scenario in
  exit-collective) ;;
  stall)
    awk -v e="$end_s" -v s="$STALL_S" 'BEGIN { exit !(e >= s) }' ||
      bad "the job ended $end_s s after the stall began, before it ended" ;;
  *)
    if [ -z "$end_s" ]; then
      bad "the victim never said it faulted"
    elif ! awk -v e="$end_s" -v l="$END_LIMIT_S" 'BEGIN { exit !(e <= l) }'; then
      bad "the job ended $end_s s after the fault (limit $END_LIMIT_S s)"
    fi ;;
esac

# Nothing left behind.
leftdir=$(ls -A "$jobtmp")
[ -n "$leftdir" ] && left="$left launcher-dir:$leftdir"
ls -A /dev/shm 2>/dev/null | sort > "$work/shm.after"
newshm=$(comm -13 "$work/shm.before" "$work/shm.after" | tr '\n' ' ')
[ -n "$newshm" ] && left="$left /dev/shm:$newshm"
[ $hosts = 1 ] && pids="" # SysV segments die with each host's IPC namespace
for p in $pids; do
  seg=$(ipcs -m -p 2>/dev/null | awk -v p="$p" '$3 == p { print $1 }' | tr '\n' ' ')
  [ -n "$seg" ] && left="$left sysv:$seg"
done
[ -n "$left" ] && bad "left behind:$left"

named=${named#*rivetrun: }
echo "faults-summary: $scenario,${end_s:-},$rc,${named//,/;},${left:-nothing}"
exit $fail
