#!/usr/bin/env python3
"""The documentation's measured figures, generated from bench/results/*.csv.

The pages that hold measured figures are README.md, docs/benchmarks.md,
docs/testing.md and docs/guide/*.md; the script reads the files it is
given, all of those by default. Every table of measured figures in them
sits between two markers,

  <!-- bench:NAME:begin (generated from bench/results/FILE.csv by `make readme`) -->
  <!-- bench:NAME:end -->

and is written by the function TABLES[NAME] from that CSV. Without
--update this script checks each file instead:

- every marked table equals what its CSV gives now;
- every figure outside the marked tables, code blocks (inline code too)
  and the configuration reference that names a unit (µs, ms, ns, %,
  games, ×, a rate such as M/s, MB/s, GB/s or rollouts/s) has a CSV value
  behind it: the number, at the precision printed, equals a value of the
  same quantity in one of the CSVs that the figure's own paragraph names,
  such as bench/results/store.csv, or the closest paragraph before it in
  its section (of the same file) that names one (a
  time in any of µs, ms, ns; a percentage also as a fraction or a ratio;
  '64 M calls/s' also as 64,000,000). A column's quantity follows from
  its name (column_unit). Only those CSVs count, so that a figure cannot
  pass on a number that some unrelated result happens to hold: prose that
  quotes a figure names the result it comes from;
- no table that names a unit in its header sits outside the markers.

A figure that is a setting rather than a result (a timeout a test uses)
is written as code, where the check does not look.

Usage: readme-figures.py [--update] [--results DIR] [FILE...]
"""

import argparse
import bisect
import csv
import difflib
import glob
import os
import re
import sys
from decimal import ROUND_HALF_UP, Decimal

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---------------------------------------------------------------- formatting

def dec(v):
    """A CSV cell (or a computed float) as a Decimal, rounded as people
    round: half up, from the digits the CSV prints (7.795 -> 7.80)."""
    if isinstance(v, Decimal):
        return v
    return Decimal(v if isinstance(v, str) else repr(v))


def fmt_fixed(v, digits):
    return str(dec(v).quantize(Decimal(1).scaleb(-digits), ROUND_HALF_UP))


def fmt_int(v):
    """1334.0 -> '1,334'."""
    return f"{int(fmt_fixed(v, 0)):,}"


def fmt_sig(v, sig=3):
    """Three significant digits, trailing zeros kept: 70.95 -> '71.0',
    195.356 -> '195'."""
    d = dec(v)
    if d == 0:
        return "0"
    digits = max(0, sig - 1 - d.adjusted())
    s = fmt_fixed(d, digits)
    if dec(s).adjusted() > d.adjusted() and digits > 0:
        s = fmt_fixed(d, digits - 1)  # 9.996 -> '10.0', not '10.00'
    return s


def fmt_millions(v):
    """95854040 -> '95.9 M'."""
    return f"{fmt_fixed(dec(v) / 1000000, 1)} M"


def fmt_pct(fraction):
    """0.545 -> '54.5 %'."""
    return f"{fmt_fixed(dec(fraction) * 100, 1)} %"


def fmt_size(n):
    """Message sizes as the README writes them: 4096 -> '4 KiB'."""
    n = int(n)
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def fmt_ratio(v):
    """Two decimals, or three significant digits from 10 up: 121.004 ->
    '121'."""
    return fmt_fixed(v, 2) if dec(v) < 10 else fmt_sig(v)


def ratio(a, b):
    return fmt_ratio(dec(a) / dec(b))


def fmt_mb(v):
    """MB/s as whole numbers, with a decimal below 100 (3.8 stays 3.8)."""
    return fmt_int(v) if dec(v) >= 100 else fmt_sig(v, 2)


def markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------- tables
# One function per table: it reads its CSV and returns the markdown table.
# read(name) gives the CSV's rows as dicts, in file order.

def one(rows, **match):
    """The single row whose columns equal match."""
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    if len(found) != 1:
        raise SystemExit(f"readme-figures: {len(found)} rows match {match}")
    return found[0]


