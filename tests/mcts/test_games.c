/*
 * The search layer's games, in one process, through the public
 * callbacks only:
 * - Hex wins on hand-made boards of every size 2..19 for both colours:
 *   straight lines, zig-zags along the hex diagonal, chains broken by the
 *   diagonal that is not a neighbour, and steps between every pair of
 *   nearby columns (rows) at the first, middle and last rows, which puts
 *   stones on every edge and in the acute and obtuse corners;
 * - random games and random playouts, every board read back through
 *   print and judged by the test's own flood fill: a full board has
 *   exactly one winner, the one the playout returns;
 * - the first player's advantage in random playouts (odd sizes: black
 *   has one more stone) and its absence on even sizes (by symmetry);
 * - notation for every cell of every size, and its errors;
 * - Zobrist hashes: transpositions agree, different positions differ;
 * - the swap rule: offered to white after black's first stone only, and
 *   only where it holds, mirroring that stone, in HexGui's notation, and
 *   chosen by the search where black's first stone wins;
 * - tic-tac-toe's lines, draws and random-play statistics.
 * UCT is checked against an exact solver in test_uct.c.
 */
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

#define MAXN RV_MCTS_HEX_MAX


/* ---------------------------------------------------------------------- */
/* A Hex board read back through print, and an independent judge           */

typedef struct board {
    int n;
    uint8_t c[MAXN][MAXN]; /* 0 empty, 1 black (X), 2 white (O) */
} board_t;

/* Parses the rows "  3\.  X  O\3" of @p g's drawing of @p s. */
static void read_hex(const void *s, board_t *b)
{
    char *text = NULL, *save = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    rv_mcts_hex()->print(s, f);
    fclose(f);
    memset(b, 0, sizeof(*b));
    int rows = 0;
    for (char *l = strtok_r(text, "\n", &save); l;
         l = strtok_r(NULL, "\n", &save)) {
        char *p = strchr(l, '\\');
        if (p == NULL)
            continue;
        assert_int_equal(atoi(l), rows + 1);
        int c = 0;
        for (p++;; p += 3) {
            assert_true(*p == '.' || *p == 'X' || *p == 'O');
            b->c[rows][c++] = *p == 'X' ? 1 : *p == 'O' ? 2 : 0;
            if (p[1] == '\\')
                break;
            assert_true(p[1] == ' ' && p[2] == ' ');
        }
        assert_int_equal(atoi(p + 2), rows + 1);
        assert_true(rows == 0 || c == b->n);
        b->n = c;
        rows++;
    }
    assert_int_equal(rows, b->n);
    free(text);
}

/* Whether @p colour's stones join its two edges (black: top and bottom
 * rows; white: left and right columns), by a breadth-first search. */
static int judge_connects(const board_t *b, int colour)
{
    static const int dr[6] = {-1, -1, 0, 0, 1, 1}, dc[6] = {0, 1, -1, 1, -1, 0};
    int n = b->n, queue[MAXN * MAXN], head = 0, tail = 0;
    uint8_t seen[MAXN][MAXN] = {{0}};
    for (int i = 0; i < n; i++) {
        int r = colour == 1 ? 0 : i, c = colour == 1 ? i : 0;
        if (b->c[r][c] == colour) {
            seen[r][c] = 1;
            queue[tail++] = r * MAXN + c;
        }
    }
    while (head < tail) {
        int r = queue[head] / MAXN, c = queue[head++] % MAXN;
        if ((colour == 1 ? r : c) == n - 1)
            return 1;
        for (int k = 0; k < 6; k++) {
            int nr = r + dr[k], nc = c + dc[k];
            if (nr >= 0 && nr < n && nc >= 0 && nc < n &&
                b->c[nr][nc] == colour && !seen[nr][nc]) {
                seen[nr][nc] = 1;
                queue[tail++] = nr * MAXN + nc;
            }
        }
    }
    return 0;
}

static int judge(const board_t *b)
{
    int black = judge_connects(b, 1), white = judge_connects(b, 2);
    assert_false(black && white);
    return black ? RV_MCTS_GAME_FIRST : white ? RV_MCTS_GAME_SECOND : RV_MCTS_GAME_NONE;
}

