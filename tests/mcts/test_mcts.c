/*
 * The distributed search as multi-process jobs through rivetrun: on
 * positions an exact solver (here) proves won, the search's best move is
 * a winning one; the visits add up (nothing lost or counted twice),
 * across deferred selections, kept subtrees and new positions; the tree
 * is reclaimed; a search with a time budget ends near it, with the
 * rollouts it counts conserved; and the controller's calls reject what
 * they must.
 * Worker 0 controls, every other worker serves (rv_mcts_serve).
 *
 *   test_mcts [mcts|ttt]   the Hex checks, or tic-tac-toe's
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "job_test.h"
#include "rv_am.h"
#include "rv_mcts.h"

static rv_context_t *ctx;
static const rv_mcts_game_t *game;

/* ---------------------------------------------------------------------- */
/* An exact solver                                                         */

#define MAXPOS 8
#define STATE_MAX 1024

/* The value of @p s for the player to move with best play: 1 a win, 0 a
 * draw, -1 a loss (negamax, stopping at the first winning move). */
static int value(const void *s)
{
    int w = game->winner(s);
    if (w != RV_MCTS_GAME_NONE)
        return w == RV_MCTS_GAME_DRAW ? 0 : w == game->to_play(s) ? 1 : -1;
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    uint8_t child[STATE_MAX];
    int n = game->legal_moves(s, moves), best = -1;
    for (int i = 0; i < n && best < 1; i++) {
        memcpy(child, s, game->state_len(s));
        game->apply(child, moves[i]);
        int v = -value(child);
        best = v > best ? v : best;
    }
    return best;
}

/* The moves of @p s after which the mover wins with best play. */
static int winning_moves(const void *s, rv_mcts_move_t *out)
{
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    uint8_t child[STATE_MAX];
    int n = game->legal_moves(s, moves), k = 0;
    for (int i = 0; i < n; i++) {
        memcpy(child, s, game->state_len(s));
        game->apply(child, moves[i]);
        if (value(child) == -1)
            out[k++] = moves[i];
    }
    return k;
}

/* Positions the solver proved won by a few of many moves: a search that
 * picks at random fails. */
typedef struct forced {
    uint8_t s[STATE_MAX];
    rv_mcts_move_t win[RV_MCTS_MAX_MOVES];
    int nwin, nlegal;
} forced_t;

static forced_t pos[MAXPOS];
static int npos;

static void find_positions(int size, int stones, uint64_t seed, int want)
{
    uint64_t x = seed;
    for (int tries = 0; tries < 4000 && npos < want; tries++) {
        forced_t *f = &pos[npos];
        if (game == rv_mcts_hex())
            rv_mcts_hex_init(f->s, size);
        else
            rv_mcts_tictactoe_init(f->s);
        rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
        for (int k = 0; k < stones; k++) {
            int n = game->legal_moves(f->s, moves);
            if (n == 0)
                break;
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            game->apply(f->s, moves[(x >> 33) % (uint64_t)n]);
        }
        if (game->is_terminal(f->s))
            continue;
        f->nlegal = game->legal_moves(f->s, moves);
        f->nwin = winning_moves(f->s, f->win);
        if (f->nwin > 0 && 3 * f->nwin <= f->nlegal)
            npos++;
    }
}

static bool is_winning(const forced_t *f, rv_mcts_move_t m)
{
    for (int i = 0; i < f->nwin; i++)
        if (f->win[i] == m)
            return true;
    return false;
}

/* ---------------------------------------------------------------------- */
/* Jobs                                                                    */

static void run_job(rv_worker_fn fn)
{
    assert_int_equal(rv_job_run(ctx, fn, NULL), RV_OK);
    assert_int_equal(atomic_load(&failures), 0);
}

/* Every worker but 0 serves; worker 0 runs @p control and shuts down. */
static rv_status_t serve_or(rv_worker_t *w, void (*control)(rv_worker_t *))
{
    if (rv_worker_tid(w) != 0) {
        rv_status_t st = rv_mcts_serve(w);
        EXPECT(st == RV_OK, "rv_mcts_serve: %s", rv_status_str(st));
        return RV_OK;
    }
    control(w);
    rv_status_t st = rv_mcts_shutdown(w);
    EXPECT(st == RV_OK, "rv_mcts_shutdown: %s", rv_status_str(st));
    return RV_OK;
}

static rv_mcts_result_t res;

