/*
 * rv-mcts-match: games of Hex between the distributed search (every
 * worker of the job) and the plain sequential UCT (rv_uct_tree_*, in
 * worker 0's thread alone), with the same playouts and settings.
 *
 *   rv-mcts-match --games G --size N --rollouts R            equal rollouts
 *   rv-mcts-match --games G --size N --ms T                  equal time
 *
 * With --rollouts both engines run R rollouts per move, each from a
 * fresh tree: the distributed one sets the position (reclaiming the
 * previous move's tree) and the sequential one makes its tree and frees
 * it; what is compared is the search, with its virtual loss and its
 * parallel selections, at equal work. With --ms each engine gets T
 * milliseconds per move, as the rollouts that fill T on the first
 * position (measured at the start of the job), and both keep the subtree
 * of the moves played, their own and the opponent's (rv_mcts_play,
 * rv_mcts_uct_tree_play). In both modes an engine's clock runs over its whole
 * move: bringing its tree up to the position (the opponent's move
 * played in it, or a new game's position set, the old tree reclaimed),
 * the search, and playing its own move (the rest of the tree reclaimed).
 * Games come in pairs from the same random opening of one stone each
 * (the engines swap colours in the pair), so the first player's advantage
 * cancels out; an opening is kept only when a sequential UCT of 20,000
 * rollouts finds it balanced (its best move wins 40 to 60 % for the side
 * to move), since a decided opening gives each engine one game of the
 * pair whatever they do. Prints one line per game, a line of each
 * engine's time per move (and of it, the time of keeping its tree), and
 * last a CSV line
 *   mode,games,distributed_wins,win_rate,ci_low,ci_high,rollouts_distributed,rollouts_uct,ms_per_move,ms_distributed,ms_uct
 * with a 95 % Wilson interval of the distributed engine's win rate, and
 * each engine's rollouts and wall time per move, on average over the
 * games. At equal time each engine's rollouts per move follow its time
 * per move through the games (keep_time), so both average T.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "rv_config.h"
#include "rv_mcts.h"

static struct {
    int games, size, sims;
    uint64_t rollouts;
    double ms, c;
} opt = {.games = 200, .size = 7, .sims = 16};

typedef struct engine {
    bool distributed;
    uint64_t rollouts;  /* per move */
    rv_mcts_result_t res;
    rv_mcts_uct_tree_t *tree; /* the sequential engine's, kept across moves */
    int synced;         /* the game's moves its tree has played; -1: its
                           tree is not of this game */
    double seconds;     /* the games' moves: wall time, */
    uint64_t done;      /* rollouts, */
    uint64_t kept;      /* the root's visits kept from earlier moves, */
    double tree_seconds; /* the time of keeping its tree (moves played
                            in it, positions set), */
    int moves;          /* and their number */
} engine_t;

static engine_t dist = {.distributed = true}, uct;

/* Brings @p e's tree to position @p s, which the game's moves @p hist
 * (@p n of them) led to: a new tree for a new game, otherwise the moves
 * it has not played yet (the opponent's), each keeping its subtree. */
static rv_status_t sync_tree(rv_worker_t *w, engine_t *e, const void *s,
                             const rv_mcts_move_t *hist, int n, uint64_t seed)
{
    rv_status_t st = RV_OK;
    if (e->synced < 0) {
        if (e->distributed)
            return rv_mcts_position(w, s);
        rv_mcts_uct_tree_destroy(e->tree);
        return rv_mcts_uct_tree_create(rv_mcts_hex(), s, opt.sims, opt.c, seed,
                                  &e->tree);
    }
    for (int i = e->synced; i < n && st == RV_OK; i++)
        st = e->distributed ? rv_mcts_play(w, hist[i])
                            : rv_mcts_uct_tree_play(e->tree, hist[i]);
    return st;
}

/* @p e's move in @p s from a fresh tree. */
static rv_status_t fresh_move(rv_worker_t *w, engine_t *e, const void *s,
                              uint64_t seed, rv_mcts_move_t *m)
{
    rv_status_t st;
    if (e->distributed) {
        st = rv_mcts_position(w, s);
        if (st == RV_OK)
            st = rv_mcts_search(w, e->rollouts, &e->res);
    } else {
        st = rv_mcts_uct_search(rv_mcts_hex(), s, e->rollouts, opt.sims, opt.c,
                           seed, &e->res);
    }
    *m = e->res.best;
    return st;
}