def table_compare_ucx(read):
    rows = read("compare-ucx.csv")
    names = {"latency_us": "latency (µs)", "msg_rate_mps": "messages (M/s)",
             "bandwidth_mbps": "bandwidth (MB/s)"}
    body = [[names.get(r["metric"], r["metric"]), r["transport"],
             fmt_size(r["size"]), r["rivet"], r["ucx"],
             fmt_ratio(r["ratio"])] for r in rows]
    return markdown(["metric", "transport", "size", "rivet", "ucp_am_*",
                     "ratio"], body)


def table_seriema_ratios(read):
    rows = read("seriema-table2-ratios.csv")
    body = [[r["transport"], f"`{r['ratio']}`", fmt_ratio(r["value"]),
             r["target"]] for r in rows]
    return markdown(["transport", "ratio", "measured", "Seriema's target"],
                    body)


def table_bale(read):
    rows = read("bale.csv")

    def rate(app, **m):
        return float(one(rows, app=app, **m)["rate_per_worker"])

    def best(app, system, workers):
        cands = [r for r in rows if r["app"] == app and
                 r["system"] == system and r["workers"] == workers]
        top = max(cands, key=lambda r: float(r["rate_per_worker"]))
        return float(top["rate_per_worker"]), top["mode"]

    body = []
    for app, label in (("histo", "histogram"), ("ig", "index-gather")):
        shm = rate(app, system="rivet", mode="send-trad", workers="2x1",
                   transport="shm")
        local, _ = best(app, "rivet", "1x2")
        tcp = rate(app, system="rivet", mode="send-trad", workers="2x1",
                   transport="tcp")
        conveyor = rate(app, system="bale", mode="Conveyor")
        top, top_mode = best(app, "bale", "2x1")
        body.append([label, fmt_millions(shm), fmt_millions(local),
                     fmt_millions(tcp), fmt_millions(conveyor),
                     f"{fmt_millions(top)} ({top_mode.lower()})",
                     f"{ratio(shm, conveyor)}, {ratio(shm, top)}"])
    return markdown(["app", "rivet shm 2×1 (send/trad)",
                     "rivet 1×2 (local bypass, best mode)", "rivet tcp 2×1",
                     "Bale conveyor", "Bale best", "rivet shm ÷ conveyor, best"],
                    body)


def table_mcts_scaling(read):
    rows = read("mcts-scaling.csv")
    uct = float(one(rows, config="uct")["rollouts_per_s"])
    single = float(one(rows, config="1x1")["rollouts_per_s"])
    body = []
    for r in rows:
        if r["config"] == "uct":
            label = "sequential UCT"
        elif r["config"] == "1x1":
            label = "1 worker"
        else:
            procs, threads = r["config"].split("x")
            label = (f"{procs} × {threads}, {r['aggregation']}, "
                     f"owner {r['owner']}")
            if r["remote_only"] == "true":
                label += ", `remote_only`"
        v = float(r["rollouts_per_s"])
        body.append([label, fmt_int(v), ratio(v, uct), ratio(v, single)])
    return markdown(["configuration (processes × threads)", "rollouts/s",
                     "÷ sequential UCT", "÷ 1 worker"], body)


def table_mcts_playouts(read):
    """The game's playout alone, on one core."""
    rows = read("mcts-playouts.csv")
    body = [[f"{r['size']}x{r['size']}", fmt_int(r["playouts"]),
             fmt_int(r["playouts_per_s"])]
            for r in rows]
    return markdown(["board", "playouts timed", "playouts/s"], body)


def table_mcts_strength(read):
    rows = read("mcts-strength.csv")
    body = []
    for r in rows:
        mode = r["mode"].replace("_", " ")
        body.append([mode,
                     f"{fmt_sig(r['ms_distributed'])} vs "
                     f"{fmt_sig(r['ms_uct'])} ms",
                     f"{fmt_int(r['rollouts_distributed'])} vs "
                     f"{fmt_int(r['rollouts_uct'])}",
                     f"{fmt_pct(r['win_rate'])} of {fmt_int(r['games'])}",
                     f"{fmt_pct(r['ci_low'])[:-2]}–{fmt_pct(r['ci_high'])}"])
    return markdown(["mode", "per move", "rollouts (distributed vs UCT)",
                     "distributed won", "95 % interval"], body)


def store_row(rows, system, transport, op, size):
    return one(rows, system=system, transport=transport, op=op,
               size=str(size))


def store_sizes(rows, transport):
    return sorted({int(r["size"]) for r in rows
                   if r["op"] == "fetch" and r["transport"] == transport})


