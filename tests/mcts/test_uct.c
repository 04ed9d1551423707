/*
 * The sequential UCT baseline (rv_mcts_uct_search), in one process, on both
 * games:
 * - its result's bookkeeping: every legal move once, by visits with the
 *   win rate breaking ties, the visits summing to the rollouts run and to
 *   the root's visits, one node per rollout, the same seed the same
 *   search, the root position untouched, and its refusals;
 * - a tree kept across moves (rv_uct_tree_*): the same search as the
 *   one-shot one, and a played move's subtree kept as the root with the
 *   chosen child's visits, for the engine's move and the opponent's;
 * - its choices: on random 3x3 and 4x4 Hex and tic-tac-toe positions
 *   where an exact solver (here, negamax over the game's callbacks) finds
 *   at most two moves that keep the position's value, it picks one.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "games_test.h"
#include "rv_mcts.h"


/* An empty n x n Hex board, or for n = 0 an empty tic-tac-toe board. */
static void new_pos(pos_t *s, int n)
{
    assert_true(rv_mcts_hex()->state_max <= sizeof(s->b));
    assert_true(rv_mcts_tictactoe()->state_max <= sizeof(s->b));
    if (n == 0)
        rv_mcts_tictactoe_init(s);
    else
        assert_int_equal(rv_mcts_hex_init(s, n), RV_OK);
}

/* A memo of solved positions by hash, for one game at a time: direct
 * mapped, a newer position replacing an older one, so it never fills. */
#define MEMO_SIZE (1u << 20)
static struct memo {
    uint64_t key;
    int8_t value;
} * memo;

/* The value of @p s for the player to move: 1 a win, 0 a draw, -1 a
 * loss, by negamax over every move. */
static int solve(const rv_mcts_game_t *g, const void *s)
{
    int w = g->winner(s);
    if (w != RV_MCTS_GAME_NONE)
        return w == RV_MCTS_GAME_DRAW ? 0 : w == g->to_play(s) ? 1 : -1;
    uint64_t key = g->hash(s) | 1;
    uint32_t at = (uint32_t)(key >> 40) & (MEMO_SIZE - 1);
    if (memo[at].key == key)
        return memo[at].value;
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    int k = g->legal_moves(s, moves), best = -1;
    for (int i = 0; i < k && best < 1; i++) {
        pos_t child;
        memcpy(&child, s, g->state_len(s));
        g->apply(&child, moves[i]);
        int v = -solve(g, &child);
        best = v > best ? v : best;
    }
    memo[at] = (struct memo){key, (int8_t)best};
    return best;
}

static int solve_move(const rv_mcts_game_t *g, const void *s, rv_mcts_move_t m)
{
    pos_t child;
    memcpy(&child, s, g->state_len(s));
    g->apply(&child, m);
    return -solve(g, &child);
}

/* Checks a UCT result's bookkeeping for @p rollouts on position @p s. */
static void check_result(const rv_mcts_game_t *g, const void *s,
                         const rv_mcts_result_t *res, uint64_t rollouts)
{
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    int k = g->legal_moves(s, moves);
    uint64_t sum = 0;
    assert_int_equal(res->nmoves, k);
    assert_int_equal(res->rollouts, rollouts);
    assert_int_equal(res->root_visits, rollouts);
    assert_int_equal(res->deferred, 0);
    assert_true(res->nodes >= 1 && res->nodes <= rollouts + 1);
    assert_int_equal(res->best, res->moves[0].move);
    for (int i = 0; i < k; i++) {
        const rv_mcts_edge_t *mv = &res->moves[i];
        sum += mv->visits;
        assert_true(mv->win_rate >= 0.0 && mv->win_rate <= 1.0);
        assert_true(
            i == 0 || mv[-1].visits > mv->visits ||
            (mv[-1].visits == mv->visits && mv[-1].win_rate >= mv->win_rate));
        int found = 0;
        for (int j = 0; j < k; j++)
            found += moves[j] == mv->move;
        assert_int_equal(found, 1);
    }
    assert_int_equal(sum, rollouts);
}

/*
 * Finds @p want random positions of Hex on @p n x @p n (tic-tac-toe for
 * n = 0) made by @p lo to @p hi random moves, that the side to move does not
 * lose and where at most two moves keep that value among at least @p min_moves,
 * and checks that UCT with @p rollouts rollouts of 4 playouts (c = 1) picks one
 * of those moves.
 */
