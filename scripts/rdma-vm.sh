#!/usr/bin/env bash
# A real kernel RDMA device on a machine without an RDMA NIC: a small
# Debian 12 guest booted under qemu whose stock kernel has the Soft-RoCE
# driver (rdma_rxe), with an rxe0 device on a dummy netdev.
#
#   scripts/rdma-vm.sh image
#       Builds the guest image once, into ${RIVET_RDMA_VM_CACHE:-~/.cache/
#       rivet/rdma-vm} (outside the clone). Later calls reuse it; it is
#       rebuilt only when what defines it changes (the image section of this
#       script, which holds the package list: its sha256 is kept beside the
#       image, with the guest's installed package versions).
#   scripts/rdma-vm.sh run [--share DIR]... [--] CMD [ARGS...]
#       Boots the guest (building the image first if needed), brings up
#       rxe0, and runs CMD as root inside it with each DIR (default: the
#       repository root) shared over 9p at the same absolute path as on the
#       host, so host-built binaries and files naming absolute paths work
#       unchanged (same bookworm userland). The working directory is the
#       current one when it lies inside a share, else the first share. CMD's
#       output is printed as it runs; the exit status is CMD's. When the
#       guest cannot be built or booted, it says why and exits non-zero
#       (125 when CMD never ran).
#   scripts/rdma-vm.sh run --host N listen=PORT|connect=PORT [...] CMD
#       The same, as host N (1 or 2) of two guests wired together by
#       qemu's socket network on 127.0.0.1:PORT (the first listens, the
#       second connects): hostname rivet-rdma-vmN, 192.168.78.N on the
#       virtio NIC, and rxe0 on that NIC instead of dummy0, so that the
#       two guests' rxe devices reach each other as two machines' NICs do
#       (scripts/rdma-hosts.sh boots the pair).
#   scripts/rdma-vm.sh status
#       Says whether the cached image is present and current.
#
# Inside the guest: rxe0 on dummy0 (192.168.77.1/24), port 1; GID 0 is the
# link-local RoCE v2 GID, the IPv4 one's index is exported as
# RIVET_RDMA_VM_IPV4_GID (perftest -x, ibv_*_pingpong -g). UCX 1.13 over
# rxe needs UCX_IB_GID_INDEX=0 (with the IPv4 GID its ud_verbs wire-up times
# out); this script leaves UCX_* alone, the caller sets it. One device:
# every process of a job shares rxe0 (loopback); two rxe devices in one
# guest do not reach each other on kernel 6.1.
#
# Costs, measured on a 2-core machine without usable KVM (software
# emulation, TCG): a cold image build takes about 3 minutes (debootstrap
# dominates; the image holds about 750 MB); a boot 20-25 s before CMD
# starts (up to 40 s on a busy host), power-off about 1 s. Each phase's
# duration is printed. With 2 vCPUs, qemu keeps up to 2 host cores busy.
# Emulation is slow: build on the host and run host-built binaries in the
# guest; compare only ratios measured inside the guest, never absolute
# speeds.
#
# Environment:
#   RIVET_RDMA_VM_CACHE    image cache folder (default ~/.cache/rivet/rdma-vm)
#   RIVET_RDMA_VM_MIRROR   Debian mirror for the image (default: the host's
#                          apt configuration)
#   RIVET_RDMA_VM_TIMEOUT  seconds a run may take, boot included (3600)
#   RIVET_RDMA_VM_CPUS     guest vCPUs (2)
#   RIVET_RDMA_VM_MEM      guest memory in MiB (3072)
#   RIVET_RDMA_VM_ACCEL    tcg (default) or kvm (where KVM boots stock
#                          kernels; this machine's paravirtual KVM does not)
#   RIVET_RDMA_VM_KEEP     1 keeps the run's control folder (console log)
set -euo pipefail