/* @p e's whole move in @p s after the game's moves @p hist (@p n): with
 * @p keep, its tree brought up to @p s, the search, and its move played
 * in its tree; otherwise a search from a fresh tree. The caller times
 * all of it. */
static rv_status_t engine_move(rv_worker_t *w, engine_t *e, const void *s,
                               const rv_mcts_move_t *hist, int n, bool keep,
                               uint64_t seed, rv_mcts_move_t *m)
{
    if (!keep)
        return fresh_move(w, e, s, seed, m);
    double t0 = bench_now_s();
    rv_status_t st = sync_tree(w, e, s, hist, n, seed);
    double t1 = bench_now_s();
    if (st == RV_OK)
        st = e->distributed ? rv_mcts_search(w, e->rollouts, &e->res)
                            : rv_mcts_uct_tree_search(e->tree, e->rollouts, &e->res);
    *m = e->res.best;
    double t2 = bench_now_s();
    if (st == RV_OK)
        st = e->distributed ? rv_mcts_play(w, *m)
                            : rv_mcts_uct_tree_play(e->tree, *m);
    e->tree_seconds += t1 - t0 + bench_now_s() - t2;
    e->synced = n + 1;
    return st;
}

/* Seconds engine @p e takes for one move from @p s with a new tree at
 * its current rollouts per move, keeping its tree as in a game: the
 * median of three. */
static double move_time(rv_worker_t *w, const void *s, engine_t *e)
{
    double t[3];
    rv_mcts_move_t m;
    for (int i = 0; i < 3; i++) {
        e->synced = -1;
        double t0 = bench_now_s();
        if (engine_move(w, e, s, NULL, 0, true, (uint64_t)i + 1, &m) != RV_OK)
            exit(1);
        t[i] = bench_now_s() - t0;
    }
    double lo = fmin(t[0], fmin(t[1], t[2]));
    double hi = fmax(t[0], fmax(t[1], t[2]));
    return t[0] + t[1] + t[2] - lo - hi;
}

/* Rollouts per move that fill opt.ms for one engine on position @p s:
 * from its rate on a long search first, then corrected on searches of
 * the size found, so that a short move's fixed costs (the distributed
 * engine's start and end of a search, and for both the tree's making and
 * reclamation) count against its time. */
static void fit_rollouts(rv_worker_t *w, const void *s, engine_t *e,
                         double *rate)
{
    e->rollouts = 20000;
    *rate = (double)e->rollouts / move_time(w, s, e);
    e->rollouts = (uint64_t)fmax(1.0, *rate * opt.ms / 1000.0);
    for (int i = 0; i < 3; i++) {
        double t = move_time(w, s, e);
        e->rollouts =
            (uint64_t)fmax(1.0, (double)e->rollouts * (opt.ms / 1000.0) / t);
    }
}

/* Rollouts per move of each engine for opt.ms per move on position @p s. */
static void calibrate(rv_worker_t *w, const void *s)
{
    double dr, ur;
    fit_rollouts(w, s, &dist, &dr);
    fit_rollouts(w, s, &uct, &ur);
    dist.tree_seconds = uct.tree_seconds = 0.0; /* the games' alone */
    printf("calibration: distributed %.0f rollouts/s, sequential UCT %.0f "
           "rollouts/s on long searches: %" PRIu64 " and %" PRIu64
           " rollouts fill a %g ms move\n", dr, ur, dist.rollouts,
           uct.rollouts, opt.ms);
}

/* Keeps an engine at opt.ms per move on average: a move that took @p dt
 * seconds scales its rollouts per move by the square root of the ratio
 * (positions later in a game play out faster, and the distributed
 * engine's fixed cost per search does not shrink with them). */
static void keep_time(engine_t *e, double dt)
{
    double f = sqrt(opt.ms / 1000.0 / dt);
    f = fmin(1.25, fmax(0.8, f));
    e->rollouts = (uint64_t)fmax(1.0, (double)e->rollouts * f);
}

