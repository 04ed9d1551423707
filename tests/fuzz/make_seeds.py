#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets, tests/fuzz/corpus/<target>/:
a few small valid and invalid inputs each, in the layout each target reads
(see the comment at the top of its fuzz_<target>.c). The files are
committed; run this again after changing a target's input layout.

    tests/fuzz/make_seeds.py
"""
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def fnv1a(name):
    """rv_handler_id: FNV-1a of the name, 0 never."""
    h = 2166136261
    for b in name.encode():
        h ^= b
        h = (h * 16777619) & 0xFFFFFFFF
    return h or 1


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def config_yaml():
    t = "config-yaml"
    for cfg in ("pingpong-shm.yaml", "offload.yaml", "mcts.yaml", "store.yaml"):
        shutil.copy(os.path.join(TOP, "configs", cfg),
                    os.path.join(CORPUS, t, cfg))
    write(t, "empty.yaml", "")
    write(t, "null.yaml", "~\n")
    write(t, "sections.yaml",
          "job:\n  threads: 2\n  stats: json\nmemory:\nam:\n  path: write\n")
    write(t, "duplicate.yaml", "job:\n  threads: 1\n  threads: 2\n")
    write(t, "dotted.yaml", "job.threads: 2\n")
    write(t, "two-docs.yaml", "job:\n  threads: 1\n---\njob:\n  threads: 2\n")
    write(t, "bad-value.yaml", "job:\n  threads: many\n")
    write(t, "unknown.yaml", "jobs:\n  thread: 2\n")
    write(t, "sequence.yaml", "job: [1, 2]\n")
    write(t, "alias.yaml", "job: &j\n  threads: 2\nam: *j\n")
    write(t, "quoted-nul.yaml", 'transport:\n  name: "u\\0cx"\n')
    write(t, "plugin.yaml", "transport:\n  nosuch:\n    key: 1\n")
    write(t, "tab.yaml", "job:\n\tthreads: 2\n")
    write(t, "bad-utf8.yaml", b"job:\n  placement: \xff\xfe\n")


def config_value():
    t = "config-value"
    # Even first byte: rv_config_parse_size.
    for i, text in enumerate(("4096", "4KiB", "2 MiB", "1g", "15EiB",
                              "16EiB", "-1", "0x10", "18446744073709551615",
                              "4 XB", "")):
        write(t, "size-%02d" % i, b"\x00" + text.encode())
    # Odd first byte: a row (the next two bytes), bit 1 a YAML null.
    for row in range(0, 40, 8):
        for j, text in enumerate((b"1", b"yes", b"4KiB", b"a\x00b")):
            write(t, "row%02d-%d" % (row, j),
                  b"\x01" + struct.pack("<H", row) + text)
    write(t, "row-null", b"\x03" + struct.pack("<H", 0))


# Frames of rv_launch_proto.h: [u32 type][u32 rank][u64 len] then the payload.
HELLO, ALLGATHER, ABORT, FINI, BEAT = 1, 2, 3, 4, 5
TOKEN = b"rivet-fuzz-token"


def frame(kind, rank, payload=b"", length=None):
    n = len(payload) if length is None else length
    return struct.pack("<IIQ", kind, rank, n) + payload


def hello(rank, size, token=TOKEN):
    return frame(HELLO, rank, struct.pack("<IIQ", size, 0, 4242) + token)


def launch_server():
    """A job size byte, then steps: [op][u16 len][bytes] writes on peer
    op >> 2; op & 3 == 1 closes it, == 2 is rank op >> 2 exiting."""
    t = "launch-server"

    def write_step(peer, data):
        return bytes([peer << 2]) + struct.pack("<H", len(data)) + data

    def close_step(peer):
        return bytes([peer << 2 | 1])

    def exit_step(rank):
        return bytes([rank << 2 | 2])

    size2 = b"\x01"
    join = write_step(0, hello(0, 2)) + write_step(1, hello(1, 2))
    write(t, "hello", size2 + join)
    write(t, "barrier", size2 + join + write_step(0, frame(ALLGATHER, 0)) +
          write_step(1, frame(ALLGATHER, 1)))
    write(t, "allgather", size2 + join +
          write_step(0, frame(ALLGATHER, 0, b"abcdefgh")) +
          write_step(1, frame(ALLGATHER, 1, b"ijkl")[:20]) +
          write_step(1, b"mnop"))
    write(t, "fini-rejoin", size2 + join + write_step(0, frame(FINI, 0)) +
          close_step(0) + write_step(0, hello(0, 2)))
    write(t, "abort", size2 + join +
          write_step(1, frame(ABORT, 1, struct.pack("<iI", 3, 0) + b"why")))
    write(t, "abort-lies", size2 + join +
          write_step(1, frame(ABORT, 1, struct.pack("<iI", 3, 0),
                              length=1 << 40)))
    write(t, "allgather-lies", size2 + join +
          write_step(0, frame(ALLGATHER, 0, b"", length=1 << 26)) +
          write_step(1, frame(ALLGATHER, 1, b"xy", length=2)))
    write(t, "wrong-token", size2 + write_step(0, hello(0, 2, b"\0" * 16)))
    write(t, "wrong-rank", size2 + join + write_step(0, frame(FINI, 1)))
    write(t, "before-hello", size2 + write_step(0, frame(ALLGATHER, 0)))
    write(t, "exit-in-round", size2 + join +
          write_step(0, frame(ALLGATHER, 0, b"ab")) + exit_step(1))
    write(t, "beat", size2 + join + write_step(0, frame(BEAT, 0)) +
          write_step(1, frame(BEAT, 1, b"x")))
    write(t, "split-header", b"\x00" + write_step(0, hello(0, 1)[:5]) +
          write_step(0, hello(0, 1)[5:]))


def launch_rank():
    """A count of collectives (low 3 bits), a contribution length each,
    then what rivetrun sends the rank."""
    t = "launch-rank"
    L = 0xFFFFFFFF
    ok = frame(HELLO, L)
    write(t, "hello", b"\x00" + ok)
    write(t, "refused", b"\x00")
    write(t, "barrier", b"\x01\x00" + ok + frame(ALLGATHER, L))
    write(t, "allgather", b"\x02\x04\x00" + ok +
          frame(ALLGATHER, L, b"aaaabbbb") + frame(ALLGATHER, L))
    write(t, "allgather-short", b"\x01\x04" + ok +
          frame(ALLGATHER, L, b"aaaab", length=8))
    write(t, "allgather-lies", b"\x01\x04" + ok +
          frame(ALLGATHER, L, b"", length=1 << 40))
    write(t, "wrong-type", b"\x01\x00" + ok + frame(FINI, L))
    write(t, "hello-payload", b"\x00" + frame(HELLO, L, b"xyz"))
    write(t, "split", b"\x01\x02" + ok + frame(ALLGATHER, L, b"abcd")[:7])


# Core's message header: [u32 handler][u32 len], then up to 48 bytes of
# extension.
def msg():
    """A flags byte (bit 0 persistent, bit 1 deferrable, bits 2-3 the
    worker, bits 4-6 the sender), the header's length, the header, the
    payload."""
    t = "msg"

    def m(flags, handler, payload=b"", xhdr=b"", length=None):
        n = len(payload) if length is None else length
        hdr = struct.pack("<II", fnv1a(handler) if isinstance(handler, str)
                          else handler, n) + xhdr
        return bytes([flags, len(hdr)]) + hdr + payload

    epoch = struct.pack("<Q", 1)
    write(t, "barrier", m(0x10, "rivet.barrier", epoch))
    write(t, "barrier-release", m(0x14, "rivet.barrier_release", epoch))
    write(t, "barrier-release-short", m(0x14, "rivet.barrier_release"))
    up = struct.pack("<QIIIIII", 1, 0, 0, 0, 8, 1, 1)
    write(t, "coll-up", m(0x10, "rivet.coll.up", b"\x01" * 8, up))
    # A reduce header naming 2 MiB (more than any collective) on 8 bytes.
    big = struct.pack("<QIIIIII", 1, 0, 0, 0, 2 << 20, 1, 1)
    write(t, "coll-up-lies", m(0x10, "rivet.coll.up", b"\x01" * 8, big))
    write(t, "coll-down", m(0x10, "rivet.coll.down", b"", epoch))
    write(t, "keep", m(0x01, "fuzz.keep", b"kept payload"))
    write(t, "keep-copied", m(0x00, "fuzz.keep", b"copied payload"))
    write(t, "inline-deferred", m(0x02, "fuzz.inline", b"inline", b"x" * 8))
    write(t, "keep-deferred", m(0x03, "fuzz.keep", b"later"))
    write(t, "len-lies", m(0x00, "fuzz.keep", b"short", length=1 << 20))
    write(t, "unknown-handler", m(0x00, 0x12345678, b"?"))
    write(t, "short-header", bytes([0, 3]) + b"abc")
    # bit 7: the worker's first collective has returned.
    write(t, "coll-down-late", m(0x94, "rivet.coll.down", b"R" * 8, epoch))


def gtp():
    """The first byte: bit 0 tic-tac-toe, the rest the Hex board's size."""
    t = "gtp"
    hex11 = bytes([(11 - 2) << 1])
    write(t, "session", hex11 + open(os.path.join(
        TOP, "tests", "mcts", "gtp-session.txt"), "rb").read())
    write(t, "play-genmove", hex11 + b"boardsize 5\nplay b c3\ngenmove w\n"
          b"showboard\nundo\nundo\nundo\nquit\n")
    write(t, "ids-comments", hex11 + b"1 name\n2 version # comment\n"
          b"3 known_command play\n4\nlist_commands\n10 protocol_version\n")
    write(t, "errors", hex11 + b"play x c3\nplay b z99\nboardsize 1\n"
          b"boardsize 20 20\nboardsize 4 5\nfoo\n" + b"a " * 20 + b"\n")
    write(t, "ttt", b"\x01boardsize 3\nplay b b2\nplay w a1\ngenmove b\n"
          b"showboard\n")
    write(t, "control", hex11 + b"pl\x01ay\tb\rc3\x00\nname\x7f\n")
    write(t, "long-line", hex11 + b"name " + b"x" * 5000 + b"\nname\n")
    write(t, "clock", hex11 + b"time_settings 10 5 3\ntime_left b 9 0\n"
          b"genmove b\ntime_left w 4.5 2\ngenmove w\ntime_settings 0 1 0\n"
          b"genmove b\ntime_left q 1 1\ntime_settings 1e99 0 0\n")
    write(t, "swap", hex11 + b"param_game\nparam_game allow_swap 1\n"
          b"play b f6\nplay w swap-pieces\nshowboard\nundo\ngenmove w\n"
          b"param_game allow_swap 0\nparam_game allow_swap x\n"
          b"param_game fly 1\n")