export PATH=$PATH:/usr/sbin:/sbin
me=$(basename "$0")
here=$(cd "$(dirname "$0")" && pwd)
top=$(dirname "$here")
cache=${RIVET_RDMA_VM_CACHE:-${HOME:-/root}/.cache/rivet/rdma-vm}

say() { echo "[$me] $*" >&2; }
die() { echo "$me: error: $*" >&2; exit "${RC:-1}"; }
now() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Host tools: installed with apt-get as root, else the command is printed.
need_host_pkgs() { # package ...
    "$(dirname "$0")/install-deps.sh" "$@" ||
        die "the host needs these Debian packages: $*"
}

#>>> image: everything between these markers defines the guest image; its
# sha256 decides whether a cached image is still current.
image_suite=bookworm
image_packages=(
    # kernel (its stock config has rdma_rxe, 9p over virtio) and tools
    linux-image-amd64 kmod iproute2 procps
    # verbs userland: libibverbs with the rxe provider, the ibv_* tools,
    # perftest, rdma_cm and its tools
    ibverbs-providers ibverbs-utils perftest rdmacm-utils
    # UCX with its InfiniBand transports (ucx_info, ucx_perftest)
    ucx-utils
    # what host-built rivet programs and tests link against, and ctest
    libyaml-0-2 libcmocka0 libhwloc15 libnuma1 libpmix2 libudev1 cmake
    # mpirun, for jobs across two guests (scripts/rdma-hosts.sh)
    openmpi-bin
)

# PID 1 of the guest. It mounts the control share (tag ctl) that the host
# fills for each run, runs its stage2 script with the output in out.log
# there, writes the exit status to rc there, and powers off. Everything
# else a run does lives in stage2, so changing it needs no new image.
write_vminit() { # rootfs
    cat > "$1/sbin/rivet-vminit" << 'EOF'
#!/bin/sh
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8
mountpoint -q /proc || mount -t proc proc /proc
mountpoint -q /sys || mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm; mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp; mount -o remount,rw /
hostname rivet-rdma-vm; ip link set lo up
modprobe -a 9pnet_virtio 9p
mkdir -p /run/ctl
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 ctl /run/ctl; then
    /bin/bash /run/ctl/stage2 > /run/ctl/out.log 2>&1 < /dev/null
    echo $? > /run/ctl/rc
else
    echo "rivet-vminit: cannot mount the control share (9p tag ctl)" > /dev/console
fi
sync; umount -a -t 9p 2>/dev/null
echo o > /proc/sysrq-trigger; sleep 30
EOF
    chmod 755 "$1/sbin/rivet-vminit"
}

# The initrd needs only what mounts the virtio disk; a small one halves
# the boot under emulation.
shrink_initrd() { # rootfs kernel-version
    sed -i 's/^MODULES=.*/MODULES=list/' "$1/etc/initramfs-tools/initramfs.conf"
    printf '%s\n' virtio_pci virtio_blk ext4 crc32c_generic \
        > "$1/etc/initramfs-tools/modules"
    chroot "$1" update-initramfs -u -k "$2" > /dev/null 2>&1 || die "update-initramfs failed in the guest rootfs"
}

image_size=4G
image_kernel_args="root=/dev/vda rw console=ttyS0 quiet panic=-1 init=/sbin/rivet-vminit"
#<<< image

image_hash() {
    sed -n '/^#>>> image/,/^#<<< image/p' "$0" | sha256sum | cut -d' ' -f1
}

image_current() {
    [ -f "$cache/rootfs.img" ] && [ -f "$cache/vmlinuz" ] &&
        [ -f "$cache/initrd.img" ] && [ -f "$cache/inputs.sha256" ] &&
        [ "$(cat "$cache/inputs.sha256")" = "$(image_hash)" ]
}