static void hex_new(pos_t *s, int n)
{
    assert_true(rv_mcts_hex()->state_max <= sizeof(s->b));
    assert_int_equal(rv_mcts_hex_init(s, n), RV_OK);
}

/* Plays @p m after checking it is among the legal moves. */
static void play(const rv_mcts_game_t *g, void *s, rv_mcts_move_t m)
{
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    int k = g->legal_moves(s, moves), found = 0;
    for (int i = 0; i < k; i++)
        found |= moves[i] == m;
    assert_true(found);
    g->apply(s, m);
}

/* ---------------------------------------------------------------------- */
/* Hand-made Hex boards                                                    */

/*
 * Plays the @p k cells (row, column) of @p chain for @p colour (1 black,
 * 2 white) in order, alternating from black with stones of the other
 * colour placed where they never connect, and checks that nobody has won
 * before the last stone and @p expect has after it (the judge agreeing).
 */
static void check_chain(int n, int colour, const int (*chain)[2], int k,
                        int expect)
{
    const rv_mcts_game_t *g = rv_mcts_hex();
    board_t plan = {.n = n};
    int other = 3 - colour, nf = colour == 1 ? k - 1 : k, fill[MAXN * MAXN];
    /* A full board always has a winner (white's long diagonal on 2x2
     * leaves black the short one): nothing to build. */
    if (expect == RV_MCTS_GAME_NONE && k + nf == n * n)
        return;
    for (int i = 0; i < k; i++)
        plan.c[chain[i][0]][chain[i][1]] = (uint8_t)colour;
    int f = 0;
    for (int i = n * n - 1; i >= 0 && f < nf; i--) {
        if (plan.c[i / n][i % n])
            continue;
        plan.c[i / n][i % n] = (uint8_t)other;
        if (judge_connects(&plan, other))
            plan.c[i / n][i % n] = 0;
        else
            fill[f++] = i;
    }
    assert_int_equal(f, nf);

    pos_t s;
    hex_new(&s, n);
    for (int i = 0, total = k + nf; i < total; i++) {
        assert_int_equal(g->winner(&s), RV_MCTS_GAME_NONE);
        int mine = colour == 1 ? i % 2 == 0 : i % 2 == 1;
        rv_mcts_move_t m = (rv_mcts_move_t)(mine ? chain[i / 2][0] * n + chain[i / 2][1]
                                       : fill[i / 2]);
        play(g, &s, m);
    }
    board_t got;
    read_hex(&s, &got);
    assert_memory_equal(got.c, plan.c, sizeof(plan.c));
    assert_int_equal(judge(&got), expect);
    assert_int_equal(g->winner(&s), expect);
    assert_int_equal(g->is_terminal(&s), expect != RV_MCTS_GAME_NONE);
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    assert_int_equal(g->legal_moves(&s, moves),
                     expect != RV_MCTS_GAME_NONE ? 0 : n * n - k - nf);
}

/* The same chain for white, mirrored in the long diagonal: hex adjacency
 * is symmetric under (r, c) -> (c, r), and so are the goals. */
static void check_both(int n, int (*cells)[2], int k, int expect_black)
{
    check_chain(n, 1, (const int(*)[2])cells, k, expect_black);
    for (int i = 0; i < k; i++) {
        int t = cells[i][0];
        cells[i][0] = cells[i][1];
        cells[i][1] = t;
    }
    check_chain(n, 2, (const int(*)[2])cells, k,
                expect_black == RV_MCTS_GAME_NONE ? RV_MCTS_GAME_NONE : RV_MCTS_GAME_SECOND);
}

static void test_hex_lines(void **state)
{
    (void)state;
    int cells[MAXN][2];
    for (int n = 2; n <= MAXN; n++) {
        for (int col = 0; col < n; col++) {
            for (int r = 0; r < n; r++)
                cells[r][0] = r, cells[r][1] = col;
            check_both(n, cells, n, RV_MCTS_GAME_FIRST);
        }
        /* The short diagonal is a chain of neighbours (r+1, c-1) ... */
        for (int r = 0; r < n; r++)
            cells[r][0] = r, cells[r][1] = n - 1 - r;
        check_both(n, cells, n, RV_MCTS_GAME_FIRST);
        /* ... the long one, (r+1, c+1), is not. */
        for (int r = 0; r < n; r++)
            cells[r][0] = r, cells[r][1] = r;
        check_both(n, cells, n, RV_MCTS_GAME_NONE);
    }
}

