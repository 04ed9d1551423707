#!/usr/bin/env bash
# Installs rivet into a temporary prefix, builds a program against it with
# pkg-config and with find_package(rivet), and runs both through the
# installed rivetrun. Then builds a transport plugin out of tree against
# the installed headers alone (tests/install/loop_transport.c), installs it
# beside the installed plugins and runs a job over it through the installed
# rivetrun (tests/install/loop_job.c).
# Usage: test_install.sh BUILD_DIR SOURCE_DIR [CFLAGS]
set -euo pipefail
build=$1
src=$2
cflags=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
libdir=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
test -x "$tmp/prefix/bin/rivetrun"
test -x "$tmp/prefix/bin/rivet-config"
test -f "$tmp/prefix/include/rivet/rivet.h"
test -f "$tmp/prefix/include/rivet/rv_transport.h"
test -f "$tmp/prefix/include/rivet/rv_regmem.h"
ls "$tmp"/prefix/lib*/rivet/librivet-ucx.so > /dev/null
if ls "$tmp"/prefix/include/rivet | grep -q -E "rv_core|rv_bootstrap|rv_placement"; then
  echo "internal headers were installed" >&2; exit 1
fi

# pkg-config
export PKG_CONFIG_PATH=$libdir
cc -std=c11 -Wall -Werror $cflags "$src/tests/install/hello.c" -o "$tmp/hello-pc" \
   $(pkg-config --cflags --libs rivet)

# find_package(rivet)
mkdir "$tmp/app"
cp "$src/tests/install/hello.c" "$tmp/app/"
cp "$src/tests/install/CMakeLists.txt.in" "$tmp/app/CMakeLists.txt"
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
      -DCMAKE_C_FLAGS="$cflags" \
      > "$tmp/app.log"
cmake --build "$tmp/app/build" >> "$tmp/app.log"

cfg="$src/configs/pingpong-shm.yaml"
# The installed rivetrun started the three ways users start it: from PATH,
# through a symlink in another folder, and by its full path. Each must find
# the installed plugins from its own location alone: no plugin path from
# the build tree, and a working directory where nothing of rivet lies.
mkdir "$tmp/links"
ln -s "$tmp/prefix/bin/rivetrun" "$tmp/links/rivetrun"
run_installed() { # HOW PROGRAM
  local how=$1 prog=$2 runner
  case $how in
    path) runner=rivetrun ;;
    symlink) runner="$tmp/links/rivetrun" ;;
    full) runner="$tmp/prefix/bin/rivetrun" ;;
  esac
  (cd "$tmp" && env -u RIVET_PLUGIN_PATH PATH="$tmp/prefix/bin:$PATH" \
     $runner --timeout 60 -n 3 -c "$cfg" "$prog")
}
for how in path symlink full; do
  for prog in "$tmp/hello-pc" "$tmp/app/build/hello-cmake"; do
    echo "rivetrun started by $how: $prog"
    out=$(run_installed "$how" "$prog")
    echo "$out"
    test "$(echo "$out" | grep -c 'hello from an installed rivet')" -eq 2
  done
done
# rivet-config loads the plugins' tables the same way.
(cd "$tmp" && env -u RIVET_PLUGIN_PATH PATH="$tmp/prefix/bin:$PATH" \
   rivet-config --check -c "$cfg") | grep -q ": ok$"

# A transport plugin from the installed headers alone (pkg-config's include
# folder; nothing of the source tree), every symbol resolved against the
# installed librivet, installed where the installed rivet looks for
# plugins: libdir/rivet.
plugins=$(dirname "$libdir")/rivet
cc -std=c11 -Wall -Wextra -Werror -fPIC -shared $cflags \
   "$src/tests/install/loop_transport.c" -o "$plugins/librivet-loop.so" \
   -Wl,--no-undefined $(pkg-config --cflags --libs rivet) -lpthread
cc -std=c11 -Wall -Wextra -Werror $cflags "$src/tests/install/loop_job.c" \
   -o "$tmp/loop-job" $(pkg-config --cflags --libs rivet)
cat > "$tmp/loop.yaml" <<'YAML'
job:
  processes: 1
  threads: 3
transport:
  name: loop
YAML
out=$(env -u RIVET_PLUGIN_PATH -u RIVET_JOB_THREADS \
      "$tmp/prefix/bin/rivetrun" --timeout 60 -n 1 -c "$tmp/loop.yaml" \
      "$tmp/loop-job")
echo "$out"
want="^loop job: 3 workers exchanged 1500 messages each, in order, over loop: "
echo "$out" | grep -q "$want"
echo "install test passed"
