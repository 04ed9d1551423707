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
HELLO, ALLGATHER, ABORT, FINI = 1, 2, 3, 4
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
    write(t, "split-header", b"\x00" + write_step(0, hello(0, 1)[:5]) +
          write_step(0, hello(0, 1)[5:]))


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
CALL, RUN, RETRUN = 0, 4, 5
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
    write(t, "unknown-kind", rec(7, b"????????"))
    write(t, "truncated", rec(CALL, b"args")[:20])


def main():
    for f in (config_yaml, config_value, launch_server, msg, gtp, game_move,
              am_batch):
        shutil.rmtree(os.path.join(CORPUS, f.__name__.replace("_", "-")),
                      ignore_errors=True)
        os.makedirs(os.path.join(CORPUS, f.__name__.replace("_", "-")))
        f()


if __name__ == "__main__":
    main()