/*
 * Column cp from the top down to row r, then column cq from row r+1 to
 * the bottom: joined exactly when (r+1, cq) neighbours (r, cp), that is
 * cq is cp or cp-1. At r = 0 and r = n-2 with cp or cq at 0 or n-1 the
 * step is at an acute corner (a1, the bottom-right one: no diagonal
 * neighbour) or an obtuse one (top-right, bottom-left: one).
 */
static void test_hex_steps_and_corners(void **state)
{
    (void)state;
    int cells[MAXN][2];
    for (int n = 2; n <= MAXN; n++) {
        int rows[3] = {0, (n - 2) / 2, n - 2};
        for (int ri = 0; ri < 3; ri++) {
            if (ri > 0 && rows[ri] == rows[ri - 1])
                continue;
            for (int cp = 0; cp < n; cp++)
                for (int cq = cp - 2; cq <= cp + 2; cq++) {
                    if (cq < 0 || cq >= n)
                        continue;
                    for (int r = 0; r < n; r++)
                        cells[r][0] = r, cells[r][1] = r <= rows[ri] ? cp : cq;
                    check_both(n, cells, n,
                               cq == cp || cq == cp - 1 ? RV_MCTS_GAME_FIRST
                                                        : RV_MCTS_GAME_NONE);
                }
        }
    }
}

/* Random games on every size: after every move the winner is the
 * judge's, the moves are the empty cells, and an illegal move changes
 * nothing. */
static void test_hex_random_games(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_hex();
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    for (int n = 2; n <= MAXN; n++)
        for (int game = 0; game < 12; game++) {
            pos_t s, before;
            board_t b;
            hex_new(&s, n);
            for (int ply = 0;; ply++) {
                read_hex(&s, &b);
                int w = judge(&b), k = g->legal_moves(&s, moves);
                assert_int_equal(g->winner(&s), w);
                assert_int_equal(g->to_play(&s), ply % 2);
                if (w != RV_MCTS_GAME_NONE) {
                    assert_int_equal(k, 0);
                    assert_int_equal(w, (ply + 1) % 2); /* the last mover */
                    break;
                }
                assert_int_equal(k, n * n - ply);
                rv_mcts_move_t m = moves[rnd_below(k)];
                assert_int_equal(b.c[m / n][m % n], 0);
                g->apply(&s, m);
                memcpy(&before, &s, sizeof(s));
                g->apply(&s, m); /* occupied now */
                g->apply(&s, (rv_mcts_move_t)(n * n));
                assert_memory_equal(&s, &before, g->state_len(&s));
            }
        }
}

/* Playouts from the empty board and from random positions: the board
 * ends full with the stones it had, the mover has ceil(e/2) of the e
 * empty cells, exactly one side is connected and the playout says which. */
static void test_hex_playout_full(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_hex();
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    for (int n = 2; n <= MAXN; n++)
        for (int t = 0; t < 150; t++) {
            pos_t s;
            board_t b0, b1;
            hex_new(&s, n);
            for (int p = rnd_below(n * n / 2 + 1); p > 0; p--) {
                int k = g->legal_moves(&s, moves);
                if (k > 0)
                    g->apply(&s, moves[rnd_below(k)]);
            }
            read_hex(&s, &b0);
            int mover = g->to_play(&s) + 1, was = g->winner(&s), empty = 0;
            uint64_t rng = rnd() | 1, rng0 = rng;
            int w = g->playout(&s, &rng);
            read_hex(&s, &b1);
            int got[3] = {0, 0, 0};
            for (int r = 0; r < n; r++)
                for (int c = 0; c < n; c++) {
                    if (b0.c[r][c] == 0)
                        empty++, got[b1.c[r][c]]++;
                    else
                        assert_int_equal(b1.c[r][c], b0.c[r][c]);
                }
            if (was != RV_MCTS_GAME_NONE) {
                assert_int_equal(w, was);
                continue;
            }
            assert_int_equal(got[0], 0);
            assert_int_equal(got[mover], (empty + 1) / 2);
            assert_int_equal(judge_connects(&b1, 1) + judge_connects(&b1, 2),
                             1);
            assert_int_equal(w, judge(&b1));
            assert_true(rng != rng0 || empty < 2);
        }
}

