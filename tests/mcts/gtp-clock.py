#!/usr/bin/env python3
"""Plays rivet-mcts against itself at a clock through GTP, as a tournament
manager (gogui-twogtp) drives an engine: time_settings once, then
genmove for each side in turn until the game ends, each side's clock kept
here by Canadian byo-yomi rules and, with --time-left, told to the engine
before each of its moves. Fails if a move came after its side's time ran
out, or if a side used less than a quarter of its main time (a clock the
engine ignored).

  gtp-clock.py [--size N] [--settings MAIN,BYO,STONES] [--time-left]
               -- COMMAND...
"""
import argparse
import subprocess
import sys
import time


class Clock:
    def __init__(self, main, byo, stones):
        self.main, self.byo, self.byo_stones = main, byo, stones
        self.left, self.stones = main, 0
        if main <= 0 and byo > 0:
            self.left, self.stones = byo, stones
        self.used = 0.0

    def spend(self, t):
        """Runs the clock down by t; False if it ran out."""
        self.used += t
        self.left -= t
        if self.stones == 0:
            if self.left >= 0:
                return True
            if self.byo <= 0:
                return False
            self.left += self.byo
            self.stones = self.byo_stones
        if self.left < 0:
            return False
        self.stones -= 1
        if self.stones == 0:
            self.left, self.stones = self.byo, self.byo_stones
        return True


def ask(engine, cmd):
    engine.stdin.write(cmd + "\n")
    engine.stdin.flush()
    lines = []
    while True:
        line = engine.stdout.readline()
        if line == "":
            sys.exit(f"gtp-clock: the engine ended during '{cmd}'")
        if line == "\n" and lines:
            break
        lines.append(line.rstrip("\n"))
    answer = "\n".join(lines)
    if not answer.startswith("="):
        sys.exit(f"gtp-clock: '{cmd}' failed: {answer}")
    return answer[1:].strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=5)
    ap.add_argument("--settings", default="3,0,0")
    ap.add_argument("--time-left", action="store_true")
    ap.add_argument("command", nargs="+")
    a = ap.parse_args()
    a.settings = a.settings.replace(",", " ")
    main_s, byo_s, stones = (float(x) for x in a.settings.split())
    clocks = {c: Clock(main_s, byo_s, int(stones)) for c in "bw"}
    engine = subprocess.Popen(a.command, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    ask(engine, f"boardsize {a.size}")
    ask(engine, f"time_settings {a.settings}")
    side, moves, worst = "b", [], 0.0
    while True:
        k = clocks[side]
        if a.time_left:
            ask(engine, f"time_left {side} {k.left:.3f} {k.stones}")
        before = k.left + (k.byo if k.stones == 0 else 0)
        t0 = time.monotonic()
        move = ask(engine, f"genmove {side}")
        t = time.monotonic() - t0
        worst = max(worst, t / before if before > 0 else float("inf"))
        if not k.spend(t):
            sys.exit(f"gtp-clock: {side}'s move {len(moves) // 2 + 1} "
                     f"({move}) took {t:.3f} s with {before:.3f} s left "
                     f"to it ({a.settings}): it lost on time")
        if move in ("resign", "pass"):
            break
        moves.append(move)
        side = "w" if side == "b" else "b"
        if len(moves) > a.size * a.size:
            sys.exit("gtp-clock: more moves than cells")
    ask(engine, "quit")
    engine.wait()
    for c, k in clocks.items():
        if main_s > 0 and k.used < 0.25 * main_s:
            sys.exit(f"gtp-clock: {c} used {k.used:.3f} s of its "
                     f"{main_s:g} s: the engine did not play to its clock")
    print(f"gtp-clock: {len(moves)} moves at '{a.settings}'"
          f"{' with time_left' if a.time_left else ''}: black used "
          f"{clocks['b'].used:.3f} s, white {clocks['w'].used:.3f} s; "
          f"the longest move took {100 * worst:.0f} % of the time left "
          f"when it started")


if __name__ == "__main__":
    main()