def table_store_fetch_tcp(read):
    """A fetch over tcp beside the transport it runs on (a request and a
    reply of ucp_am_lat) and beside Redis and sockets as their users run
    them: latencies in µs, medians."""
    rows = read("store.csv")
    body = []
    for size in store_sizes(rows, "tcp"):
        def lat(system):
            return store_row(rows, system, "tcp", "fetch", size)["latency_us"]
        ours = store_row(rows, "rivet-hybrid", "tcp", "fetch", size)
        redis = lat("redis-bench-P1")
        body.append([fmt_size(size), fmt_sig(ours["latency_us"]),
                     fmt_sig(lat("ucx-am-lat")),
                     fmt_ratio(ours["store_over_raw"]), fmt_sig(redis),
                     ratio(redis, ours["latency_us"]),
                     fmt_sig(lat("redis-bench-P16")),
                     fmt_sig(lat("redis-hiredis")),
                     fmt_sig(lat("socket-busypoll")),
                     fmt_sig(lat("socket-blocking"))])
    return markdown(["size", "rivet (hybrid)", "UCX AM request + reply",
                     "`store_over_raw`", "redis-benchmark GET",
                     "Redis ÷ rivet", "redis-benchmark `-P 16` (per GET)",
                     "hiredis GET", "socket, busy-polling",
                     "socket, blocking"], body)


def table_store_fetch_shm(read):
    """A fetch over shm beside ucp_get (one get at a time) and memcpy."""
    rows = read("store.csv")
    body = []
    for size in store_sizes(rows, "shm"):
        def lat(system):
            return store_row(rows, system, "shm", "fetch", size)["latency_us"]
        ours = store_row(rows, "rivet-hybrid", "shm", "fetch", size)
        body.append([fmt_size(size), fmt_sig(ours["latency_us"]),
                     fmt_sig(lat("rivet-rndv")), fmt_sig(lat("rivet-eager")),
                     fmt_sig(lat("ucx-get")),
                     fmt_ratio(ours["store_over_raw"]), fmt_sig(lat("memcpy")),
                     ratio(lat("memcpy"), ours["latency_us"])])
    return markdown(["size", "rivet (hybrid)", "rendezvous only",
                     "eager only", "UCX get", "`store_over_raw`", "memcpy",
                     "memcpy ÷ rivet"], body)


def table_store_local(read):
    """Local operations beside an in-process uthash table and memcpy."""
    rows = read("store.csv")
    sizes = sorted({int(r["size"]) for r in rows if r["op"] == "put"
                    and r["system"] == "uthash"})
    body = []
    for size in sizes:
        cells = [fmt_size(size)]
        for op in ("put", "get", "delete"):
            ours = store_row(rows, "rivet-hybrid", "local", op, size)
            base = store_row(rows, "uthash", "local", op, size)
            cells += [fmt_sig(ours["latency_us"]), fmt_sig(base["latency_us"]),
                      fmt_ratio(ours["store_over_raw"])]
        body.append(cells)
    return markdown(["size", "put", "uthash put", "÷", "get", "uthash get",
                     "÷", "delete", "uthash delete", "÷"], body)


# The columns of both AM Long tables, after the first.
AMLONG_COLUMNS = ["rivet shm", "GASNet-EX smp", "ratio", "rivet tcp",
                  "GASNet-EX udp", "ratio"]


def amlong_cells(row, ours, theirs, ratio_col):
    """rivet, GASNet-EX and their ratio, '–' where GASNet-EX has none."""
    if not row[theirs]:
        return [fmt_sig(row[ours]), "–", "–"]
    return [fmt_sig(row[ours]), fmt_sig(row[theirs]),
            fmt_fixed(row[ratio_col], 2)]


AMLONG_RTT_SIZES = (8, 64, 512, 4096, 16384, 32768, 65536, 262144, 1 << 20)