def game_move():
    """The first byte: bit 0 tic-tac-toe, the rest the Hex board's size;
    then how many random moves, a u16 choosing each, then the text."""
    t = "game-move"
    hex11 = bytes([(11 - 2) << 1])
    for i, text in enumerate((b"c3", b"k11", b"l1", b"a0", b"a01", b" b2 ",
                              b"z9", b"a99999", b"", b"3c", b"A1")):
        write(t, "hex-%02d" % i, hex11 + b"\x00" + text)
    write(t, "hex-occupied", hex11 + b"\x01" + b"\x00\x00" + b"a1")
    write(t, "hex-over", bytes([0]) + b"\x04" + b"\x00" * 8 + b"a1")
    write(t, "ttt", b"\x01\x00b2")
    write(t, "ttt-off", b"\x01\x02\x00\x00\x01\x00c4")


# am's records: am_rec_t {u32 seq, u32 handler, u32 len, u32 meta}, the
# body, pad to 8, an 8-byte footer.
CALL, RUN, RETRUN, FRUN, FRET = 0, 4, 5, 6, 7
XHDR = 1 << 8


def rec(kind, body, handler=0x1234, seq=0, alen=0, flags=0, length=None):
    n = len(body) if length is None else length
    pad = b"\0" * (-len(body) % 8)
    return struct.pack("<IIII", seq, handler, n,
                       kind | flags | alen << 16) + body + pad + b"F" * 8


