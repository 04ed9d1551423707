#!/usr/bin/env bash
# The examples (examples/*.c) as a user builds and runs them: rivet
# installed into a temporary prefix, each example built with pkg-config
# and with the examples' own CMake project (find_package(rivet)), and each
# run through the installed rivetrun with examples/job.yaml: the
# pkg-config builds over shared memory, the CMake builds over tcp. Each example checks its own result and prints a
# line ending in "ok".
# Usage: test_examples.sh BUILD_DIR SOURCE_DIR [CFLAGS]
set -euo pipefail
build=$1
src=$2
cflags=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
export PKG_CONFIG_PATH=$(ls -d "$tmp"/prefix/lib*/pkgconfig | head -1)
examples="histogram index_gather store_pipeline nim"

# pkg-config, as the examples' comments say
mkdir "$tmp/pc"
for e in $examples; do
  cc -std=c11 -Wall -Wextra -Werror $cflags "$src/examples/$e.c" -o "$tmp/pc/$e" \
     $(pkg-config --cflags --libs rivet)
done
# find_package(rivet), from a copy of the folder: nothing of the tree
cp -r "$src/examples" "$tmp/app"
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
      -DCMAKE_C_FLAGS="$cflags" > "$tmp/app.log"
cmake --build "$tmp/app/build" >> "$tmp/app.log"

sed 's/tls: sm,self/tls: tcp,self/' "$src/examples/job.yaml" > "$tmp/tcp.yaml"
run() { # PROGRAM JOBFILE ARGS...
  local prog=$1 job=$2
  shift 2
  (cd "$tmp" && env -u RIVET_PLUGIN_PATH PATH="$tmp/prefix/bin:$PATH" \
     rivetrun --timeout 120 -c "$job" "$prog" "$@")
}
# The pkg-config builds over shared memory, the CMake ones over tcp.
for e in $examples; do
  for how in "$tmp/pc/$e $src/examples/job.yaml" \
             "$tmp/app/build/$e $tmp/tcp.yaml"; do
    set -- $how
    echo "== $1 with $2"
    out=$(run "$1" "$2") || { echo "$out"; echo "$e failed" >&2; exit 1; }
    echo "$out"
    echo "$out" | grep -q "^$e: .*ok$"
  done
done
echo "examples test passed"