/*
 * Random fills of the empty board: on odd sizes black gets one stone
 * more and wins clearly more often (measured over 2e6 playouts: 3x3
 * 0.667, 5x5 0.573, 7x7 0.544, 9x9 0.531, 11x11 0.524); on even sizes
 * both get as many and swapping the colours with the long diagonal maps
 * black's wins onto white's, so it is one half. 60000 playouts give a
 * standard deviation near 0.002: each bound is over four of them from
 * the measured rate and as far from one half.
 */
static void test_hex_first_player(void **state)
{
    (void)state;
    static const double above[12] = {
        [3] = 0.65, [5] = 0.56, [7] = 0.535, [9] = 0.521, [11] = 0.515};
    const rv_mcts_game_t *g = rv_mcts_hex();
    const int runs = 60000;
    uint64_t rng = 0x243f6a8885a308d3ull;
    for (int n = 3; n <= 11; n++) {
        pos_t empty, s;
        hex_new(&empty, n);
        int black = 0;
        for (int i = 0; i < runs; i++) {
            memcpy(&s, &empty, g->state_len(&empty));
            black += g->playout(&s, &rng) == RV_MCTS_GAME_FIRST;
        }
        double rate = (double)black / runs;
        print_message("%2dx%-2d black wins %.4f of random playouts\n", n, n,
                      rate);
        if (n % 2)
            assert_true(rate > above[n]);
        else
            assert_true(rate > 0.49 && rate < 0.51);
    }
}

/* ---------------------------------------------------------------------- */
/* Notation, hashes, the interface's edges                                 */

static void expect_refused(const rv_mcts_game_t *g, const void *s, const char *text,
                           const char *why_has)
{
    char why[128] = "";
    rv_mcts_move_t m = 999;
    assert_int_equal(g->move_parse(s, text, &m, why, sizeof(why)),
                     RV_ERR_INVALID);
    assert_int_equal(m, 999);
    if (strstr(why, why_has) == NULL)
        fail_msg("'%s': '%s' does not say '%s'", text, why, why_has);
    assert_int_equal(g->move_parse(s, text, &m, NULL, 0), RV_ERR_INVALID);
}

static void test_hex_notation(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_hex();
    char text[16], upper[24];
    rv_mcts_move_t m;
    for (int n = 2; n <= MAXN; n++) {
        pos_t s;
        hex_new(&s, n);
        assert_int_equal(rv_mcts_hex_size(&s), n);
        for (int i = 0; i < n * n; i++) {
            g->move_text(&s, (rv_mcts_move_t)i, text, sizeof(text));
            char want[8];
            snprintf(want, sizeof(want), "%c%d", 'a' + i % n, i / n + 1);
            assert_string_equal(text, want);
            assert_int_equal(g->move_parse(&s, text, &m, NULL, 0), RV_OK);
            assert_int_equal(m, i);
            snprintf(upper, sizeof(upper), " %c%s\n", text[0] - 'a' + 'A',
                     text + 1);
            assert_int_equal(g->move_parse(&s, upper, &m, NULL, 0), RV_OK);
            assert_int_equal(m, i);
        }
    }
    pos_t s;
    hex_new(&s, 5);
    assert_string_equal(g->move_text(&s, 24, text, sizeof(text)), "e5");
    static const char *const malformed[] = {
        "", "c", "3", "3c", "c3x", "cc3", "c03", "c 3", "-1", "c12345"};
    for (size_t i = 0; i < sizeof(malformed) / sizeof(*malformed); i++)
        expect_refused(g, &s, malformed[i],
                       "wrong notation: expected a cell like c3");
    expect_refused(g, &s, NULL, "wrong notation");
    expect_refused(g, &s, "z9", "cell z9 is off the 5x5 board");
    expect_refused(g, &s, "F1", "cell f1 is off the 5x5 board");
    expect_refused(g, &s, "a6", "cell a6 is off the 5x5 board");
    expect_refused(g, &s, "a0", "cell a0 is off the 5x5 board");
    assert_int_equal(g->move_parse(&s, "C3", &m, NULL, 0), RV_OK);
    g->apply(&s, m);
    expect_refused(g, &s, "c3", "cell c3 is occupied");
    static const char *const win[] = {"a2", "a1", "b2", "b1", "c2",
                                      "c1", "d2", "d1", "e2"};
    for (int i = 0; i < 9; i++) {
        assert_int_equal(g->move_parse(&s, win[i], &m, NULL, 0), RV_OK);
        g->apply(&s, m);
    }
    assert_int_equal(g->winner(&s), RV_MCTS_GAME_SECOND); /* row 2 */
    expect_refused(g, &s, "e5", "the game is over: white has won");

    for (int n = -1; n <= 25; n++)
        if (n < 2 || n > MAXN)
            assert_int_equal(rv_mcts_hex_init(&s, n), RV_ERR_INVALID);
    assert_int_equal(rv_mcts_hex_init(NULL, 5), RV_ERR_INVALID);
    pos_t a, b;
    hex_new(&a, 2);
    for (int n = 3; n <= MAXN; n++) {
        hex_new(&b, n);
        assert_int_equal(g->state_len(&b) - g->state_len(&a), 2 * n - 1);
        assert_true(g->state_len(&b) <= g->state_max);
        a = b;
    }
    assert_string_equal(g->name, "hex");
    assert_non_null(g->print);
}