def am_batch():
    """The payload of a batch: records one after another."""
    t = "am-batch"
    # am_hdr_t: args_len, flags, sync, ret, ret_len, root, token.
    hdr = struct.pack("<IIQQIIQ", 4, 1, 0x1000, 0x2000, 8, 0, 0)
    write(t, "calls", rec(CALL, b"args") + rec(CALL, b"") +
          rec(CALL, hdr + b"argsbuffer", flags=XHDR))
    write(t, "run", rec(RUN, b"a" * 8 + b"b" * 8 + b"c" * 8, alen=5))
    write(t, "retrun", rec(RETRUN, (b"s" * 8 + b"r" * 8 + b"x" * 8) * 2,
                           alen=8, seq=8))
    write(t, "mixed", rec(CALL, b"one") + rec(RUN, b"z" * 16, alen=8) +
          rec(CALL, b"two"))
    write(t, "len-lies", rec(CALL, b"args", length=1 << 20))
    write(t, "len-wraps", rec(CALL, b"", length=0xFFFFFFFF))
    write(t, "xhdr-lies", rec(CALL, struct.pack("<IIQQIIQ", 1 << 30, 0, 0, 0,
                                                0, 0, 0), flags=XHDR))
    write(t, "run-stride", rec(RUN, b"q" * 12, alen=8))
    # am.routing's records: each call led by [destination][source], u32.
    write(t, "frun", rec(FRUN, struct.pack("<II", 2, 1) + b"h" * 8 +
                         struct.pack("<II", 3, 0) + b"i" * 8, alen=8))
    write(t, "fret", rec(FRET, struct.pack("<II", 2, 1) + b"t" * 16 +
                         b"x" * 8, alen=8, seq=8))
    write(t, "frun-stride", rec(FRUN, struct.pack("<II", 2, 1) + b"q" * 12,
                                alen=8))
    write(t, "unknown-kind", rec(0x3f, b"????????"))
    write(t, "truncated", rec(CALL, b"args")[:20])