debian_mirror() {
    local m=${RIVET_RDMA_VM_MIRROR:-}
    [ -n "$m" ] || m=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' \
        /etc/apt/sources.list.d/*.sources 2> /dev/null | grep -v security | head -1)
    [ -n "$m" ] || m=$(awk '$1 == "deb" && $2 !~ /security/ { print $2; exit }' \
        /etc/apt/sources.list 2> /dev/null)
    [ -n "$m" ] || die "no Debian mirror found in the host's apt configuration; set RIVET_RDMA_VM_MIRROR"
    echo "$m"
}

build_image() {
    [ "$(id -u)" -eq 0 ] ||
        die "building the guest image needs root (debootstrap and chroot); run 'sudo $0 image' once"
    need_host_pkgs debootstrap e2fsprogs
    local mirror work root kver t0 t1
    mirror=$(debian_mirror)
    mkdir -p "$cache"
    work=$(mktemp -d "$cache/build.XXXXXX")
    root=$work/rootfs
    trap 'rm -rf "$work"' EXIT
    t0=$(now)
    say "building the guest image in $cache (debian $image_suite from $mirror)"
    local pkgs
    pkgs=$(IFS=,; echo "${image_packages[*]}")
    debootstrap --variant=minbase --include="$pkgs" "$image_suite" "$root" \
        "$mirror" > "$work/debootstrap.log" 2>&1 || {
        tail -20 "$work/debootstrap.log" >&2
        die "debootstrap of $image_suite from $mirror failed (log above)"
    }
    say "debootstrap: $(since "$t0") s"
    t1=$(now)
    kver=$(ls "$root/lib/modules" | sort -V | tail -1)
    [ -n "$kver" ] && [ -f "$root/boot/vmlinuz-$kver" ] ||
        die "no kernel in the guest rootfs"
    find "$root/lib/modules/$kver" -name 'rdma_rxe.ko*' | grep -q . ||
        die "the guest kernel $kver has no rdma_rxe module"
    write_vminit "$root"
    shrink_initrd "$root" "$kver"
    echo rivet-rdma-vm > "$root/etc/hostname"
    printf '127.0.0.1 localhost\n127.0.1.1 rivet-rdma-vm\n' > "$root/etc/hosts"
    chroot "$root" apt-get clean
    rm -rf "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
    chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' > "$work/packages.txt"
    cp -L "$root/boot/vmlinuz-$kver" "$work/vmlinuz"
    cp -L "$root/boot/initrd.img-$kver" "$work/initrd.img"
    mkfs.ext4 -q -L rivet-rdma-vm -d "$root" "$work/rootfs.img" "$image_size" > /dev/null ||
        die "mkfs.ext4 of the guest image failed"
    say "kernel $kver, initrd and ext4 image: $(since "$t1") s"
    rm -f "$cache/inputs.sha256"
    mv -f "$work/vmlinuz" "$work/initrd.img" "$work/rootfs.img" \
        "$work/packages.txt" "$cache/"
    printf 'built %s from %s, kernel %s\n' "$(date -u +%FT%TZ)" "$mirror" \
        "$kver" > "$cache/image.info"
    image_hash > "$cache/inputs.sha256"
    rm -rf "$work"
    trap - EXIT
    say "cold image build: $(since "$t0") s ($(du -h --apparent-size "$cache/rootfs.img" | cut -f1) image," \
        "$(du -h "$cache/rootfs.img" | cut -f1) on disk)"
}

# Builds the image unless the cached one is current; one builder at a time.
ensure_image() {
    mkdir -p "$cache" || die "cannot create the image cache $cache"
    exec 9> "$cache/.lock"
    flock 9
    if image_current; then
        [ "${1:-}" = quiet ] ||
            say "guest image current: $cache ($(cut -c1-12 "$cache/inputs.sha256"), $(cat "$cache/image.info"))"
    else
        [ -f "$cache/inputs.sha256" ] && say "guest image out of date (its inputs changed): rebuilding"
        build_image
    fi
    flock -u 9
}