def table_amlong_pingpong(read):
    rows = [r for r in read("amlong-pingpong-by-state.csv")
            if r["state"] == "slow" and r["protocol"] == "reassembly"]
    body = []
    for size in AMLONG_RTT_SIZES:
        cells = [fmt_size(size)]
        for transport in ("shm", "tcp"):
            r = one(rows, transport=transport, size=str(size))
            if transport == "tcp" and not r["gasnet_rtt_us"] and size == 65536:
                # udp carries at most 65000 B per AM Long: its nearest size.
                r = one(rows, transport=transport, size="65000")
                c = amlong_cells(r, "rtt_us", "gasnet_rtt_us",
                                 "rtt_ratio_rivet_over_gasnet")
                cells += [c[0] + " (65000 B)", c[1] + " (65000 B)", c[2]]
                continue
            cells += amlong_cells(r, "rtt_us", "gasnet_rtt_us",
                                  "rtt_ratio_rivet_over_gasnet")
        body.append(cells)
    return markdown(["round trip (µs)"] + AMLONG_COLUMNS, body)


def table_amlong_injection(read):
    rows = [r for r in read("amlong-injection-by-state.csv")
            if r["state"] == "slow" and r["protocol"] == "reassembly"]
    body = []
    for size in (4096, 32768, 65536, 1 << 20):
        for depth in (1, 256):
            cells = [f"{fmt_size(size)}, d = {depth}"]
            for transport in ("shm", "tcp"):
                r = one(rows, transport=transport, size=str(size),
                        depth=str(depth))
                cells += amlong_cells(r, "inject_us", "gasnet_inject_us",
                                      "inject_ratio_rivet_over_gasnet")
            body.append(cells)
    return markdown(["injection (µs)"] + AMLONG_COLUMNS, body)


def table_verbs_bw(read):
    rows = read("verbs-bw.csv")
    modes = ("all_signaled", "manual", "automatic", "ib_send_bw",
             "ib_write_bw")
    sizes = sorted({int(r["size"]) for r in rows})
    body = []
    for size in sizes:
        v = {m: float(one(rows, mode=m, size=str(size))["msgs_per_s"])
             for m in modes}
        body.append([fmt_size(size)] + [fmt_int(v[m]) for m in modes] +
                    [ratio(v["automatic"], v["manual"]),
                     ratio(v["all_signaled"], v["manual"])])
    return markdown(["size"] + [f"`{m}`" for m in modes] +
                    ["automatic ÷ manual", "all signaled ÷ manual"], body)


def table_verbs_rndv(read):
    rows = read("verbs-rndv.csv")
    sizes = sorted({int(r["size"]) for r in rows})
    body = []
    for window in ("1", "8"):
        for size in sizes:
            v = {p: float(one(rows, protocol=p, size=str(size),
                              window=window)["mb_per_s"])
                 for p in ("read", "write_imm", "rivet")}
            body.append([fmt_size(size), window] +
                        [fmt_fixed(v[p], 1) for p in v] +
                        [ratio(v["write_imm"], v["read"]),
                         ratio(v["rivet"], v["read"])])
    return markdown(["size", "in flight", "read (MB/s)", "write_imm (MB/s)",
                     "rivet (MB/s)", "write_imm ÷ read", "rivet ÷ read"],
                    body)


def table_rma_bw(read):
    """The ratio is the CSV's: the median of each repetition's ratio."""
    rows = read("rma-bw.csv")
    body = [[r["op"], r["transport"], fmt_size(r["size"]),
             fmt_mb(r["rivet_mb_per_s"]), fmt_mb(r["ucx_mb_per_s"]),
             fmt_ratio(r["ratio"])] for r in rows]
    return markdown(["op", "transport", "size", "rivet (MB/s)",
                     "UCX (MB/s)", "rivet ÷ UCX"], body)


# name -> (CSV the table is generated from, function)
def table_routing(read):
    """am.routing across two hosts: batch memory and rates, each routing
    beside direct at the same size."""
    rows = read("routing.csv")
    body = []
    for r in rows:
        workers = int(r["processes"]) * int(r["threads"])
        d = one(rows, routing="direct", processes=r["processes"],
                threads=r["threads"])
        body.append([r["routing"], f"{workers} ({r['processes']} × "
                     f"{r['threads']})", fmt_sig(r["dest_buffers_per_worker"]),
                     fmt_int(float(r["buffer_bytes_per_worker"]) / 1024),
                     ratio(r["buffer_bytes_per_worker"],
                           d["buffer_bytes_per_worker"]),
                     fmt_int(float(r["rss_kib"])),
                     fmt_millions(r["histo_rate_per_worker"]),
                     fmt_millions(r["ig_rate_per_worker"]),
                     r["machine_state"]])
    return markdown(["routing", "workers", "batch destinations per worker",
                     "batch buffers per worker (KiB)", "÷ direct",
                     "RSS per process (KiB)", "histogram (updates/s/worker)",
                     "index-gather (requests/s/worker)", "machine"], body)