def am_ring():
    """A shape byte, am.max_nesting less one, the ring's nonce and first
    sequence number, then operations (see fuzz_am_ring.c): 0 a call, 1 a
    record of any header, 2 a batch, 3 the receiver runs, 4 bytes
    overwritten in a chunk, 5 a lie of the sender's, 6 a call over send
    awaiting its DETOUR record, 7 a DETOUR record."""
    t = "am-ring"
    go = b"\x03"

    def head(shape=0, nest=2, seq=1):
        return bytes([shape, nest]) + struct.pack("<QQ", 0x5eed5eed5eed5eed,
                                                  seq)

    def call(body, sel=0, flags=0, ret_len=0, root=0, token=0, buf=0,
             args_len=None, addr=None, hook=0):
        # addr: an envelope's offset into the exposed memory (sel bit 3)
        sel |= 0x44 if args_len is not None else 0
        sel |= 0x0c if addr is not None else 0
        s = bytes([0, sel])
        s += struct.pack("<H", len(body))
        if sel & 4:
            s += struct.pack("<HHBBH", flags, ret_len, root, token, buf)
        if addr is not None:
            s += struct.pack("<hB", addr, hook)
        s += body
        if args_len is not None:
            s += struct.pack("<I", args_len)
        return s

    def inner(meta, body, hsel=0, lie=0, length=None, seq=None):
        # seq: a record inside a batch has one (RETRUN: its result length)
        s = struct.pack("<IBBB", meta, hsel, len(body) // 8,
                        lie | (0x80 if length is not None else 0))
        if length is not None:
            s += struct.pack("<I", length)
        if seq is not None:
            s += struct.pack("<H", seq)
        return s + body

    def record(meta, body, hsel=0, lie=0, length=None):
        return b"\x01" + inner(meta, body, hsel, lie, length)

    def batch(recs, lie=0):
        return bytes([2, lie, len(recs)]) + b"".join(recs)

    def lie(what, v):
        return bytes([5, what]) + struct.pack("<I", v)

    def detour(token, args, flags=0):
        return bytes([6, token]) + struct.pack("<HH", flags, len(args)) + args

    # am_hdr_t flags: AM_NOTIFY 1, AM_RETURN 2, AM_BCAST 4.
    write(t, "calls", head() + call(b"8 bytes!") + call(b"") +
          call(b"x" * 20, sel=1) + go)
    write(t, "calls-header", head() + call(b"args", sel=4, flags=3,
                                           ret_len=8) +
          call(b"argsbuffer", sel=4, buf=6) + call(b"b", sel=4, flags=4) + go)
    write(t, "unknown-handlers", head() + call(b"none", sel=2) +
          call(b"batch", sel=3) + go)
    write(t, "args-len-lies", head() + call(b"abc", args_len=1 << 20) + go)
    write(t, "rotate-splice", head(0x05) + b"".join(
        call(bytes([i]) * 40, sel=i & 1) + (go if i % 5 == 4 else b"")
        for i in range(40)))
    write(t, "deferred-seq-wraps", head(0x4d, seq=0xfffffffe) + b"".join(
        call(bytes([i]) * 24, sel=4, flags=3, ret_len=16) +
        (go if i % 7 == 6 else b"") for i in range(48)))
    write(t, "large", head(0x30) + call(b"L" * 2000) + call(b"s" * 8) + go)
    write(t, "batch", head() + batch([
        inner(CALL, b"callargs", seq=0),
        inner(RUN | 8 << 16, b"a" * 8 + b"b" * 8, seq=0),
        inner(RETRUN | 8 << 16, (b"s" * 8 + b"r" * 8 + b"x" * 8) * 2, seq=8),
        inner(CALL | XHDR, struct.pack("<IIQQIIQ", 4, 0, 0, 0, 0, 0, 0) +
              b"argsbuf\0", lie=1, seq=0)]) + go)
    write(t, "batch-len-lies", head() + batch([
        inner(CALL, b"12345678", length=1 << 30, seq=0),
        inner(RUN | 8 << 16, b"q" * 12 + b"\0" * 4, seq=0)], lie=3) + go)
    write(t, "detour", head() + detour(5, b"over send") + call(b"before") +
          bytes([7, 5]) + call(b"after") + go)
    write(t, "detour-waits", head() + bytes([7, 9]) + call(b"behind") + go +
          detour(9, b"late") + go)
    write(t, "rotate-short", head(0x01) + record(2, b"") + call(b"x") + go)
    write(t, "rotate-splice-lies", head(0x01) +
          record(2, struct.pack("<II", 3, 0)) + go)
    write(t, "unknown-kind", head() + record(9, b"????????") + go)
    write(t, "run-outside-batch", head() + record(RUN | 8 << 16,
                                                  b"r" * 16) + go)
    write(t, "len-lies", head() + record(CALL, b"args\0\0\0\0",
                                         length=0x7FFFFFFF) + go)
    write(t, "seq-jumps", head() + call(b"one") + lie(0, 3) + call(b"two") +
          go)
    write(t, "torn", head() + call(b"torn record") +
          bytes([4, 0]) + struct.pack("<HB", 20, 4) + b"TORN" + go)
    write(t, "moves-on", head(0x01) + call(b"one") + lie(3, 0) +
          call(b"two") + go)
    # AM Long envelopes: AM_XREF 0x40, AM_XPLACE 0x80, AM_XHOOK 0x100.
    write(t, "envelope-ref", head() +
          call(b"args", sel=4, flags=0x140, ret_len=64, addr=0) +
          call(b"args", sel=4, flags=0x40, ret_len=4096, addr=0) + go)
    write(t, "envelope-place", head() +
          call(b"argsplaced", sel=4, flags=0x180, buf=6, addr=100) + go)
    write(t, "envelope-outside", head() +
          call(b"args", sel=4, flags=0x40, ret_len=64, addr=4090) +
          call(b"argsplaced", sel=4, flags=0x80, buf=6, addr=-8) +
          call(b"args", sel=4, flags=0x140, ret_len=8, addr=0, hook=7) + go)


