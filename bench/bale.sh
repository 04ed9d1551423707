#!/usr/bin/env bash
# Bale classic's histogram and index-gather kernels: rivet's own
# (rv-histo, rv-ig) beside Bale's four models on OpenSHMEM (AGP, Exstack,
# Exstack2, Conveyor), in one run, the two systems alternating run by run
# (the machine's speed drifts; medians over repetitions).
#
#   bench/bale.sh -P BALE_SH -B BALE_DIR [-r REPS] [-b BUILD_DIR]
#                 [-t "shm tcp"] [-l "2x1 1x2"] [-m MODES] [-a "histo ig"]
#                 [-n N] [-o SECONDS] [-s]
#
#   -P  the peer's script that builds and runs Bale (bale.sh run DIR APP
#       MODEL ARGS; or BALE_SH in the environment)
#   -B  the Bale build it made (bale.sh build DIR; or BALE_DIR)
#   -r  repetitions (default 5)       -b  rivet's build (default build/)
#   -t  rivet's transports: shm (configs/pingpong-shm.yaml, UCX sm,self)
#       and tcp (configs/pingpong-tcp.yaml, UCX tcp,self on lo)
#   -l  rivet's layouts, PROCESSESxTHREADS: 2x1 (two processes pinned to
#       cores 0 and 1) and 1x2 (one process, two worker threads on cores 0
#       and 1, whose calls take the local bypass; shm only, as no
#       transport carries them). Bale always runs 2 PEs on cores 0 and 1
#       over UCX shared memory.
#   -m  rivet's modes, PATH-AGGREGATION (am.path send|write,
#       am.aggregation none|trad|ovfl; default all six)
#   -a  apps (default "histo ig")     -n  updates / requests per worker
#   -o  seconds before a run is ended (default 60); a mode that timed out
#       twice is skipped in later repetitions
#   -s  only summarize the runs file of an earlier run again
#
# Sizes as Bale's own runs: 1,000,000 updates (requests) per worker, into
# 1,000 counters per worker (histo) or from 100,000 entries per worker
# (ig). Every run goes to bench/results/bale-runs.csv
# (app,system,mode,workers,transport,rep,rate_per_worker,time_s,status,
# note), the medians over the successful runs to bench/results/bale.csv
# with the columns
#   app,system,mode,workers,transport,rate_per_worker
# (system bale or rivet; mode Bale's model or rivet's path-aggregation;
# workers PROCESSESxTHREADS; rate in updates or requests per second per
# worker; 0 when no run succeeded), and a plot to bench/results/bale.png.
# What ran goes to bench/results/bale-peers.csv, one row per system and
# configuration (rivet's layouts and transports, Bale's one), with the
# columns
#   system,workers,transport,version,stack,compiler,build_flags,binding,cpu
# version: rivet's git describe, or the Bale tarball its script built and
# the versions of Bale's packages; stack: the UCX (and for Bale, the Open
# MPI OpenSHMEM and the launch options of its script) underneath;
# compiler and build_flags: read from rivet's CMake build and from the
# configure logs of Bale's build; binding: where each worker ran, from a
# short run of each before the measurements (rivet's debug log, hwloc's
# core index; for Bale the cpus the kernel lets each PE run on and the
# cpu time it used, in start order); cpu: lscpu's model name. One row per system rather than columns of
# bale.csv: these are properties of the builds and launches, the same on
# every figure's row, and a configure line repeated on each of them would
# bury the figures. -s leaves the file as the runs made it.
# It prints, per app and rivet layout/transport, rivet's best mode beside
# Bale's conveyor and Bale's best model, with the ratios (targets: best /
# conveyor >= 1.0, best / Bale's best >= 0.8). A run that fails, times out
# or reports a wrong result is recorded with its status and the script
# goes on.
set -uo pipefail