/* The first rows of the drawing of a position, for a person. */
static void test_hex_print(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_hex();
    pos_t s;
    hex_new(&s, 3);
    g->apply(&s, 4);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    g->print(&s, f);
    fclose(f);
    assert_string_equal(text, "   a  b  c\n"
                              " 1\\.  .  .\\1\n"
                              "  2\\.  X  .\\2\n"
                              "   3\\.  .  .\\3\n"
                              "     a  b  c\n"
                              "X (black) joins top and bottom, O (white) left "
                              "and right: O (white) to move\n");
    free(text);
}

static void test_hex_hash(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_hex();
    enum { MAXH = 40000 };
    uint64_t *seen = malloc(MAXH * sizeof(*seen));
    int nseen = 0;
    /* Black a1 c3, white b2 d4, in two orders: one position. */
    pos_t x, y;
    hex_new(&x, 5);
    hex_new(&y, 5);
    static const rv_mcts_move_t xo[4] = {0, 6, 12, 18}, yo[4] = {12, 18, 0, 6};
    for (int i = 0; i < 4; i++) {
        g->apply(&x, xo[i]);
        g->apply(&y, yo[i]);
    }
    assert_int_equal(g->hash(&x), g->hash(&y));
    assert_memory_equal(&x, &y, g->state_len(&x));
    /* Every position of up to two stones on sizes 2..7, and the empty
     * boards: all different, so all hashes should be. */
    for (int n = 2; n <= 7; n++) {
        pos_t e, one, two;
        hex_new(&e, n);
        seen[nseen++] = g->hash(&e);
        for (int i = 0; i < n * n; i++) {
            memcpy(&one, &e, sizeof(e));
            g->apply(&one, (rv_mcts_move_t)i);
            seen[nseen++] = g->hash(&one);
            for (int j = 0; j < n * n; j++) {
                if (j == i)
                    continue;
                memcpy(&two, &one, sizeof(one));
                g->apply(&two, (rv_mcts_move_t)j);
                seen[nseen++] = g->hash(&two);
            }
        }
    }
    assert_true(nseen <= MAXH);
    for (int i = 0; i < nseen; i++)
        for (int j = i + 1; j < nseen; j++)
            assert_true(seen[i] != seen[j]);
    free(seen);
}

static bool has_move(const rv_mcts_move_t *moves, int n, rv_mcts_move_t m)
{
    for (int i = 0; i < n; i++)
        if (moves[i] == m)
            return true;
    return false;
}