def store_msg():
    """The objects, whether the worker subscribed to seals, the gets in
    progress, then operations (see fuzz_store_msg.c): 0 a call, 1 the
    worker's progress, 2 the home's answer to a get's lookup, 3 a seal."""
    t = "store-msg"
    (ADD, LOOKUP, FOUND, DEL, DROP, SUB, SEALED, EAGER, PIN, CHUNK,
     FIN_) = range(11)
    plain, local, remote = 0, 4, 8  # the mode's bits 2-3
    sealed, created, fetching, held = 0, 1, 2, 4

    def objects(*objs, sub=0, gets=()):
        s = bytes([len(objs)]) + b"".join(
            bytes([i, how]) + struct.pack("<HB", data, meta)
            for i, how, data, meta in objs)
        s += bytes([sub, len(gets)])
        return s + b"".join(bytes([i, wait]) for i, wait in gets)

    def call(h, src, args, mode=plain, ret=0, raw=False, flags=None):
        s = bytes([0, h, src, mode | (0 if raw else 1)]) + \
            struct.pack("<H", ret)
        s += args if not raw else bytes([len(args)]) + args
        if flags is not None:
            s += struct.pack("<I", flags)
        return s

    def oid(i):  # the harness names objects by index
        return bytes([i]) + b"\0" * 19

    def where(status, owner=0, data=0, meta=0):
        return struct.pack("<iIQQQiI", status, owner, data, meta, 0, 0, 0)

    def add(i, data, meta=0, add=1):
        return oid(i) + b"\0" * 4 + struct.pack("<QQI", data, meta, add) + \
            b"\0" * 4

    def lookup(i, token, wait):
        return oid(i) + b"\0" * 4 + struct.pack("<QI", token, wait) + \
            b"\0" * 4

    def piece(i, off, length):
        return oid(i) + b"\0" * 4 + struct.pack("<QQ", off, length)

    step = b"\x01"
    three = objects((0, sealed, 100, 8), (1, sealed, 5000, 0),
                    (2, created, 10, 0))
    write(t, "pin-chunk-fin", three +
          call(PIN, 2, oid(0), remote, 40) +
          call(CHUNK, 2, piece(0, 0, 64), remote, 64) +
          call(CHUNK, 2, piece(0, 64, 44), remote, 44) +
          call(FIN_, 2, oid(0)) + step)
    write(t, "chunk-not-pinned", three + call(CHUNK, 3, piece(1, 0, 8),
                                              remote, 8) +
          call(FIN_, 3, oid(1)) + step)
    write(t, "chunk-outside", three + call(PIN, 1, oid(1), local, 40) +
          call(CHUNK, 1, piece(1, 4990, 20), local, 20) +
          call(CHUNK, 1, piece(1, 0xFFFFFFFFFFFFFFF8, 16), local | 0x10,
               16) +
          step)
    write(t, "add-lookup-del", objects() +
          call(ADD, 3, add(3, 100)) + call(ADD, 2, add(3, 100)) +
          call(LOOKUP, 2, lookup(3, 7, 0), remote, 40) +
          call(DEL, 1, oid(3), local, 40) +
          call(LOOKUP, 2, lookup(3, 8, 1), remote, 40) +
          call(ADD, 3, add(3, 100)) + call(ADD, 3, add(3, 0, add=0)) + step)
    write(t, "lookup-waits", objects() +
          call(LOOKUP, 2, lookup(4, 1, 1), remote, 40) +
          call(LOOKUP, 3, lookup(4, 2, 1), remote, 40) +
          call(ADD, 1, add(4, 64, 8)) + step)
    write(t, "get-found", objects(gets=((5, 1), (6, 0))) +
          bytes([2, 0]) + where(1) + step +
          call(FOUND, 2, struct.pack("<Q", 1) + where(0, 2, 64)) + step)
    write(t, "get-answered", objects(gets=((5, 1),)) +
          bytes([2, 0]) + where(0, 3, 1 << 30, 8) + step)
    write(t, "eager", three + call(EAGER, 1, oid(0), local, 116) +
          call(EAGER, 2, oid(0), remote, 64) +
          call(EAGER, 2, oid(2), remote, 64) + step)
    write(t, "sub-sealed", objects(sub=1) +
          call(SUB, 2, struct.pack("<I", 3), remote, 4) +
          call(SEALED, 2, oid(4) + b"\0" * 4 + struct.pack("<QiI", 9, 1, 0)) +
          step)
    write(t, "drop", objects((0, sealed, 10, 0), (1, sealed | held, 10, 0)) +
          call(DROP, 2, oid(0)) + call(DROP, 2, oid(1)) +
          call(PIN, 2, oid(1), remote, 40) + step)
    write(t, "seal-created", three + bytes([3, 2]) +
          call(PIN, 2, oid(2), remote, 40) + step)
    write(t, "fetching", objects((4, fetching, 0, 0)) +
          call(EAGER, 2, oid(4), remote, 64) +
          call(PIN, 2, oid(4), remote, 40) + step)
    write(t, "wrong-lengths", three + b"".join(
        call(h, 2, b"\0" * n, remote, 64, raw=True)
        for h in range(11) for n in (0, 3, 21, 47)) + step)
    write(t, "short-results", three +
          call(LOOKUP, 1, lookup(0, 1, 0), local, 3) +
          call(SUB, 1, struct.pack("<I", 3), local, 3) + b"".join(
              call(h, 1, oid(0), local, 3) for h in (DEL, EAGER, PIN)) +
          step)
    write(t, "header-flags", three +
          call(PIN, 2, oid(0), 12, 40, flags=4) +
          call(ADD, 3, add(3, 10), 12, 0, flags=0x20) +
          call(DROP, 2, oid(0), 12, 0, flags=0x100 | 2 << 24) + step)
    write(t, "unknown-handler", three + call(11, 2, oid(0), remote, 8))