. "$(cd "$(dirname "$0")" && pwd)/lib.sh"
bench_init bale
. "$here/machine-state.sh"
. "$here/peer-info.sh"
bale_sh=${BALE_SH:-}
bale_dir=${BALE_DIR:-}
reps=5
transports="shm tcp"
layouts="2x1 1x2"
modes="send-none send-trad send-ovfl write-none write-trad write-ovfl"
apps="histo ig"
models="AGP Exstack Exstack2 Conveyor"
n=1000000
run_timeout=60
summary_only=0
while getopts "P:B:r:b:t:l:m:a:n:o:sh" o; do
  case $o in
    P) bale_sh=$OPTARG ;;
    B) bale_dir=$OPTARG ;;
    r) reps=$OPTARG ;;
    b) build=$OPTARG ;;
    t) transports=$OPTARG ;;
    l) layouts=$OPTARG ;;
    m) modes=$OPTARG ;;
    a) apps=$OPTARG ;;
    n) n=$OPTARG ;;
    o) run_timeout=$OPTARG ;;
    s) summary_only=1 ;;
    *) usage ;;
  esac
done

peers_csv=$results/bale-peers.csv


table_size() { # app -> entries per worker, as Bale's runs
  case $1 in histo) echo 1000 ;; ig) echo 100000 ;; esac
}

# The rivet configurations: TRANSPORT:LAYOUT, one process's layouts on
# shm only (its calls never reach the transport).
configs=""
for tl in $transports; do
  for l in $layouts; do
    [ "$tl" != shm ] && [ "${l%x*}" -lt 2 ] && continue
    configs="$configs $tl:$l"
  done
done

if [ $summary_only -eq 1 ]; then
  [ -s "$runs" ] || fail "no runs file $runs to summarize"
else
  [ -n "$bale_sh" ] && [ -x "$bale_sh" ] ||
    fail "pass Bale's run script with -P (or BALE_SH): the peer's bale.sh"
  [ -n "$bale_dir" ] && [ -x "$bale_dir/bin/histo" ] ||
    fail "pass Bale's build with -B (or BALE_DIR): bale.sh build DIR"
  for app in $apps; do
    case $app in histo | ig) ;; *) fail "app $app: histo or ig" ;; esac
    [ -x "$build/bin/rv-$app" ] ||
      fail "$build/bin/rv-$app not built; run make first"
  done
  for m in $modes; do
    case $m in send-none | send-trad | send-ovfl | write-none | write-trad | \
      write-ovfl) ;;
      *) fail "mode $m: PATH-AGGREGATION, send|write and none|trad|ovfl" ;;
    esac
  done
  echo "app,system,mode,workers,transport,rep,rate_per_worker,time_s,status,note" \
    > "$runs"
fi
errlog=$(mktemp)
trap 'rm -f "$errlog"' EXIT

# Runs that timed out, per app/mode/layout/transport: two of them and the
# combination is skipped from then on, so a hang costs minutes, not hours.
declare -A timeouts

