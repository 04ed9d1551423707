#!/usr/bin/env bash
# Installs the Debian 12 packages rivet builds and runs with, or the
# packages named as arguments (scripts/rdma-vm.sh names its host tools).
# As root it runs apt-get; otherwise it prints the command and fails.
set -euo pipefail

pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(
  build-essential cmake pkg-config
  libyaml-dev libcmocka-dev libnuma-dev libhwloc-dev uthash-dev liburcu-dev
  libucx-dev ucx-utils
  libpmix-dev openmpi-bin
  slurmctld slurmd slurm-client munge
  libibverbs-dev
  nettle-dev
  gnuplot-nox procps doxygen python3 groff-base
  spin
  clang libclang-rt-dev clang-format
  abigail-tools
)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
    || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "rivet needs these Debian packages:" >&2
  echo "  sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