# Guest side of a run: sourced settings are in /run/ctl/env.
write_stage2() { # file
    cat > "$1" << 'EOF'
#!/bin/bash
# Written by rdma-vm.sh for one run: mounts the shares, brings up rxe0,
# runs the command. Its output lands in out.log of the control share.
set -u
read -r up _ < /proc/uptime; echo "$up" > /run/ctl/booted
. /run/ctl/env
fail() { echo "rdma-vm guest: $*"; echo "$*" > /run/ctl/setup-failed; exit 125; }
for i in "${!SHARES[@]}"; do
    mkdir -p "${SHARES[$i]}" &&
        mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 "share$i" "${SHARES[$i]}" ||
        fail "cannot mount the shared folder ${SHARES[$i]} (9p tag share$i)"
done
modprobe -a dummy rdma_rxe ib_uverbs rdma_ucm || fail "cannot load dummy, rdma_rxe, ib_uverbs, rdma_ucm"
if [ -n "${HOST_INDEX:-}" ]; then
    # One of two hosts: the virtio NIC wired to the other guest's.
    modprobe virtio_net || fail "cannot load virtio_net"
    hostname "rivet-rdma-vm$HOST_INDEX"
    printf '127.0.0.1 localhost\n192.168.78.1 rivet-rdma-vm1\n192.168.78.2 rivet-rdma-vm2\n' > /etc/hosts
    nic=
    for t in $(seq 50); do
        nic=$(ls /sys/class/net | grep -v -e '^lo$' -e '^dummy' | head -1)
        [ -n "$nic" ] && break
        sleep 0.1
    done
    [ -n "$nic" ] || fail "no network interface for the link to the other host"
    addr=192.168.78.$HOST_INDEX
    ip addr add $addr/24 dev "$nic" && ip link set "$nic" up ||
        fail "cannot bring up $nic"
    rdma link add rxe0 type rxe netdev "$nic" || fail "rdma link add rxe0 on $nic failed"
    want=0000:0000:0000:0000:0000:ffff:c0a8:4e0$HOST_INDEX gid=
else
{ ip link show dummy0 > /dev/null 2>&1 || ip link add dummy0 type dummy; } &&
    ip addr add 192.168.77.1/24 dev dummy0 &&
    ip link set dummy0 up || fail "cannot create the dummy0 netdev"
rdma link add rxe0 type rxe netdev dummy0 || fail "rdma link add rxe0 failed"
addr=192.168.77.1 nic=dummy0
want=0000:0000:0000:0000:0000:ffff:c0a8:4d01 gid=
fi
for t in $(seq 50); do
    state=$(cat /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null)
    for g in 0 1 2 3; do
        [ "$(cat /sys/class/infiniband/rxe0/ports/1/gids/$g 2>/dev/null)" = "$want" ] && gid=$g
    done
    case $state in *ACTIVE*) [ -n "$gid" ] && break ;; esac
    sleep 0.2
done
case $state in *ACTIVE*) ;; *) fail "rxe0 port 1 is not active (state: ${state:-none})" ;; esac
[ -n "$gid" ] || fail "rxe0 has no GID for $addr"
[ -e /dev/infiniband/uverbs0 ] || fail "/dev/infiniband/uverbs0 is missing"
export RIVET_RDMA_VM_DEVICE=rxe0 RIVET_RDMA_VM_IPV4_GID=$gid
echo "[rdma-vm] guest $(uname -r), $(nproc) vCPUs, $(awk '/MemTotal/ { print int($2/1024) }' /proc/meminfo) MiB;" \
     "rxe0 on $nic $addr/24: port 1 ${state#*: }, GID 0 link-local, GID $gid IPv4"
cd "$WORKDIR" || fail "no working directory $WORKDIR"
"${CMD[@]}"
EOF
}

