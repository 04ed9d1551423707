/*
 * rv-mcts-match: games of Hex between the distributed search (every
 * worker of the job) and the plain sequential UCT (rv_uct_search, in
 * worker 0's thread alone), with the same playouts and settings.
 *
 *   rv-mcts-match --games G --size N --rollouts R            equal rollouts
 *   rv-mcts-match --games G --size N --ms T                  equal time
 *
 * With --rollouts both engines run R rollouts per move, and the
 * distributed one starts each move from a fresh tree, as the sequential
 * one does: what is compared is the search, with its virtual loss and
 * its parallel selections, at equal work. With --ms each engine gets T
 * milliseconds per move, as rollouts from its rate measured on the first
 * position at the start of the job, and the distributed one keeps the
 * subtree of the moves played (as it plays). Games come in pairs from
 * the same random opening of one stone each (the engines swap colours in
 * the pair), so the first player's advantage cancels out; an opening is
 * kept only when a sequential UCT of 20,000 rollouts finds it balanced
 * (its best move wins 40 to 60 % for the side to move), since a decided
 * opening gives each engine one game of the pair whatever they do. Prints one
 * line per game and, last, a CSV line
 *   mode,games,distributed_wins,win_rate,ci_low,ci_high,rollouts_distributed,rollouts_uct,ms_per_move
 * with a 95 % Wilson interval of the distributed engine's win rate.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rv_config.h"
#include "rv_mcts.h"

static struct {
    int games, size, sims;
    uint64_t rollouts;
    double ms, c;
} opt = {.games = 200, .size = 7, .sims = 16};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct engine {
    uint64_t rollouts;  /* per move */
    rv_mcts_result_t res;
} engine_t;

static engine_t dist, uct;

/* The distributed engine's move in @p s. */
static rv_status_t dist_move(rv_worker_t *w, const void *s, bool fresh,
                             rv_move_t *m)
{
    rv_status_t st = fresh ? rv_mcts_position(w, s) : RV_OK;
    if (st == RV_OK)
        st = rv_mcts_search(w, dist.rollouts, &dist.res);
    *m = dist.res.best;
    return st;
}

static rv_status_t uct_move(const void *s, uint64_t seed, rv_move_t *m)
{
    rv_status_t st = rv_uct_search(rv_game_hex(), s, uct.rollouts, opt.sims,
                                   opt.c, seed, &uct.res);
    *m = uct.res.best;
    return st;
}

/* Rollouts per second of each engine on position @p s. */
static void calibrate(rv_worker_t *w, const void *s)
{
    rv_move_t m;
    dist.rollouts = uct.rollouts = 20000;
    double t0 = now_s();
    dist_move(w, s, true, &m);
    double dr = (double)dist.rollouts / (now_s() - t0);
    t0 = now_s();
    uct_move(s, 1, &m);
    double ur = (double)uct.rollouts / (now_s() - t0);
    dist.rollouts = (uint64_t)(dr * opt.ms / 1000.0);
    uct.rollouts = (uint64_t)(ur * opt.ms / 1000.0);
    printf("calibration: distributed %.0f rollouts/s, sequential UCT %.0f "
           "rollouts/s: %" PRIu64 " and %" PRIu64 " rollouts per %.0f ms "
           "move\n", dr, ur, dist.rollouts, uct.rollouts, opt.ms);
}

/* One game from @p opening; returns whether the distributed engine won
 * (it plays black when @p dist_black). */
static bool play_game(rv_worker_t *w, const uint8_t *opening, bool dist_black,
                      uint64_t seed)
{
    const rv_game_t *g = rv_game_hex();
    uint8_t s[1024];
    bool reuse = opt.ms > 0;
    memcpy(s, opening, g->state_max);
    if (reuse && rv_mcts_position(w, s) != RV_OK)
        exit(1);
    while (!g->is_terminal(s)) {
        bool dist_turn = (g->to_play(s) == 0) == dist_black;
        rv_move_t m;
        rv_status_t st = dist_turn ? dist_move(w, s, !reuse, &m)
                                   : uct_move(s, seed++, &m);
        if (st != RV_OK)
            exit(1);
        if (reuse && rv_mcts_play(w, m) != RV_OK)
            exit(1);
        g->apply(s, m);
    }
    return (g->winner(s) == RV_GAME_FIRST) == dist_black;
}

