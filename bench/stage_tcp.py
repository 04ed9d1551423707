#!/usr/bin/env python3
"""The baseline of bench/stage.sh: files copied to the other host over one
TCP connection, as a loop of `cat FILE > /dev/tcp/...` into a listener
would, run as a two-process job under mpirun (OMPI_COMM_WORLD_RANK):
rank 1 listens, writes each file into OUT_DIR (a temporary file, fsync,
rename, as rivet-store stage does) and prints the rate; rank 0 connects
and sends each file as [name length][name][size][bytes], and meanwhile,
in a thread, copies the files into its own OUT_DIR, as stage gives every
host of the job a copy, the first included. "%h" in OUT_DIR is the
host's name. With --sha256 both also hash what they write (hashlib,
OpenSSL's SHA-256), as rivet-store stage checks every file.

  stage_tcp.py [--sha256] HOST_ADDRESS PORT OUT_DIR FILE...
"""
import hashlib
import threading
import os
import socket
import struct
import sys
import time


def write_into(out, name, chunks, digest):
    """Writes the byte chunks as OUT/name: temporary file, fsync, rename."""
    tmp = os.path.join(out, "." + name + ".tmp")
    h = hashlib.sha256() if digest else None
    with open(tmp, "wb") as fd:
        for c in chunks:
            fd.write(c)
            if h is not None:
                h.update(c)
        fd.flush()
        os.fsync(fd.fileno())
    os.rename(tmp, os.path.join(out, name))


def local_copy(out, files, digest):
    os.makedirs(out, exist_ok=True)
    for f in files:
        with open(f, "rb") as src:
            write_into(out, os.path.basename(f),
                       iter(lambda: src.read(4 << 20), b""), digest)


def send(addr, port, files):
    for _ in range(600):
        try:
            s = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit("stage_tcp: no listener")
    with s:
        for f in files:
            name = os.path.basename(f).encode()
            size = os.path.getsize(f)
            s.sendall(struct.pack("!H", len(name)) + name + struct.pack("!Q", size))
            with open(f, "rb") as fd:
                s.sendfile(fd)
        s.sendall(struct.pack("!H", 0))


def recv_exact(c, n, into=None):
    buf = bytearray(n) if into is None else into
    view, got = memoryview(buf), 0
    while got < n:
        r = c.recv_into(view[got:], n - got)
        if r == 0:
            sys.exit("stage_tcp: the sender closed early")
        got += r
    return buf


def receive(port, out, digest):
    os.makedirs(out, exist_ok=True)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", port))
    ls.listen(1)
    c, _ = ls.accept()
    total, t0 = 0, time.monotonic()
    chunk = bytearray(4 << 20)
    with c:
        while True:
            (n,) = struct.unpack("!H", recv_exact(c, 2))
            if n == 0:
                break
            name = recv_exact(c, n).decode()
            (size,) = struct.unpack("!Q", recv_exact(c, 8))
            def chunks(left=size):
                while left > 0:
                    k = min(left, len(chunk))
                    recv_exact(c, k, chunk)
                    yield memoryview(chunk)[:k]
                    left -= k
            write_into(out, name, chunks(), digest)
            total += size
    t = time.monotonic() - t0
    print(f"tcp: {total} B in {t:.3f} s, {total / t / 1e6:.1f} MB/s")


def main():
    args = sys.argv[1:]
    digest = bool(args) and args[0] == "--sha256"
    if digest:
        args = args[1:]
    addr, port, out, files = args[0], int(args[1]), args[2], args[3:]
    out = out.replace("%h", socket.gethostname())
    if os.environ.get("OMPI_COMM_WORLD_RANK") == "0":
        failed = []

        def copy_or_fail():
            try:
                local_copy(out, files, digest)
            except OSError as e:
                failed.append(e)

        copy = threading.Thread(target=copy_or_fail)
        copy.start()
        send(addr, port, files)
        copy.join()
        if failed:
            sys.exit(f"stage_tcp: the local copy failed: {failed[0]}")
    else:
        receive(port, out, digest)


if __name__ == "__main__":
    main()