# The UCX plugin's RMA emulation (ucx_emu.h): emu_hdr_t is {u8 op, u8 amo,
# i16 status, u32 src, u32 region, u32 flags, u64 raddr, len, v1, v2,
# cookie}.
PUT, GET_REQ, GET_REP, AMO_REQ, AMO_REP, FLUSH_REQ, FLUSH_REP = range(1, 8)
FADD, CSWAP = 1, 2


def emu(op, src, region=0, raddr=0, length=0, amo=0, status=0, flags=0,
        v1=0, v2=0, cookie=0, payload=b"", hdr_len=None):
    h = struct.pack("<BBhIIIQQQQQ", op, amo, status, src, region, flags,
                    raddr, length, v1, v2, cookie)
    if hdr_len is not None:
        h = (h + b"\0" * hdr_len)[:hdr_len]
    return bytes([len(h)]) + h + struct.pack("<H", len(payload)) + payload


def slot(index, gen=1):
    return gen << 32 | index


def ucx_emu():
    """Messages, each [u8 header length][header][u16 length][payload]; a
    header's raddr is an offset in the harness's region h.region. The
    worker (1 of 4) awaits replies in slots 0 (get of 16 bytes, worker 0),
    1 (compare-and-swap, worker 0), 2 (fetch-add, worker 2), 3 (flush,
    worker 3), 4 (generation 2: get of 8 bytes, worker 2), 5 and 6 (the
    worker-wide flush's parts, workers 0 and 2)."""
    t = "ucx-emu"
    eight = bytes(range(8))
    write(t, "put", emu(PUT, 0, raddr=16, length=8, payload=eight))
    write(t, "put-region1", emu(PUT, 2, region=1, raddr=56, length=8,
                                payload=eight))
    write(t, "put-outside", emu(PUT, 0, raddr=252, length=8, payload=eight))
    write(t, "put-removed-region", emu(PUT, 0, region=2, length=8,
                                       payload=eight))
    write(t, "put-len-lies", emu(PUT, 0, raddr=16, length=100,
                                 payload=eight))
    write(t, "put-fenced", emu(PUT, 3, raddr=0, length=8, flags=1,
                               payload=eight))
    write(t, "get-req", emu(GET_REQ, 2, raddr=32, length=32, cookie=7))
    write(t, "get-req-outside", emu(GET_REQ, 2, region=1, raddr=60,
                                    length=8, cookie=7))
    write(t, "amo-fadd", emu(AMO_REQ, 3, amo=FADD, raddr=8, length=8, v1=5))
    write(t, "amo-cswap", emu(AMO_REQ, 0, amo=CSWAP, raddr=8, length=8,
                              v1=0x0f0e0d0c0b0a0908, v2=1))
    write(t, "amo-unaligned", emu(AMO_REQ, 0, amo=FADD, raddr=4, v1=1))
    write(t, "amo-unknown", emu(AMO_REQ, 0, amo=3, raddr=8, v1=1))
    write(t, "flush-req", emu(FLUSH_REQ, 0, cookie=77))
    write(t, "get-rep", emu(GET_REP, 0, length=16, cookie=slot(0),
                            payload=bytes(range(16))))
    write(t, "get-rep-short", emu(GET_REP, 0, length=16, cookie=slot(0),
                                  payload=eight))
    write(t, "get-rep-error", emu(GET_REP, 0, status=-2, cookie=slot(0)))
    write(t, "get-rep-gen2", emu(GET_REP, 2, length=8, cookie=slot(4, 2),
                                 payload=eight))
    write(t, "get-rep-gen1", emu(GET_REP, 3, length=8, cookie=slot(4),
                                 payload=eight))
    write(t, "get-rep-twice", emu(GET_REP, 0, cookie=slot(0),
                                  payload=bytes(16)) * 2)
    write(t, "get-rep-wrong-worker", emu(GET_REP, 1, cookie=slot(0),
                                         payload=bytes(16)))
    write(t, "get-rep-no-slot", emu(GET_REP, 0, cookie=slot(5000)))
    write(t, "amo-rep", emu(AMO_REP, 0, cookie=slot(1), v1=42) +
          emu(AMO_REP, 2, cookie=slot(2), v1=43))
    write(t, "amo-rep-wrong-kind", emu(AMO_REP, 0, cookie=slot(0)))
    write(t, "flush-rep", emu(FLUSH_REP, 3, cookie=slot(3)))
    write(t, "flush-all-reps", emu(FLUSH_REP, 0, cookie=slot(5)) +
          emu(FLUSH_REP, 2, cookie=slot(6)))
    write(t, "short-header", emu(PUT, 0, hdr_len=20))
    write(t, "long-header", emu(PUT, 0, hdr_len=64))
    write(t, "no-header", emu(PUT, 0, hdr_len=0))
    write(t, "src-not-of-job", emu(FLUSH_REQ, 9))
    write(t, "unknown-kind", emu(9, 0))
    write(t, "mixed", emu(PUT, 0, raddr=40, length=8, payload=eight) +
          emu(GET_REQ, 0, raddr=40, length=8, cookie=1) +
          emu(FLUSH_REQ, 0, cookie=2) + emu(FLUSH_REP, 3, cookie=slot(3)))