static void test_hex_swap(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_hex();
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES], m;
    char why[128], text[16];
    pos_t s, off;
    board_t b;
    hex_new(&s, 5);
    assert_false(rv_mcts_hex_swap(&s));
    memcpy(&off, &s, sizeof(s));
    assert_int_equal(rv_mcts_hex_set_swap(&s, true), RV_OK);
    assert_true(rv_mcts_hex_swap(&s));
    /* The rule is part of the position. */
    assert_true(g->hash(&s) != g->hash(&off));
    /* Not on the empty board; after black's b4 (row 4, column b: cell
     * 16), white may swap where the rule holds, and only there. */
    assert_false(has_move(moves, g->legal_moves(&s, moves), RV_MCTS_HEX_SWAP));
    assert_int_equal(g->move_parse(&s, "swap-pieces", &m, why, sizeof(why)),
                     RV_ERR_INVALID);
    g->apply(&s, 16);
    g->apply(&off, 16);
    assert_int_equal(g->legal_moves(&s, moves), 25);
    assert_true(has_move(moves, 25, RV_MCTS_HEX_SWAP));
    assert_false(has_move(moves, g->legal_moves(&off, moves), RV_MCTS_HEX_SWAP));
    assert_int_equal(g->move_parse(&off, "swap-pieces", &m, why, sizeof(why)),
                     RV_ERR_INVALID);
    assert_string_equal(why, "the swap rule is off");
    g->apply(&off, RV_MCTS_HEX_SWAP); /* illegal there: nothing changes */
    assert_int_equal(g->to_play(&off), 1);
    assert_int_equal(g->move_parse(&s, "Swap-Pieces", &m, why, sizeof(why)),
                     RV_OK);
    assert_int_equal(m, RV_MCTS_HEX_SWAP);
    assert_string_equal(g->move_text(&s, m, text, sizeof(text)), "swap-pieces");
    /* The swap: a white stone on d2 (row 2, column d), none on b4, black
     * to move, and no second swap. */
    g->apply(&s, RV_MCTS_HEX_SWAP);
    read_hex(&s, &b);
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 5; c++)
            assert_int_equal(b.c[r][c], r == 1 && c == 3 ? 2 : 0);
    assert_int_equal(g->to_play(&s), 0);
    assert_int_equal(g->legal_moves(&s, moves), 24);
    assert_false(has_move(moves, 24, RV_MCTS_HEX_SWAP));
    g->apply(&s, 0);
    assert_false(has_move(moves, g->legal_moves(&s, moves), RV_MCTS_HEX_SWAP));
    /* On 3x3 black's b2 wins: the search swaps it. */
    rv_mcts_result_t *res = malloc(sizeof(*res));
    hex_new(&s, 3);
    rv_mcts_hex_set_swap(&s, true);
    g->apply(&s, 4);
    assert_int_equal(rv_mcts_uct_search(g, &s, 3000, 4, 1.0, 7, res), RV_OK);
    assert_int_equal(res->best, RV_MCTS_HEX_SWAP);
    free(res);
}

/* ---------------------------------------------------------------------- */
/* Tic-tac-toe                                                             */

static void ttt_play_text(const rv_mcts_game_t *g, void *s, const char *cell)
{
    rv_mcts_move_t m;
    char why[128];
    if (g->move_parse(s, cell, &m, why, sizeof(why)) != RV_OK)
        fail_msg("%s: %s", cell, why);
    play(g, s, m);
}