static void control_forced(rv_worker_t *w)
{
    char cell[16];
    for (int i = 0; i < npos; i++) {
        forced_t *f = &pos[i];
        EXPECT(rv_mcts_position(w, f->s) == RV_OK, "rv_mcts_position");
        EXPECT(rv_mcts_search(w, 50000, &res) == RV_OK, "rv_mcts_search");
        EXPECT(res.nmoves == f->nlegal, "%d moves at the root, %d legal",
               res.nmoves, f->nlegal);
        printf("position %d: best %s of %d moves (%d win), %" PRIu64
               " visits\n",
               i, game->move_text(f->s, res.best, cell, sizeof(cell)),
               f->nlegal, f->nwin, res.moves[0].visits);
        EXPECT(is_winning(f, res.best),
               "position %d: the search chose %s, which loses (%d of %d "
               "moves win)",
               i, game->move_text(f->s, res.best, cell, sizeof(cell)),
               f->nwin, f->nlegal);
    }
}

static rv_status_t body_forced(rv_worker_t *w, void *arg)
{
    (void)arg;
    return serve_or(w, control_forced);
}

static void test_forced(void **state)
{
    (void)state;
    assert_true(npos > 0);
    run_job(body_forced);
}

/* The job's counters after a search; checks that they add up. */
static rv_mcts_stats_t stats_checked(rv_worker_t *w, const char *when)
{
    rv_mcts_stats_t s = {0};
    EXPECT(rv_mcts_stats(w, &s) == RV_OK, "rv_mcts_stats");
    EXPECT(s.inconsistent == 0, "%s: %" PRIu64 " inconsistent visit counts",
           when, s.inconsistent);
    EXPECT(s.nodes_alive == s.nodes_created - s.nodes_freed,
           "%s: %" PRIu64 " nodes alive, %" PRIu64 " created, %" PRIu64
           " freed", when, s.nodes_alive, s.nodes_created, s.nodes_freed);
    return s;
}

static void control_conservation(rv_worker_t *w)
{
    uint8_t s[STATE_MAX];
    bool tree = getenv("RIVET_MCTS_OWNER") == NULL ||
                strcmp(getenv("RIVET_MCTS_OWNER"), "random") == 0;
    rv_mcts_hex_init(s, 4);
    EXPECT(rv_mcts_position(w, s) == RV_OK, "rv_mcts_position");
    rv_mcts_stats_t st = stats_checked(w, "a new position");
    EXPECT(st.nodes_alive == 1, "%" PRIu64 " nodes for a new root",
           st.nodes_alive);
    uint64_t deferred = 0;
    for (int round = 0; round < 3; round++) {
        EXPECT(rv_mcts_search(w, 3000, &res) == RV_OK, "rv_mcts_search");
        deferred += res.deferred;
        st = stats_checked(w, "a search");
        EXPECT(st.rollouts_done == 3000 * (uint64_t)(round + 1),
               "%" PRIu64 " rollouts came back", st.rollouts_done);
        EXPECT(st.visits_total == res.root_visits, "the root's visits");
        EXPECT(st.visits_total >= st.rollouts_done, "the root's visits");
    }
    EXPECT(st.visits_total == 9000, "%" PRIu64 " root visits for 9000 "
           "rollouts", st.visits_total);
    /* The best child's subtree is kept: it holds what went through it
     * (under mcts.owner random, all but the rollout that created it). */
    uint64_t through = res.moves[0].visits;
    EXPECT(rv_mcts_play(w, res.best) == RV_OK, "rv_mcts_play");
    st = stats_checked(w, "a move");
    EXPECT(!tree || st.visits_total == through - 1,
           "the kept root has %" PRIu64 " visits, its edge had %" PRIu64,
           st.visits_total, through);
    EXPECT(st.nodes_alive < 9000, "%" PRIu64 " nodes alive after the move",
           st.nodes_alive);
    uint64_t kept = st.visits_total;
    EXPECT(rv_mcts_search(w, 2000, &res) == RV_OK, "rv_mcts_search");
    st = stats_checked(w, "a search on a kept subtree");
    EXPECT(st.visits_total == kept + 2000 && st.rollouts_done == 2000,
           "%" PRIu64 " root visits (%" PRIu64 " kept + 2000), %" PRIu64
           " rollouts", st.visits_total, kept, st.rollouts_done);
    if (rv_nworkers(ctx) > 1)
        EXPECT(deferred > 0, "no selection was ever deferred");
    EXPECT(rv_mcts_position(w, s) == RV_OK, "rv_mcts_position");
    st = stats_checked(w, "a new position");
    EXPECT(st.nodes_alive == 1, "%" PRIu64 " nodes alive after a new "
           "position", st.nodes_alive);
}

static rv_status_t body_conservation(rv_worker_t *w, void *arg)
{
    (void)arg;
    return serve_or(w, control_conservation);
}

static void test_conservation(void **state)
{
    (void)state;
    run_job(body_conservation);
}

/* A timed search ends by its time (the rollouts in flight then finish),
 * or by its rollouts when they come first; what it counts came back. */