static void check_uct_solves(int n, int lo, int hi, int min_moves, int want,
                             uint64_t rollouts)
{
    const rv_mcts_game_t *g = n ? rv_mcts_hex() : rv_mcts_tictactoe();
    memset(memo, 0, MEMO_SIZE * sizeof(*memo));
    int found = 0, tries = 0;
    uint64_t done[64];
    assert_true(want <= 64);
    while (found < want) {
        assert_true(++tries < 20000);
        pos_t s;
        rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
        new_pos(&s, n);
        for (int p = lo + rnd_below(hi - lo + 1); p > 0; p--) {
            int k = g->legal_moves(&s, moves);
            if (k > 0)
                g->apply(&s, moves[rnd_below(k)]);
        }
        int k = g->legal_moves(&s, moves), value = -1, best = 0;
        if (k < min_moves || solve(g, &s) < 0)
            continue;
        value = solve(g, &s);
        for (int i = 0; i < k; i++)
            best += solve_move(g, &s, moves[i]) == value;
        int again = 0;
        for (int i = 0; i < found; i++)
            again |= done[i] == g->hash(&s);
        if (best > 2 || again)
            continue;
        pos_t before = s;
        rv_mcts_result_t res;
        assert_int_equal(
            rv_mcts_uct_search(g, &s, rollouts, 4, 1.0, (uint64_t)tries, &res),
            RV_OK);
        assert_memory_equal(&s, &before, g->state_len(&s));
        check_result(g, &s, &res, rollouts);
        if (solve_move(g, &s, res.best) != value) {
            char text[8];
            g->print(&s, stderr);
            fail_msg("UCT chose %s (%" PRIu64
                     " visits, %.3f), which does not %s",
                     g->move_text(&s, res.best, text, sizeof(text)),
                     res.moves[0].visits, res.moves[0].win_rate,
                     value > 0 ? "win" : "draw");
        }
        done[found++] = g->hash(&s);
    }
}

static void test_uct_solves_hex3(void **state)
{
    (void)state;
    check_uct_solves(3, 0, 4, 4, 10, 20000);
}

/* 4x4 needs more: a win may show only deep in the tree (a2 looks better
 * than the winning b2 to 25000 rollouts after a1 b3 a3 c3 d3). Measured
 * over 100 such positions, UCT missed the win in 5 at 10000 rollouts, 2
 * at 50000 and none at 100000. */
static void test_uct_solves_hex4(void **state)
{
    (void)state;
    check_uct_solves(4, 4, 8, 6, 10, 100000);
}

static void test_uct_solves_tictactoe(void **state)
{
    (void)state;
    check_uct_solves(0, 0, 5, 3, 16, 20000);
}

/* The result's bookkeeping on a larger board, fewer rollouts than moves,
 * the same seed twice, and the refusals. */
static void test_uct_contract(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_hex();
    static rv_mcts_result_t a, b;
    pos_t s;
    new_pos(&s, 7);
    assert_int_equal(rv_mcts_uct_search(g, &s, 3000, 2, 0.7, 99, &a), RV_OK);
    check_result(g, &s, &a, 3000);
    assert_int_equal(a.nodes, 3001); /* no rollout reaches a finished game */
    assert_true(a.seconds > 0.0);
    assert_int_equal(rv_mcts_uct_search(g, &s, 3000, 2, 0.7, 99, &b), RV_OK);
    assert_int_equal(a.best, b.best);
    for (int i = 0; i < a.nmoves; i++) {
        assert_int_equal(a.moves[i].move, b.moves[i].move);
        assert_int_equal(a.moves[i].visits, b.moves[i].visits);
    }
    assert_int_equal(rv_mcts_uct_search(g, &s, 10, 1, 1.0, 5, &a), RV_OK);
    check_result(g, &s, &a, 10);
    assert_int_equal(a.moves[10].visits, 0);
    assert_int_equal(rv_mcts_uct_search(g, &s, 0, 1, 1.0, 5, &a), RV_OK);
    check_result(g, &s, &a, 0);

    assert_int_equal(rv_mcts_uct_search(g, &s, 10, 0, 1.0, 5, &a), RV_ERR_INVALID);
    assert_int_equal(rv_mcts_uct_search(NULL, &s, 10, 1, 1.0, 5, &a),
                     RV_ERR_INVALID);
    new_pos(&s, 2);
    g->apply(&s, 0);
    g->apply(&s, 1);
    g->apply(&s, 2); /* black a1 a2 */
    assert_true(g->is_terminal(&s));
    assert_int_equal(rv_mcts_uct_search(g, &s, 10, 1, 1.0, 5, &a), RV_ERR_INVALID);
    assert_int_equal(a.nmoves, 0);
}

/* The visits of @p res's moves, summed. */
static uint64_t visits_sum(const rv_mcts_result_t *res)
{
    uint64_t sum = 0;
    for (int i = 0; i < res->nmoves; i++)
        sum += res->moves[i].visits;
    return sum;
}