static void test_ttt_lines(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_tictactoe();
    static const int lines[8][3] = {{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {0, 3, 6},
                                    {1, 4, 7}, {2, 5, 8}, {0, 4, 8}, {2, 4, 6}};
    assert_true(g->state_max <= sizeof(pos_t));
    for (int l = 0; l < 8; l++)
        for (int who = 0; who < 2; who++) {
            /* The other side's marks: the first two free cells and the
             * last one, which make no line whichever line is left. */
            int other[3], need = who == 0 ? 2 : 3, k = 0;
            for (int c = 0; c < 9; c++)
                if (c != lines[l][0] && c != lines[l][1] && c != lines[l][2])
                    other[k < 2 ? k++ : 2] = c;
            pos_t s;
            rv_mcts_tictactoe_init(&s);
            for (int i = 0; i < 3 + need; i++) {
                assert_int_equal(g->winner(&s), RV_MCTS_GAME_NONE);
                int mine = (i % 2) == who;
                play(g, &s, (rv_mcts_move_t)(mine ? lines[l][i / 2] : other[i / 2]));
            }
            assert_int_equal(g->winner(&s), who);
            assert_true(g->is_terminal(&s));
            rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
            assert_int_equal(g->legal_moves(&s, moves), 0);
        }
    /* X b2, O a1, X c1, O a3, X a2, O c2, X b1, O b3, X c3: no line. */
    static const char *const draw[9] = {"b2", "a1", "c1", "a3", "a2",
                                        "c2", "b1", "b3", "C3"};
    pos_t s;
    rv_mcts_tictactoe_init(&s);
    for (int i = 0; i < 9; i++) {
        assert_int_equal(g->winner(&s), RV_MCTS_GAME_NONE);
        assert_int_equal(g->to_play(&s), i % 2);
        ttt_play_text(g, &s, draw[i]);
    }
    assert_int_equal(g->winner(&s), RV_MCTS_GAME_DRAW);
    expect_refused(g, &s, "b2", "the game is over: a draw");
    uint64_t rng = 7;
    assert_int_equal(g->playout(&s, &rng), RV_MCTS_GAME_DRAW);
}

static void test_ttt_notation_and_hash(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_tictactoe();
    pos_t s, t;
    char text[8];
    rv_mcts_move_t m;
    rv_mcts_tictactoe_init(&s);
    for (int i = 0; i < 9; i++) {
        g->move_text(&s, (rv_mcts_move_t)i, text, sizeof(text));
        assert_int_equal(text[0], 'a' + i % 3);
        assert_int_equal(atoi(text + 1), i / 3 + 1);
        assert_int_equal(g->move_parse(&s, text, &m, NULL, 0), RV_OK);
        assert_int_equal(m, i);
    }
    expect_refused(g, &s, "b", "wrong notation");
    expect_refused(g, &s, "2b", "wrong notation");
    expect_refused(g, &s, "d1", "cell d1 is off the 3x3 board");
    expect_refused(g, &s, "a4", "cell a4 is off the 3x3 board");
    ttt_play_text(g, &s, "b2");
    expect_refused(g, &s, "B2", "cell b2 is occupied");
    ttt_play_text(g, &s, "a1");
    ttt_play_text(g, &s, "c3");
    rv_mcts_tictactoe_init(&t);
    ttt_play_text(g, &t, "c3");
    ttt_play_text(g, &t, "a1");
    ttt_play_text(g, &t, "b2");
    assert_int_equal(g->hash(&s), g->hash(&t));
    assert_memory_equal(&s, &t, g->state_len(&s));
    ttt_play_text(g, &t, "c1");
    assert_true(g->hash(&s) != g->hash(&t));
    assert_string_equal(g->name, "tictactoe");
}

/* Random play from the empty board: X wins 0.585, O 0.288, a draw 0.127
 * (the exact rates of uniformly random tic-tac-toe). */
static void test_ttt_playout_stats(void **state)
{
    (void)state;
    const rv_mcts_game_t *g = rv_mcts_tictactoe();
    int count[3] = {0, 0, 0};
    const int runs = 40000;
    uint64_t rng = 0x13198a2e03707344ull;
    for (int i = 0; i < runs; i++) {
        pos_t s;
        rv_mcts_tictactoe_init(&s);
        int w = g->playout(&s, &rng);
        assert_true(w >= RV_MCTS_GAME_FIRST && w <= RV_MCTS_GAME_DRAW);
        assert_int_equal(g->winner(&s), w);
        count[w]++;
    }
    static const double expect[3] = {0.585, 0.288, 0.127};
    for (int w = 0; w < 3; w++) {
        double rate = (double)count[w] / runs;
        print_message("random tic-tac-toe: %.4f (exactly %.3f)\n", rate,
                      expect[w]);
        assert_true(rate > expect[w] - 0.012 && rate < expect[w] + 0.012);
    }
}

int main(void)
{
    rnd_state = 12345;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hex_lines),
        cmocka_unit_test(test_hex_steps_and_corners),
        cmocka_unit_test(test_hex_random_games),
        cmocka_unit_test(test_hex_playout_full),
        cmocka_unit_test(test_hex_first_player),
        cmocka_unit_test(test_hex_notation),
        cmocka_unit_test(test_hex_print),
        cmocka_unit_test(test_hex_hash),
        cmocka_unit_test(test_hex_swap),
        cmocka_unit_test(test_ttt_lines),
        cmocka_unit_test(test_ttt_notation_and_hash),
        cmocka_unit_test(test_ttt_playout_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