run_guest() {
    local shares=() cmd=() net="" host_index=""
    while [ $# -gt 0 ]; do
        case $1 in
            --host) [ $# -ge 3 ] || die "--host needs an index (1, 2) and listen=PORT or connect=PORT"
                    host_index=$2 net=$3; shift 3 ;;
            --share) [ $# -ge 2 ] || die "--share needs a folder"
                     shares+=("$2"); shift 2 ;;
            --share=*) shares+=("${1#--share=}"); shift ;;
            --) shift; break ;;
            -*) die "unknown option $1 (usage: $me run [--share DIR]... [--] CMD [ARGS...])" ;;
            *) break ;;
        esac
    done
    cmd=("$@")
    [ ${#cmd[@]} -gt 0 ] || die "no command (usage: $me run [--share DIR]... [--] CMD [ARGS...])"
    [ ${#shares[@]} -gt 0 ] || shares=("$top")
    local i s
    for i in "${!shares[@]}"; do
        s=$(cd "${shares[$i]}" 2> /dev/null && pwd -P) || die "no folder ${shares[$i]} to share"
        case $s in
            / | /proc | /proc/* | /sys | /sys/* | /dev | /dev/* | /run | /run/* | \
            /tmp | /var | /var/lib | /usr | /usr/* | /lib* | /bin | /bin/* | \
            /sbin | /sbin/* | /etc | /etc/*)
                die "cannot share $s at the same path in the guest (it would hide the guest's own)" ;;
        esac
        shares[i]=$s
    done
    local cwd workdir
    cwd=$(pwd -P)
    workdir=${shares[0]}
    for s in "${shares[@]}"; do
        case $cwd/ in "$s"/*) workdir=$cwd ;; esac
    done

    need_host_pkgs qemu-system-x86
    RC=125 ensure_image quiet

    ctl=$(mktemp -d "${TMPDIR:-/tmp}/rivet-rdma-vm.XXXXXX")
    {
        printf 'SHARES=('; printf '%q ' "${shares[@]}"; printf ')\n'
        printf 'WORKDIR=%q\n' "$workdir"
        printf 'CMD=('; printf '%q ' "${cmd[@]}"; printf ')\n'
        [ -z "$host_index" ] || printf 'HOST_INDEX=%q\n' "$host_index"
    } > "$ctl/env"
    write_stage2 "$ctl/stage2"
    : > "$ctl/out.log"

    local accel=${RIVET_RDMA_VM_ACCEL:-tcg} cpu=max
    [ "$accel" = kvm ] && cpu=host
    local qargs=(
        -accel "$accel" -cpu "$cpu" -smp "${RIVET_RDMA_VM_CPUS:-2}"
        -m "${RIVET_RDMA_VM_MEM:-3072}"
        -display none -monitor none -serial "file:$ctl/console.log"
        -no-reboot -snapshot
        -kernel "$cache/vmlinuz" -initrd "$cache/initrd.img"
        -append "$image_kernel_args"
        -drive "file=$cache/rootfs.img,format=raw,if=virtio"
        -virtfs "local,path=$ctl,mount_tag=ctl,security_model=none,id=ctl"
    )
    if [ -n "$host_index" ]; then
        # Two guests wired together by qemu's socket network (no root, no
        # bridge): the first listens on a local port, the second connects.
        qargs+=(-netdev "socket,id=wire,${net%%=*}=127.0.0.1:${net#*=}"
                -device "virtio-net-pci,netdev=wire,mac=52:54:00:52:56:0$host_index")
    else
        qargs+=(-nic none)
    fi
    for i in "${!shares[@]}"; do
        qargs+=(-virtfs "local,path=${shares[$i]},mount_tag=share$i,security_model=none,id=share$i")
    done

    local timeout=${RIVET_RDMA_VM_TIMEOUT:-3600} t0 booted="" boot_s="" done_t=""
    # Background jobs ignore SIGINT in a script: stop the guest ourselves
    # when this script is interrupted or ends early.
    qpid="" tpid=""
    trap '[ -z "$qpid" ] || kill $qpid 2> /dev/null; [ -z "$tpid" ] || kill $tpid 2> /dev/null
          [ -z "$qpid" ] || { sleep 0.5; rm -rf "$ctl"; }' EXIT
    trap 'say "interrupted: stopping the guest"; exit 130' INT
    trap 'say "terminated: stopping the guest"; exit 143' TERM
    say "booting the guest ($accel, ${RIVET_RDMA_VM_CPUS:-2} vCPUs; shared: ${shares[*]}; timeout ${timeout} s)"
    t0=$(now)
    qemu-system-x86_64 "${qargs[@]}" < /dev/null > "$ctl/qemu.log" 2>&1 &
    qpid=$!
    tail -n +1 -F --pid=$qpid "$ctl/out.log" 2> /dev/null &
    tpid=$!
    local timed_out=0
    while kill -0 $qpid 2> /dev/null; do
        if [ -z "$booted" ] && [ -s "$ctl/booted" ]; then
            booted=$(now)
            boot_s=$(since "$t0")
            say "boot: $boot_s s (qemu start to command start; guest uptime $(cat "$ctl/booted") s)"
        fi
        if [ -z "$done_t" ] && [ -s "$ctl/rc" ]; then done_t=$(now); fi
        if awk -v a="$t0" -v b="$(now)" -v t="$timeout" 'BEGIN { exit !(b - a > t) }'; then
            timed_out=1
            kill $qpid 2> /dev/null || true
            break
        fi
        sleep 0.2
    done
    local qrc=0
    wait $qpid || qrc=$?
    [ -n "$done_t" ] || { [ -s "$ctl/rc" ] && done_t=$(now); }
    # tail reads what is left and exits by itself once qemu is gone
    for i in $(seq 50); do kill -0 $tpid 2> /dev/null || break; sleep 0.1; done
    kill $tpid 2> /dev/null || true
    wait $tpid 2> /dev/null || true
    qpid="" tpid=""

    local rc=125 why=""
    if [ -s "$ctl/rc" ]; then
        rc=$(cat "$ctl/rc")
        [ -f "$ctl/setup-failed" ] && why="guest set-up failed: $(cat "$ctl/setup-failed")"
    elif [ $timed_out -eq 1 ]; then
        why="the guest did not finish within $timeout s (RIVET_RDMA_VM_TIMEOUT); killed"
        [ -n "$booted" ] || why="$why before it started the command"
    elif [ -z "$booted" ]; then
        why="the guest never started the command (qemu exit status $qrc)"
    else
        why="the guest stopped before the command finished (qemu exit status $qrc)"
    fi
    if [ -n "$booted" ] && [ -n "$done_t" ]; then
        say "boot $boot_s s, command $(awk -v a="$booted" -v b="$done_t" 'BEGIN { printf "%.1f", b - a }') s," \
            "power-off $(awk -v a="$done_t" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s, total $(since "$t0") s"
    fi
    if [ -n "$why" ]; then
        echo "$me: error: $why" >&2
        if [ -s "$ctl/qemu.log" ]; then
            echo "--- qemu:" >&2; tail -20 "$ctl/qemu.log" >&2
        fi
        if [ -s "$ctl/console.log" ]; then
            echo "--- guest console (last lines):" >&2; tail -30 "$ctl/console.log" >&2
        fi
        RIVET_RDMA_VM_KEEP=1
    fi
    if [ "${RIVET_RDMA_VM_KEEP:-0}" = 1 ]; then
        say "control folder kept: $ctl"
    else
        rm -rf "$ctl"
    fi
    exit "$rc"
}

case ${1:-} in
    image) ensure_image ;;
    run) shift; run_guest "$@" ;;
    status)
        if image_current; then echo "current: $cache ($(cat "$cache/image.info"))"
        elif [ -f "$cache/rootfs.img" ]; then echo "out of date: $cache"; exit 1
        else echo "absent: $cache"; exit 1; fi ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
