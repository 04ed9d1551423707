# bench/lib.sh: the prologue every benchmark script shares. A script
# sources it from its own folder and names itself:
#
#   . "$(cd "$(dirname "$0")" && pwd)/lib.sh"
#   bench_init NAME
#
# bench_init sets
#   here        bench/, this folder
#   top         the source tree
#   build       the build the script measures (top/build; its -b option
#               may change it)
#   results     bench/results, made if missing
#   runs, csv, png
#               results/NAME-runs.csv (every run), results/NAME.csv (the
#               medians), results/NAME.png (the plot)
#   median_awk  median.awk's median(s) function, to put before an awk
#               program: awk -F, "$median_awk"'{...}'
# and defines
#   fail MSG      prints "NAME: MSG" on stderr and exits 1
#   usage [RC]    prints the script's header comment (its lines 2 to the
#                 first that is not a comment) and exits RC (default 2)
#   bench_abs P   prints path P made absolute (from the working folder)

bench_init() {
  bench_name=$1
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  top=$(dirname "$here")
  build=$top/build
  results=$here/results
  mkdir -p "$results"
  runs=$results/$bench_name-runs.csv
  csv=$results/$bench_name.csv
  png=$results/$bench_name.png
  median_awk=$(cat "$here/median.awk")
}

fail() {
  echo "$bench_name: $*" >&2
  exit 1
}

usage() {
  awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
  exit "${1:-2}"
}

bench_abs() {
  case $1 in
  /*) echo "$1" ;;
  *) echo "$(pwd)/$1" ;;
  esac
}