static void control_timed(rv_worker_t *w)
{
    uint8_t s[STATE_MAX];
    rv_mcts_hex_init(s, 7);
    EXPECT(rv_mcts_position(w, s) == RV_OK, "rv_mcts_position");
    EXPECT(rv_mcts_search_timed(w, RV_MCTS_ROLLOUTS_UNBOUNDED, 0, &res) ==
               RV_ERR_INVALID,
           "a search bounded by nothing");
    uint64_t done = 0;
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        EXPECT(rv_mcts_search_timed(w, RV_MCTS_ROLLOUTS_UNBOUNDED, 0.2,
                                    &res) == RV_OK,
               "a search of 0.2 s");
        double t = now_s() - t0;
        EXPECT(t >= 0.2 && t < 60, "a search of 0.2 s took %.3f s", t);
        EXPECT(res.rollouts > 0, "no rollout in 0.2 s");
        done += res.rollouts;
        rv_mcts_stats_t st = stats_checked(w, "a timed search");
        EXPECT(st.rollouts_done == done,
               "%" PRIu64 " rollouts came back, the searches counted %" PRIu64,
               st.rollouts_done, done);
    }
    EXPECT(rv_mcts_search_timed(w, 50, 60, &res) == RV_OK && res.rollouts == 50,
           "50 rollouts within a minute: %" PRIu64, res.rollouts);
    EXPECT(res.seconds < 30, "50 rollouts took %.3f s", res.seconds);
}

static rv_status_t body_timed(rv_worker_t *w, void *arg)
{
    (void)arg;
    return serve_or(w, control_timed);
}

static void test_timed(void **state)
{
    (void)state;
    run_job(body_timed);
}

static void control_errors(rv_worker_t *w)
{
    uint8_t s[STATE_MAX];
    rv_mcts_move_t m;
    char why[128];
    EXPECT(rv_mcts_search(w, 10, &res) == RV_ERR_INVALID,
           "a search without a position");
    EXPECT(rv_mcts_serve(w) == RV_ERR_INVALID, "rv_mcts_serve on worker 0");
    rv_mcts_hex_init(s, 3);
    EXPECT(rv_mcts_position(w, s) == RV_OK, "rv_mcts_position");
    EXPECT(game->move_parse(s, "b2", &m, why, sizeof(why)) == RV_OK, "b2");
    EXPECT(rv_mcts_play(w, m) == RV_OK, "playing b2");
    EXPECT(rv_mcts_play(w, m) == RV_ERR_INVALID, "playing b2 twice");
    EXPECT(rv_mcts_play(w, 9) == RV_ERR_INVALID, "a move off the board");
    /* Black's column a1-a2-a3 ends the game. */
    rv_mcts_hex_init(s, 3);
    const char *moves[] = {"a1", "b1", "a2", "b2", "a3"};
    for (size_t i = 0; i < 5; i++) {
        EXPECT(game->move_parse(s, moves[i], &m, why, sizeof(why)) == RV_OK,
               "%s: %s", moves[i], why);
        game->apply(s, m);
    }
    EXPECT(game->winner(s) == RV_MCTS_GAME_FIRST, "black's column");
    EXPECT(rv_mcts_position(w, s) == RV_OK, "rv_mcts_position");
    EXPECT(rv_mcts_search(w, 10, &res) == RV_ERR_INVALID,
           "a search of a finished game");
}

static rv_status_t body_errors(rv_worker_t *w, void *arg)
{
    (void)arg;
    /* A result of its own: the workers refused here run at once (the
     * shared one raced, found by ThreadSanitizer). */
    rv_mcts_result_t mine;
    if (rv_worker_tid(w) != 0)
        EXPECT(rv_mcts_search(w, 10, &mine) == RV_ERR_INVALID,
               "rv_mcts_search off worker 0");
    return serve_or(w, control_errors);
}

static void test_errors(void **state)
{
    (void)state;
    run_job(body_errors);
}

int main(int argc, char **argv)
{
    const char *group = "mcts";
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        group = argv[1];
    bool ttt = strstr(group, "ttt") != NULL;
    game = ttt ? rv_mcts_tictactoe() : rv_mcts_hex();
    if (rv_mcts_init(ctx, game) != RV_OK)
        return 1;
    if (ttt) {
        find_positions(3, 2, 7, 4);
    } else {
        find_positions(3, 1, 11, 2);
        find_positions(4, 7, 13, 6);
    }
    const struct CMUnitTest hex[] = {
        cmocka_unit_test(test_forced),
        cmocka_unit_test(test_conservation),
        cmocka_unit_test(test_timed),
        cmocka_unit_test(test_errors),
    };
    const struct CMUnitTest tictactoe[] = {cmocka_unit_test(test_forced)};
    const struct CMUnitTest *tests = ttt ? tictactoe : hex;
    size_t nchecks = ttt ? 1 : 4;
    int failed = _cmocka_run_group_tests(group, tests, nchecks, NULL, NULL);
    rv_finalize(ctx);
    return job_test_status(failed, nchecks);
}