def table_routing_model(read):
    rows = read("routing-model.csv")
    body = [[r["routing"], fmt_int(float(r["dest_buffers_per_worker"])),
             fmt_int(float(r["bytes_per_dest_buffer"]) / 1024),
             fmt_int(float(r["buffer_mib_per_worker"])),
             fmt_sig(r["tables_mib_per_worker"], 2)] for r in rows]
    return markdown(["routing", "batch destinations per worker",
                     "KiB per destination (measured)",
                     "batch buffers per worker (MiB)",
                     "per-worker tables (MiB)"], body)


TABLES = {
    "routing": ("routing.csv", table_routing),
    "routing-model": ("routing-model.csv", table_routing_model),
    "compare-ucx": ("compare-ucx.csv", table_compare_ucx),
    "seriema-table2": ("seriema-table2-ratios.csv", table_seriema_ratios),
    "bale": ("bale.csv", table_bale),
    "mcts-scaling": ("mcts-scaling.csv", table_mcts_scaling),
    "mcts-strength": ("mcts-strength.csv", table_mcts_strength),
    "mcts-playouts": ("mcts-playouts.csv", table_mcts_playouts),
    "store-fetch-tcp": ("store.csv", table_store_fetch_tcp),
    "store-fetch-shm": ("store.csv", table_store_fetch_shm),
    "store-local": ("store.csv", table_store_local),
    "amlong-pingpong": ("amlong-pingpong-by-state.csv",
                        table_amlong_pingpong),
    "amlong-injection": ("amlong-injection-by-state.csv",
                         table_amlong_injection),
    "verbs-bw": ("verbs-bw.csv", table_verbs_bw),
    "verbs-rndv": ("verbs-rndv.csv", table_verbs_rndv),
    "rma-bw": ("rma-bw.csv", table_rma_bw),
}


# ------------------------------------------------------------ marked tables

BEGIN = re.compile(r"<!-- bench:([a-z0-9-]+):begin\b")


def begin_line(name):
    return (f"<!-- bench:{name}:begin (generated from bench/results/"
            f"{TABLES[name][0]} by `make readme`) -->")


def end_line(name):
    return f"<!-- bench:{name}:end -->"


def regenerate(lines, read, path="README.md"):
    """The file's lines with every marked table written from its CSV."""
    out, i = [], 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        name = m.group(1)
        if name not in TABLES:
            raise SystemExit(f"{path} line {i + 1}: unknown table '{name}'")
        try:
            j = lines.index(end_line(name), i + 1)
        except ValueError:
            raise SystemExit(f"{path} line {i + 1}: no {end_line(name)}")
        out += [begin_line(name)] + TABLES[name][1](read).split("\n")
        out.append(end_line(name))
        i = j + 1
    return out


# ------------------------------------------------------------ prose figures

NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# A unit: a time, %, games, × (a ratio; '2×1' is a job shape), or a rate,
# with its scale ('64 M calls/s', 'M/s', 'MB/s', 'GB/s').
UNIT = (r"(?P<unit>[µμ]s\b|us\b|ms\b|ns\b|%|games?\b|×(?!\s*\d)"
        r"|(?P<scale>[kKMG])?(?P<bytes>B)?/s\b"
        r"|(?P<wscale>[kKMG])?\s*[A-Za-z]+/s\b)")
FIGURE = re.compile(rf"(?<![\w.,])(?P<a>{NUM})"
                    rf"(?:\s*[–-]\s*(?P<b>{NUM}))?\s*{UNIT}")
SCALE = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}
TIME = {"µs": 1e-6, "μs": 1e-6, "us": 1e-6, "ms": 1e-3, "ns": 1e-9}
UNIT_IN_HEADER = re.compile(r"[µμ]s\b|\bms\b|\bns\b|%|/s\b")