static void wilson(int wins, int n, double *lo, double *hi)
{
    double z = 1.96, p = (double)wins / n, d = 1 + z * z / n;
    double mid = (p + z * z / (2.0 * n)) / d;
    double half = z * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n)) / d;
    *lo = mid - half;
    *hi = mid + half;
}

/* A random opening of one stone each that a sequential UCT finds
 * balanced. */
static void balanced_opening(const uint8_t *empty, uint8_t *opening,
                             uint64_t *x)
{
    const rv_game_t *g = rv_game_hex();
    rv_move_t moves[RV_GAME_MAX_MOVES];
    static rv_mcts_result_t judge;
    for (int tries = 0;; tries++) {
        memcpy(opening, empty, g->state_max);
        for (int i = 0; i < 2; i++) {
            int n = g->legal_moves(opening, moves);
            *x = *x * 6364136223846793005ull + 1442695040888963407ull;
            g->apply(opening, moves[(*x >> 33) % (uint64_t)n]);
        }
        if (rv_uct_search(g, opening, 20000, opt.sims, opt.c, *x | 1,
                          &judge) != RV_OK)
            continue;
        double p = judge.moves[0].win_rate;
        if ((p >= 0.4 && p <= 0.6) || tries == 1000)
            return;
    }
}

static rv_status_t worker(rv_worker_t *w, void *arg)
{
    (void)arg;
    if (rv_worker_tid(w) != 0)
        return rv_mcts_serve(w);
    uint8_t empty[1024], opening[1024];
    rv_hex_init(empty, opt.size);
    if (opt.ms > 0)
        calibrate(w, empty);
    else
        dist.rollouts = uct.rollouts = opt.rollouts;
    uint64_t x = 12345;
    int wins = 0;
    for (int k = 0; k < opt.games; k++) {
        if (k % 2 == 0)
            balanced_opening(empty, opening, &x);
        bool black = k % 2 == 0;
        bool won = play_game(w, opening, black, 1000003ull * (uint64_t)k + 7);
        wins += won;
        printf("game %d: distributed engine as %s %s (%d of %d won)\n", k + 1,
               black ? "black" : "white", won ? "wins" : "loses", wins, k + 1);
        fflush(stdout);
    }
    double lo, hi;
    wilson(wins, opt.games, &lo, &hi);
    printf("%s,%d,%d,%.3f,%.3f,%.3f,%" PRIu64 ",%" PRIu64 ",%.0f\n",
           opt.ms > 0 ? "equal_time" : "equal_rollouts", opt.games, wins,
           (double)wins / opt.games, lo, hi, dist.rollouts, uct.rollouts,
           opt.ms);
    return rv_mcts_shutdown(w);
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--games") == 0)
            opt.games = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--size") == 0)
            opt.size = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rollouts") == 0)
            opt.rollouts = strtoull(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--ms") == 0)
            opt.ms = atof(argv[i + 1]);
        else {
            fprintf(stderr, "rv-mcts-match: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (opt.games < 2 || (opt.rollouts == 0) == (opt.ms <= 0)) {
        fprintf(stderr, "usage: rv-mcts-match --games G --size N "
                        "(--rollouts R | --ms T)\n");
        return 2;
    }
    int64_t sims = 16;
    char c[64] = "1.0";
    rv_config_get_int(rv_context_config(ctx), "mcts.simulations_per_leaf",
                      &sims);
    rv_config_get(rv_context_config(ctx), "mcts.c", c, sizeof(c));
    opt.sims = (int)sims;
    opt.c = strtod(c, NULL);
    if (rv_mcts_init(ctx, rv_game_hex()) != RV_OK)
        return 1;
    rv_status_t st = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    return st == RV_OK ? 0 : 1;
}