/* One game from @p opening; returns whether the distributed engine won
 * (it plays black when @p dist_black). */
static bool play_game(rv_worker_t *w, const uint8_t *opening, bool dist_black,
                      uint64_t seed)
{
    const rv_mcts_game_t *g = rv_mcts_hex();
    uint8_t s[1024];
    rv_mcts_move_t hist[RV_MCTS_MAX_MOVES];
    int n = 0;
    bool keep = opt.ms > 0;
    memcpy(s, opening, g->state_max);
    dist.synced = uct.synced = -1;
    while (!g->is_terminal(s)) {
        bool dist_turn = (g->to_play(s) == 0) == dist_black;
        engine_t *e = dist_turn ? &dist : &uct;
        rv_mcts_move_t m;
        double t0 = bench_now_s();
        rv_status_t st = engine_move(w, e, s, hist, n, keep, seed++, &m);
        double dt = bench_now_s() - t0;
        if (st != RV_OK)
            exit(1);
        e->seconds += dt;
        e->moves++;
        e->done += e->res.rollouts;
        if (e->res.root_visits > e->res.rollouts)
            e->kept += e->res.root_visits - e->res.rollouts;
        if (opt.ms > 0)
            keep_time(e, dt);
        g->apply(s, m);
        hist[n++] = m;
    }
    return (g->winner(s) == RV_MCTS_GAME_FIRST) == dist_black;
}

static void wilson(int wins, int n, double *lo, double *hi)
{
    double z = 1.96, p = (double)wins / n, d = 1 + z * z / n;
    double mid = (p + z * z / (2.0 * n)) / d;
    double half = z * sqrt(p * (1 - p) / n + z * z / (4.0 * n * n)) / d;
    /* Clamped: rounding leaves -0.000 at no wins. */
    *lo = fmax(0.0, mid - half);
    *hi = fmin(1.0, mid + half);
}

/* A random opening of one stone each that a sequential UCT finds
 * balanced. */
static void balanced_opening(const uint8_t *empty, uint8_t *opening,
                             uint64_t *x)
{
    const rv_mcts_game_t *g = rv_mcts_hex();
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    static rv_mcts_result_t judge;
    for (int tries = 0;; tries++) {
        memcpy(opening, empty, g->state_max);
        for (int i = 0; i < 2; i++) {
            int n = g->legal_moves(opening, moves);
            *x = *x * 6364136223846793005ull + 1442695040888963407ull;
            g->apply(opening, moves[(*x >> 33) % (uint64_t)n]);
        }
        if (rv_mcts_uct_search(g, opening, 20000, opt.sims, opt.c, *x | 1,
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
    rv_mcts_hex_init(empty, opt.size);
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
    double dms = 1000.0 * dist.seconds / dist.moves;
    double ums = 1000.0 * uct.seconds / uct.moves;
    uint64_t dn = dist.done / (uint64_t)dist.moves;
    uint64_t un = uct.done / (uint64_t)uct.moves;
    printf("per move: distributed %.2f ms (%.2f keeping its tree), %" PRIu64
           " rollouts, %.1f root visits kept; sequential UCT %.2f ms "
           "(%.2f keeping its tree), %" PRIu64 " rollouts, %.1f root visits "
           "kept\n", dms, 1000.0 * dist.tree_seconds / dist.moves, dn,
           (double)dist.kept / dist.moves, ums,
           1000.0 * uct.tree_seconds / uct.moves, un,
           (double)uct.kept / uct.moves);
    printf("%s,%d,%d,%.3f,%.3f,%.3f,%" PRIu64 ",%" PRIu64 ",%g,%.2f,%.2f\n",
           opt.ms > 0 ? "equal_time" : "equal_rollouts", opt.games, wins,
           (double)wins / opt.games, lo, hi, dn, un, opt.ms, dms, ums);
    rv_mcts_uct_tree_destroy(uct.tree);
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
    if (rv_mcts_init(ctx, rv_mcts_hex()) != RV_OK)
        return 1;
    rv_status_t st = rv_job_run(ctx, worker, NULL);
    rv_finalize(ctx);
    return st == RV_OK ? 0 : 1;
}