# What a CSV column measures, as (quantity, factor to the base unit), by
# its name: times in seconds, bandwidths in B/s, rates in 1/s. A figure is
# only compared with columns of its own quantity, so that a percentage
# does not find its number among latencies. Columns named here are those
# whose names say nothing; the rest follow column_unit's rules.
COLUMN_UNITS = {
    "win_rate": ("fraction", 1), "ci_low": ("fraction", 1),
    "ci_high": ("fraction", 1), "games": ("games", 1),
    "distributed_wins": ("games", 1), "rate_per_worker": ("rate", 1),
}
# In a long-format CSV (a column 'metric' names what a row measures), the
# columns that hold the measured values.
METRIC_VALUE_COLUMNS = ("value", "rivet", "ucx")


def column_unit(name):
    """(quantity, factor) of a column or metric name, or None."""
    if name in COLUMN_UNITS:
        return COLUMN_UNITS[name]
    if "ratio" in name or "_over_" in name:
        return ("ratio", 1)
    if name.endswith("_pct") or "_pct_per_" in name:
        return ("fraction", 0.01)  # soak.sh's slopes: percent per 10 min
    if "mb_per_s" in name or name.endswith("_mbps"):
        return ("bandwidth", 1e6)
    if name.endswith("_mps") or name.endswith("_mops"):
        return ("rate", 1e6)
    if name.endswith("_per_s") or name.endswith("_rate_per_worker"):
        return ("rate", 1)
    for suffix, factor in (("_us", 1e-6), ("_ns", 1e-9), ("_ms", 1e-3)):
        if name.endswith(suffix):
            return ("time", factor)
    if name.startswith("ms_"):
        return ("time", 1e-3)
    return None


def csv_values(results, names=None):
    """quantity -> sorted values in base units, from the CSVs of results
    (those whose file names are in names, when names is given).
    Every repetition's file (*-runs.csv) is left out: a figure quotes a
    median, which the summary CSV beside it holds. In a CSV with a metric
    column (long format), a row's values measure that metric; a column
    'value' beside a column 'ratio' of names holds ratios."""
    values = {}
    for path in glob.glob(os.path.join(results, "*.csv")):
        if path.endswith("-runs.csv"):
            continue
        if names is not None and os.path.basename(path) not in names:
            continue
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                for name, cell in row.items():
                    try:
                        v = float(cell)
                    except (TypeError, ValueError):
                        continue
                    unit = column_unit(name)
                    if "metric" in row and name in METRIC_VALUE_COLUMNS \
                            and unit is None:
                        unit = column_unit(row["metric"])
                    if name == "value" and "ratio" in row:
                        unit = ("ratio", 1)
                    if unit:
                        values.setdefault(unit[0], []).append(v * unit[1])
    for v in values.values():
        v.sort()
    return values


def figure_candidates(unit, scale, is_bytes):
    """(quantity, factor) pairs a figure with this unit may be."""
    if unit in TIME:
        return [("time", TIME[unit])]
    if unit == "%":
        return [("fraction", 0.01), ("ratio", 0.01)]
    if unit.startswith("game"):
        return [("games", 1)]
    if unit == "×":
        return [("ratio", 1)]
    return [("bandwidth" if is_bytes else "rate", SCALE[scale or ""])]


def backed(text, candidates, values):
    """Whether the printed number text has a CSV value behind it."""
    x = float(text.replace(",", ""))
    decimals = len(text.split(".")[1]) if "." in text else 0
    half = 0.5 * 10 ** -decimals
    for quantity, factor in candidates:
        pool = values.get(quantity, [])
        lo, hi = (x - half) * factor, (x + half) * factor
        lo, hi = lo - 1e-9 * abs(lo), hi + 1e-9 * abs(hi)
        i = bisect.bisect_left(pool, lo)
        if i < len(pool) and pool[i] <= hi:
            return True
    return False


def scannable(lines):
    """The file's lines with what the prose check skips blanked out: code
    blocks, marked tables, the configuration reference, inline code and
    HTML comments. Inline code becomes '_' so that it separates a number
    from a unit; line breaks stay, so offsets give line numbers."""
    out, skip_until = [], None
    for line in lines:
        if skip_until is not None:
            if line.startswith(skip_until):
                skip_until = None
            out.append("")
            continue
        if line.startswith("```"):
            skip_until = "```"
        elif BEGIN.match(line):
            skip_until = end_line(BEGIN.match(line).group(1))
        elif line.startswith("<!-- config-reference:begin"):
            skip_until = "<!-- config-reference:end -->"
        if skip_until is not None:
            out.append("")
            continue
        line = re.sub(r"`[^`]*`", lambda m: "_" * len(m.group(0)), line)
        out.append(re.sub(r"<!--.*?-->", "", line))
    return out