# The verbs plugin's messages (verbs_internal.h): vb_wire_t {u32 src, u8
# type, u8 hdr_len, u16 0, u32 len, u32 0}, then the header, then the
# payload (an RTS: vb_rts_t {u64 addr, u64 cookie, u32 rkey, u32 0}).
EAGER, RTS, FIN, BYE = 1, 2, 3, 4


def wire(kind, src, hdr=b"", body=b"", length=None):
    n = len(body) if length is None else length
    return struct.pack("<IBBHII", src, kind, len(hdr), 0, n, 0) + hdr + body


def rts(src, length, hdr=b"H" * 8, cookie=0x100000000, addr=0x7f0000001000):
    return wire(RTS, src, hdr, struct.pack("<QQII", addr, cookie, 0x99, 0),
                length=length)


def fin(src, cookie, hdr_len=8):
    return wire(FIN, src, struct.pack("<Q", cookie)[:hdr_len])


def step(msg, ctl=0):
    return bytes([ctl]) + struct.pack("<H", len(msg)) + msg


def verbs_recv():
    """A flags byte (bit 0 pool, bit 1 shared QPs, bit 2 inline sends, bit
    3 payloads kept), then steps [u8 ctl][u16 length][message]: ctl 1 the
    oldest rendezvous read lands, 2 it fails, 3 all land. The worker (0 of
    4) awaits FINs in slots 0 (to worker 1), 1 (2), 2 (3) and 3
    (generation 2, to worker 2)."""
    t = "verbs-recv"
    hdr = b"h" * 8
    write(t, "eager", b"\0" + step(wire(EAGER, 1, hdr, b"hello")))
    write(t, "eager-no-header", b"\0" + step(wire(EAGER, 3, b"", b"x" * 40)))
    write(t, "eager-full", b"\0" + step(wire(EAGER, 2, hdr, b"f" * 16360)))
    write(t, "eager-len-lies", b"\0" + step(wire(EAGER, 1, hdr, b"abc",
                                                   length=300)))
    write(t, "rts-lands", b"\0" + step(rts(2, 100000), ctl=1))
    write(t, "rts-fails", b"\0" + step(rts(3, 5000), ctl=2))
    write(t, "rts-pending", b"\0" + step(rts(1, 0)))
    write(t, "rts-pool-shared-kept", b"\x0f" + step(rts(2, 70000), ctl=3))
    write(t, "rts-wrong-size", b"\0" + step(rts(1, 100)[:-4], ctl=1))
    write(t, "rts-two", b"\x01" + step(rts(1, 30000)) +
          step(rts(1, 20000), ctl=3))
    write(t, "fin", b"\0" + step(fin(1, slot(0))))
    write(t, "fin-gen2", b"\0" + step(fin(2, slot(3, 2))))
    write(t, "fin-gen1", b"\0" + step(fin(1, slot(3))))
    write(t, "fin-twice", b"\0" + step(fin(3, slot(2))) * 2)
    write(t, "fin-wrong-worker", b"\0" + step(fin(3, slot(0))))
    write(t, "fin-no-slot", b"\0" + step(fin(1, slot(5000))))
    write(t, "fin-short", b"\0" + step(fin(1, slot(0), hdr_len=4)))
    write(t, "bye", b"\0" + step(wire(BYE, 1)) + step(wire(BYE, 1)))
    write(t, "unknown-type", b"\0" + step(wire(9, 1)))
    write(t, "src-not-of-job", b"\0" + step(wire(EAGER, 7)))
    write(t, "short", b"\0" + step(b"\1\0\0\0"))
    write(t, "header-too-long", b"\0" + step(wire(EAGER, 1, b"h" * 65)))
    write(t, "inline-sends", b"\x04" + step(rts(1, 10), ctl=1) +
          step(fin(1, slot(0))))


def main():
    for f in (config_yaml, config_value, launch_server, launch_rank, msg,
              gtp, game_move,
              am_batch, am_ring, store_msg, ucx_emu, verbs_recv):
        shutil.rmtree(os.path.join(CORPUS, f.__name__.replace("_", "-")),
                      ignore_errors=True)
        os.makedirs(os.path.join(CORPUS, f.__name__.replace("_", "-")))
        f()


if __name__ == "__main__":
    main()