# record APP SYSTEM MODE WORKERS TRANSPORT REP RATE TIME STATUS NOTE
record() {
  local note=${10//,/;}
  echo "$1,$2,$3,$4,$5,$6,$7,$8,$9,${note:0:160}" >> "$runs"
  printf '  %-5s %-5s %-10s %-3s %-3s %12s/s  %s%s\n' "$1" "$2" "$3" "$4" \
    "$5" "$7" "$9" "${note:+  ($note)}"
}

# What went wrong, in one line: the launcher's verdict or the program's
# last complaint, leaving out the ring-full notice that am.on_full: fail
# logs once per destination and the kernels handle by retrying.
last_error() {
  grep -v "ring is full" "$errlog" | grep -E "rivetrun:|FAILED|failed|error" |
    tail -1 | tr -d '\r' | cut -c1-160
}

run_rivet() { # app mode transport layout rep
  local app=$1 mode=$2 tl=$3 l=$4 rep=$5 key out rc rate t status note
  local np=${l%x*} th=${l#*x}
  key="$app:$mode:$l:$tl"
  if [ "${timeouts[$key]:-0}" -ge 2 ]; then
    record "$app" rivet "$mode" "$l" "$tl" "$rep" 0 0 skipped \
      "timed out twice before"
    return
  fi
  out=$(RIVET_AM_PATH=${mode%-*} RIVET_AM_AGGREGATION=${mode#*-} \
        RIVET_JOB_THREADS=$th timeout -k 5 $((run_timeout + 15)) \
        "$build/bin/rivetrun" --timeout "$run_timeout" --no-prefix -n "$np" \
        -c "$top/configs/pingpong-$tl.yaml" "$build/bin/rv-$app" -n "$n" \
        -T "$(table_size "$app")" 2> "$errlog")
  rc=$?
  rate=$(echo "$out" | sed -n 's/.*rate_per_worker=\([0-9.]*\).*/\1/p' |
         tail -1)
  t=$(echo "$out" | sed -n 's/.* time_s=\([0-9.]*\).*/\1/p' | tail -1)
  note=""
  if [ $rc -eq 0 ] && [ -n "$rate" ]; then
    status=ok
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    status=timeout note="no result after ${run_timeout} s"
    timeouts[$key]=$((${timeouts[$key]:-0} + 1))
  elif grep -q FAILED "$errlog"; then
    status=wrong note=$(grep FAILED "$errlog" | tail -1)
  elif [ $rc -ne 0 ]; then
    status=failed note="exit $rc: $(last_error)"
  else
    status=noresult note="exit 0 without a result line"
  fi
  [ "$status" = ok ] || rate=0 t=0
  record "$app" rivet "$mode" "$l" "$tl" "$rep" "$rate" "$t" "$status" \
    "$note"
}

run_bale() { # app model rep
  local app=$1 model=$2 rep=$3 out rate t
  out=$(BALE_TIMEOUT=$run_timeout "$bale_sh" run "$bale_dir" "$app" \
        "$model" -n "$n" -T "$(table_size "$app")" 2> "$errlog")
  rate=$(echo "$out" | sed -n 's/.*rate_per_pe=\([0-9.]*\).*/\1/p' | tail -1)
  t=$(echo "$out" | sed -n 's/.* time_s=\([0-9.]*\).*/\1/p' | tail -1)
  if [ -n "$rate" ]; then
    record "$app" bale "$model" 2x1 shm "$rep" "$rate" "$t" ok ""
  else
    record "$app" bale "$model" 2x1 shm "$rep" 0 0 failed \
      "$(tail -1 "$errlog" | cut -c1-160)"
  fi
}

# bale_version -> the tarball Bale's script built and the versions its
# packages' configure logs give
bale_version() {
  local tarball pkgs
  tarball=$(sed -n 's|^TARBALL=.*/||p' "$bale_sh" | head -1)
  pkgs=$(sed -n 's/^It was created by \(.*\) configure \(.*\), which.*/\1 \2/p' \
           "$bale_dir"/obj/*/config.log 2> /dev/null | paste -sd ';' - |
           sed 's/;/; /g') || true
  csv_field "${tarball:-unknown tarball}${pkgs:+ ($pkgs)}"
}

# bale_stack -> the OpenSHMEM and UCX Bale runs on and the launch options
# of its script
bale_stack() {
  local ompi launch tls
  ompi=$(oshmem_info 2> /dev/null | sed -n 's/^ *Open MPI: //p' | head -1) || true
  launch=$(sed -e ':a' -e '/\\$/N; s/\\\n *//; ta' "$bale_sh" |
           grep -o 'oshrun [^"]*' | head -1 | sed 's/ *$//') || true
  tls=$(grep -o 'UCX_TLS=[^ ]*' "$bale_sh" | head -1) || true
  csv_field "Open MPI ${ompi:-unknown} OpenSHMEM ($launch); UCX $(ucx_version) $tls"
}

# bale_compiler -> the compiler oshcc ran, as the configure logs give it
bale_compiler() {
  local v
  v=$(awk '/^configure:[0-9]*: .* --version >&5$/ { cc = $2; getline
             print cc " = " $0; exit }' "$bale_dir/obj/apps/config.log" \
        2> /dev/null) || true
  csv_field "$v"
}

# bale_flags -> each package's configure options (the prefix left out)
# and compiler variables from its configure log, packages with the same
# ones together
bale_flags() {
  local v
  v=$(awk 'FNR == 1 { p = FILENAME; sub(/\/config\.log$/, "", p); sub(/.*\//, "", p)
                      pk[++n] = p }
           /^  \$ / && !(p in args) { a = $0; sub(/^  \$ [^ ]*configure/, "configure", a)
                                      gsub(/ --prefix=[^ ]*/, "", a); args[p] = a }
           /^(CC|CFLAGS|CPPFLAGS|LDFLAGS)=/ { v = $0; sub(/^[A-Z]*=/, "", v)
                                               gsub(/\047/, "", v)
                                               if (v != "") f[p] = f[p] " " substr($0, 1, index($0, "=")) v }
           END { for (i = 1; i <= n; i++) { k = args[pk[i]] f[pk[i]]
                   if (k in who) who[k] = who[k] " " pk[i]
                   else { who[k] = pk[i]; ks[++m] = k } }
                 for (i = 1; i <= m; i++)
                   printf "%s%s [%s]", (i > 1 ? "; " : ""), ks[i], who[ks[i]] }' \
        "$bale_dir"/obj/*/config.log 2> /dev/null) || true
  csv_field "$v"
}

# What ran, before the measurements: each side's build, and a short run
# of each configuration to see where its workers are pinned.
if [ $summary_only -eq 0 ]; then
  echo "== what runs: builds, versions and binding -> $peers_csv"
  prog=rv-${apps%% *}
  cpu=$(machine_model)
  {
    echo "system,workers,transport,version,stack,compiler,build_flags,binding,cpu"
    for c in $configs; do
      tl=${c%:*} l=${c#*:}
      cfg=$top/configs/pingpong-$tl.yaml
      printf 'rivet,%s,%s,%s,%s,%s,%s,%s,%s\n' "$l" "$tl" \
        "$(rivet_version "$top")" "$(rivet_stack "$cfg")" \
        "$(rivet_compiler "$build")" "$(rivet_flags "$build" "$prog")" \
        "$(rivet_binding "$build" "$cfg" "${l%x*}" "${l#*x}" \
             "$build/bin/$prog" -n 1000 -T "$(table_size "${prog#rv-}")")" \
        "$cpu"
    done
    printf 'bale,2x1,shm,%s,%s,%s,%s,%s,%s\n' "$(bale_version)" \
      "$(bale_stack)" "$(bale_compiler)" "$(bale_flags)" \
      "$(peer_binding "${prog#rv-}" env BALE_TIMEOUT=60 "$bale_sh" run \
           "$bale_dir" "${prog#rv-}" Conveyor -n 100000 \
           -T "$(table_size "${prog#rv-}")")" "$cpu"
  } > "$peers_csv"
  cat "$peers_csv"
fi

for rep in $(seq 1 "$reps"); do
  [ $summary_only -eq 1 ] && break
  for app in $apps; do
    echo "== repetition $rep/$reps, $app"
    # rivet's runs, mode by mode across its configurations, with Bale's
    # models spread evenly among them, each before its share of rivet's
    # runs; even repetitions run the list backwards, so that neither
    # system always goes first and both see the machine's drift alike.
    items=()
    for m in $modes; do
      for c in $configs; do items+=("rivet $m ${c#*:} ${c%:*}"); done
    done
    nb=$(echo $models | wc -w)
    list=()
    j=0
    for b in $models; do
      at=$((j * ${#items[@]} / nb))
      list+=("bale $b")
      list+=("${items[@]:$at:$(((j + 1) * ${#items[@]} / nb - at))}")
      j=$((j + 1))
    done
    if [ $((rep % 2)) -eq 0 ]; then
      rev=()
      for ((k = ${#list[@]} - 1; k >= 0; k--)); do rev+=("${list[$k]}"); done
      list=("${rev[@]}")
    fi
    for it in "${list[@]}"; do
      set -- $it
      if [ "$1" = bale ]; then
        run_bale "$app" "$2" "$rep"
      else
        run_rivet "$app" "$2" "$4" "$3" "$rep"
      fi
    done
  done
done

# ---------------------------------------------------------------------------
# Medians over the successful runs of each (app, system, mode, workers,
# transport); 0 where none succeeded.
{
  echo "app,system,mode,workers,transport,rate_per_worker"
  awk -F, "$median_awk"'
    NR > 1 {
      k = $1 "," $2 "," $3 "," $4 "," $5
      if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
      if ($9 == "ok") r[k] = r[k] " " $7
    }
    END {
      for (i = 1; i <= nk; i++) {
        k = order[i]
        printf "%s,%.0f\n", k, (k in r) ? median(r[k]) : 0
      }
    }' "$runs" | sort -t, -k1,1 -k2,2 -k5,5 -k4,4r -s
} > "$csv"

machine=$(machine_model)
nreps=$(awk -F, 'NR > 1 && $6 + 0 > m { m = $6 + 0 } END { print m + 0 }' \
        "$runs")
# The updates per worker of the runs summarized (a rivet run's time and
# rate give it back; -n when there is none).
n_runs=$(awk -F, 'NR > 1 && $9 == "ok" && $8 > 0 { printf "%.0f", $7 * $8; exit }' \
         "$runs")
n_runs=$(awk -v x="${n_runs:-$n}" 'BEGIN { printf "%.0f", (x >= 1e5 ? int(x / 1e4 + 0.5) * 1e4 : x) }')

echo
echo "Bale classic kernels, rate per worker (M/s), medians of $nreps" \
     "repetitions${machine:+, $machine}"
awk -F, -v runs="$runs" '
  BEGIN {
    # failures per combination, from the runs file
    while ((getline line < runs) > 0) {
      split(line, f, ",")
      if (f[1] == "app") continue
      k = f[1] "," f[2] "," f[3] "," f[4] "," f[5]
      tot[k]++
      if (f[9] != "ok") { bad[k]++; why[k] = f[9] }
    }
  }
  NR > 1 {
    k = $1 "," $2 "," $3 "," $4 "," $5
    rate[k] = $6
    if (!(($1) in aseen)) { aseen[$1] = 1; apps[++na] = $1 }
    c = $5 " " $4
    if ($2 == "rivet") {
      if (!(c in cseen)) { cseen[c] = 1; cfgs[++nc] = c }
      if (!($3 in mseen)) { mseen[$3] = 1; rmodes[++nm] = $3 }
    } else if (!($3 in bseen)) { bseen[$3] = 1; bmodels[++nb] = $3 }
  }
  function cell(k) {
    if (!(k in rate)) return sprintf("%10s", "-")
    if (bad[k] == tot[k]) return sprintf("%10s", why[k])
    return sprintf("%8.2f%s", rate[k] / 1e6, bad[k] ? "*" bad[k] : "  ")
  }
  END {
    for (a = 1; a <= na; a++) {
      app = apps[a]
      printf "\n%s\n%-12s", app, "rivet"
      for (j = 1; j <= nc; j++) printf " %10s", cfgs[j]
      printf "\n"
      for (i = 1; i <= nm; i++) {
        printf "%-12s", rmodes[i]
        for (j = 1; j <= nc; j++) {
          split(cfgs[j], p, " ")
          printf " %s", cell(app ",rivet," rmodes[i] "," p[2] "," p[1])
        }
        printf "\n"
      }
      printf "%-12s %10s\n", "Bale", "shm 2x1"
      for (i = 1; i <= nb; i++)
        printf "%-12s %s\n", bmodels[i],
               cell(app ",bale," bmodels[i] ",2x1,shm")
    }
    print "\n(*k: k runs of the median failed; a name in place of a rate:" \
          " no run succeeded)"
  }' "$csv"

echo
echo "rivet's best mode against Bale (2 PEs, shm); targets: best / conveyor" \
     ">= 1.0, best / Bale best >= 0.8"
awk -F, '
  NR > 1 && $2 == "bale" {
    b[$1, $3] = $6
    if ($6 + 0 > bbest[$1] + 0) { bbest[$1] = $6; bname[$1] = $3 }
  }
  NR > 1 && $2 == "rivet" {
    c = $1 "," $5 "," $4
    if (!(c in seen)) { seen[c] = 1; cs[++n] = c }
    if (!(c in best) || $6 + 0 > best[c] + 0) { best[c] = $6; bm[c] = $3 }
  }
  function ratio(x, y) { return y > 0 ? sprintf("%.3f", x / y) : "n/a" }
  function verdict(x, y, t) {
    return y > 0 && x / y >= t ? "met" : "not met"
  }
  END {
    printf "%-6s %-8s %-11s %9s %9s %-9s %9s %9s %-8s %9s %-8s\n", "app",
           "rivet", "best mode", "M/s", "conveyor", "Bale best", "M/s",
           "/conveyor", "", "/best", ""
    for (i = 1; i <= n; i++) {
      split(cs[i], p, ",")
      a = p[1]; r = best[cs[i]]; cv = b[a, "Conveyor"]; bb = bbest[a]
      printf "%-6s %-8s %-11s %9.2f %9.2f %-9s %9.2f %9s %-8s %9s %-8s\n",
             a, p[2] " " p[3], bm[cs[i]], r / 1e6, cv / 1e6, bname[a],
             bb / 1e6, ratio(r, cv), verdict(r, cv, 1.0), ratio(r, bb),
             verdict(r, bb, 0.8)
    }
  }' "$csv"
echo
echo "every run: $runs"
echo "medians:   $csv"
fails=$(awk -F, 'NR > 1 && $9 != "ok"' "$runs" | wc -l)
if [ "$fails" -gt 0 ]; then
  echo "runs that did not succeed ($fails):"
  awk -F, 'NR > 1 && $9 != "ok" { printf "  %s %s %s %s %s rep %s: %s %s\n",
           $1, $2, $3, $4, $5, $6, $9, $10 }' "$runs"
fi

# ---------------------------------------------------------------------------
# The plot: one panel per app, rate per worker on a log axis; for each of
# rivet's modes a bar per configuration, then Bale's models (2 PEs, shm);
# dashed lines at Bale's conveyor and Bale's best model.
command -v gnuplot > /dev/null ||
  { echo "bale: gnuplot not found, no plot" >&2; exit 0; }
term=png
gnuplot -e "set terminal" 2>&1 | grep -w pngcairo > /dev/null && term=pngcairo
dat=$(mktemp)
gp=$(mktemp)
trap 'rm -f "$errlog" "$dat" "$gp"' EXIT
plot_apps=$(awk -F, 'NR > 1 && !($1 in s) { s[$1] = 1; printf "%s ", $1 }' \
            "$csv")
{
  echo "set terminal $term size $((1000 * $(echo $plot_apps | wc -w) + 40)),720 noenhanced"
  echo "set output \"$png\""
  echo "set multiplot layout 1,$(echo $plot_apps | wc -w) title" \
       "\"Bale classic kernels: rivet's calls (rv-histo, rv-ig) vs Bale on" \
       "OpenSHMEM, $(awk -v n="$n_runs" 'BEGIN { if (n >= 1e6) printf "%g M", n / 1e6; else printf "%g", n }')" \
       "updates per worker; medians of $nreps repetitions" \
       "${machine:+($machine)}\""
  echo "set logscale y"
  echo "set format y \"%g M/s\""
  echo "set ylabel \"rate per worker (updates or requests per second)\""
  echo "set grid ytics"
  echo "set style fill solid 0.85 border -1"
  # The key in the empty top of the panel (the y range goes 40 times past
  # the tallest bar), off the bars and their labels.
  echo "set key inside top left horizontal maxcols 3 samplen 2 font \",10\""
  echo "set xtics nomirror rotate by -35 left"
  echo "set tics font \",10\""
  echo "set bmargin 7"
} > "$gp"
for app in $plot_apps; do
  # One block per series (rivet configuration, then Bale), each line
  # "x value label"; values in M/s, a failed combination drawn as a
  # label at the bottom.
  awk -F, -v app="$app" -v dat="$dat" -v gp="$gp" '
    function lab(v) {
      return v >= 10 ? sprintf("%.0f M/s", v) : v >= 1 ? \
             sprintf("%.1f M/s", v) : sprintf("%.2f M/s", v)
    }
    NR > 1 && $1 == app {
      v = $6 / 1e6
      if ($2 == "rivet") {
        c = $5 " " $4
        if (!(c in cs)) { cs[c] = ++nc; cname[nc] = c }
        if (!($3 in ms)) { ms[$3] = ++nm; mname[nm] = $3 }
        val[cs[c], ms[$3]] = v; has[cs[c], ms[$3]] = 1
      } else {
        if (!($3 in bs)) { bs[$3] = ++nb; bname[nb] = $3 }
        bval[bs[$3]] = v
        if ($3 == "Conveyor") conv = v
        if (v > bbest) { bbest = v; bbn = $3 }
      }
      if (v > 0 && (lo == "" || v < lo)) lo = v
      if (v > hi) hi = v
    }
    END {
      if (lo == "") lo = 0.1
      w = 0.8 / (nc > 0 ? nc : 1)
      printf "" > dat
      for (j = 1; j <= nc; j++) {
        for (i = 1; i <= nm; i++)
          if (has[j, i])
            printf "%g %g \"%s\"\n", i - 1 + (j - 1 - (nc - 1) / 2) * w,
                   val[j, i], (val[j, i] > 0 ? lab(val[j, i]) : "failed") > dat
        printf "\n\n" > dat
      }
      for (i = 1; i <= nb; i++)
        printf "%g %g \"%s\"\n", nm + i - 0.5, bval[i],
               (bval[i] > 0 ? lab(bval[i]) : "failed") > dat
      printf "\n\n" > dat
      close(dat)
      ymin = 10 ^ int(log(lo / 2) / log(10) - (lo / 2 < 1 ? 1 : 0))
      printf "set title \"%s (%s entries per worker)\"\n", \
             app == "histo" ? "histogram" : "index-gather", \
             app == "histo" ? "1,000" : "100,000" >> gp
      printf "set yrange [%g:%g]\n", ymin, hi * 40 >> gp
      printf "set xrange [-0.6:%g]\n", nm + nb - 0.1 >> gp
      printf "set boxwidth %g\n", w >> gp
      printf "set xtics (" >> gp
      for (i = 1; i <= nm; i++)
        printf "%s\"rivet %s\" %d", (i > 1 ? ", " : ""), mname[i], i - 1 >> gp
      for (i = 1; i <= nb; i++)
        printf ", \"Bale %s\" %g", bname[i], nm + i - 0.5 >> gp
      printf ")\n" >> gp
      printf "plot " >> gp
      for (j = 1; j <= nc + 1; j++) {
        t = j <= nc ? "rivet " cname[j] : "Bale, 2 PEs, shm"
        printf "%s\"%s\" index %d using 1:($2 > 0 ? $2 : NaN) with boxes " \
               "title \"%s\", \"%s\" index %d using 1:($2 > 0 ? $2 : %g):3 " \
               "with labels rotate by 90 left offset 0,0.3 font \",7\" " \
               "notitle", (j > 1 ? ", " : ""), dat, j - 1, t, dat, j - 1, \
               ymin * 1.3 >> gp
      }
      # The conveyor and the best model of Bale as dashed lines, named in
      # the key (labels in the plot would run into those of the bars).
      if (conv > 0)
        printf ", %g with lines dt 2 lw 1.5 lc rgb \"#d62728\" title " \
               "\"Bale conveyor, %s\"", conv, lab(conv) >> gp
      if (bbest > 0 && bbn != "Conveyor")
        printf ", %g with lines dt 3 lw 1.5 lc rgb \"#555555\" title " \
               "\"Bale best (%s), %s\"", bbest, bbn, lab(bbest) >> gp
      printf "\n" >> gp
      close(gp)
    }' "$csv"
  # The data file is rewritten per panel: give each panel its own copy.
  cp "$dat" "$dat.$app"
  sed -i "s|\"$dat\"|\"$dat.$app\"|g" "$gp"
done
echo "unset multiplot" >> "$gp"
if gnuplot "$gp"; then echo "plot:      $png"; fi
for app in $plot_apps; do rm -f "$dat.$app"; done