/* Plays @p res's best move in @p t and checks that the new root carries
 * the chosen child's visits: all of its edge's but the rollout that made
 * it (no rollout of these searches reaches a finished game), and one node
 * per rollout through it. Leaves the new root's moves in @p res. */
static void check_play_keeps(rv_mcts_uct_tree_t *t, rv_mcts_result_t *res)
{
    uint64_t chosen = res->moves[0].visits;
    assert_true(chosen > 1);
    assert_int_equal(rv_mcts_uct_tree_play(t, res->best), RV_OK);
    assert_int_equal(rv_mcts_uct_tree_search(t, 0, res), RV_OK);
    assert_int_equal(res->rollouts, 0);
    assert_int_equal(res->root_visits, chosen - 1);
    assert_int_equal(visits_sum(res), chosen - 1);
    assert_int_equal(res->nodes, chosen);
}

/* A tree kept across moves: the same search as rv_mcts_uct_search from the
 * same seed; after the engine's move and the opponent's reply the root
 * keeps each chosen child's statistics, later rollouts add to them; a
 * move no rollout tried starts a fresh root; an illegal move is refused. */
static void test_uct_tree_keeps_subtree(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_hex();
    static rv_mcts_result_t a, b;
    pos_t s;
    rv_mcts_uct_tree_t *t;
    new_pos(&s, 7);
    assert_int_equal(rv_mcts_uct_search(g, &s, 3000, 2, 0.7, 99, &a), RV_OK);
    assert_int_equal(rv_mcts_uct_tree_create(g, &s, 2, 0.7, 99, &t), RV_OK);
    assert_int_equal(rv_mcts_uct_tree_search(t, 3000, &b), RV_OK);
    check_result(g, &s, &b, 3000);
    assert_int_equal(b.nodes, 3001);
    for (int i = 0; i < a.nmoves; i++) {
        assert_int_equal(a.moves[i].move, b.moves[i].move);
        assert_int_equal(a.moves[i].visits, b.moves[i].visits);
    }

    rv_mcts_move_t mine = b.best;
    check_play_keeps(t, &b); /* the engine's move */
    g->apply(&s, mine);
    check_play_keeps(t, &b); /* the opponent's reply, from what it kept */
    uint64_t kept = b.root_visits;
    assert_int_equal(rv_mcts_uct_tree_search(t, 500, &b), RV_OK);
    assert_int_equal(b.rollouts, 500);
    assert_int_equal(b.root_visits, kept + 500);
    assert_int_equal(visits_sum(&b), kept + 500);

    assert_int_equal(rv_mcts_uct_tree_play(t, mine), RV_ERR_INVALID); /* taken */
    rv_mcts_uct_tree_destroy(t);

    /* Ten rollouts try ten of the 48 moves left. */
    assert_int_equal(rv_mcts_uct_tree_create(g, &s, 2, 0.7, 5, &t), RV_OK);
    assert_int_equal(rv_mcts_uct_tree_search(t, 10, &b), RV_OK);
    assert_int_equal(b.moves[b.nmoves - 1].visits, 0);
    assert_int_equal(rv_mcts_uct_tree_play(t, b.moves[b.nmoves - 1].move), RV_OK);
    assert_int_equal(rv_mcts_uct_tree_search(t, 0, &b), RV_OK);
    assert_int_equal(b.root_visits, 0);
    assert_int_equal(b.nodes, 1);
    assert_int_equal(b.nmoves, 47);
    rv_mcts_uct_tree_destroy(t);
    rv_mcts_uct_tree_destroy(NULL);

    assert_int_equal(rv_mcts_uct_tree_create(g, &s, 0, 0.7, 99, &t),
                     RV_ERR_INVALID);
    assert_null(t);
    assert_int_equal(rv_mcts_uct_tree_search(NULL, 1, &b), RV_ERR_INVALID);
    assert_int_equal(rv_mcts_uct_tree_play(NULL, 0), RV_ERR_INVALID);
}

static int setup(void **state)
{
    (void)state;
    memo = calloc(MEMO_SIZE, sizeof(*memo));
    return memo == NULL;
}

static int teardown(void **state)
{
    (void)state;
    free(memo);
    return 0;
}

int main(void)
{
    rnd_state = 67890;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uct_contract),
        cmocka_unit_test(test_uct_tree_keeps_subtree),
        cmocka_unit_test(test_uct_solves_hex3),
        cmocka_unit_test(test_uct_solves_hex4),
        cmocka_unit_test(test_uct_solves_tictactoe),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