CSV_NAME = re.compile(r"[\w.-]+\.csv\b")


def section_csvs(lines):
    """For each line, the CSV file names that back its figures: those its
    paragraph names, or, where it names none, those of the closest
    paragraph before it in the same section that names one (a paragraph
    may discuss the table or result just above it). Paragraphs end at
    blank lines, sections at headings; marked tables and code blocks
    count as paragraphs of their own."""
    out, names = [None] * len(lines), frozenset()
    start = 0
    while start < len(lines):
        end = start
        while end < len(lines) and lines[end].strip() and \
                not (end > start and lines[end].startswith("#")):
            end += 1
        end = max(end, start + 1)
        if lines[start].startswith("#"):
            names = frozenset()
        own = frozenset(CSV_NAME.findall("\n".join(lines[start:end])))
        names = own or names
        out[start:end] = [names] * (end - start)
        start = end
    return out


def unbacked_figures(lines, results):
    """(line number, figure) for each figure in prose with no value in
    the CSVs that section_csvs gives its line."""
    text = "\n".join(scannable(lines))
    names, pools, bad = section_csvs(lines), {}, []
    for m in FIGURE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        csvs = names[line - 1]
        if csvs not in pools:
            pools[csvs] = csv_values(results, csvs)
        candidates = figure_candidates(
            m.group("unit"), m.group("scale") or m.group("wscale"),
            m.group("bytes") is not None)
        for num in (m.group("a"), m.group("b")):
            if num and not backed(num, candidates, pools[csvs]):
                bad.append((line, m.group(0).replace("\n", " ")))
                break
    return bad


def unmarked_tables(lines):
    """Line numbers of table headers outside the markers naming a unit."""
    scan = scannable(lines)
    return [i + 1 for i, line in enumerate(scan)
            if line.startswith("|") and i + 1 < len(scan)
            and scan[i + 1].startswith("|---")
            and UNIT_IN_HEADER.search(line)]


# --------------------------------------------------------------------- main

def default_files():
    """Every page that may hold measured figures."""
    return ([os.path.join(ROOT, "README.md"),
             os.path.join(ROOT, "docs", "benchmarks.md"),
             os.path.join(ROOT, "docs", "testing.md")] +
            sorted(glob.glob(os.path.join(ROOT, "docs", "guide", "*.md"))))


def check(path, lines, generated, results):
    """Prints what is wrong with one file; returns whether anything is."""
    failed = False
    if generated != lines:
        sys.stdout.writelines(difflib.unified_diff(
            [l + "\n" for l in lines], [l + "\n" for l in generated],
            path, f"{path} as bench/results/*.csv give it"))
        print(f"{path}'s measured tables differ from their CSVs: "
              "run make readme")
        failed = True
    for line, figure in unbacked_figures(lines, results):
        print(f"{path}:{line}: '{figure}' has no value behind it in "
              f"the bench/results CSVs its paragraph names (name the CSV it "
              f"comes from, move it into a generated table or remove "
              f"it)\n  {lines[line - 1]}")
        failed = True
    for line in unmarked_tables(lines):
        print(f"{path}:{line}: a table of measured figures outside "
              f"<!-- bench:NAME:begin/end --> markers\n  {lines[line - 1]}")
        failed = True
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", metavar="FILE",
                    help="the pages to check or update (default: README.md, "
                         "docs/benchmarks.md, docs/testing.md, "
                         "docs/guide/*.md)")
    ap.add_argument("--update", action="store_true",
                    help="rewrite the marked tables instead of checking")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench",
                                                      "results"))
    args = ap.parse_args()

    def read(name):
        with open(os.path.join(args.results, name), newline="") as f:
            return list(csv.DictReader(f))

    failed = False
    for path in args.files or default_files():
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        generated = regenerate(lines, read, path)
        if args.update:
            if generated != lines:
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n".join(generated))
                print(f"updated {path}")
            else:
                print(f"{path}: up to date")
            continue
        failed = check(path, lines, generated, args.results) or failed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
