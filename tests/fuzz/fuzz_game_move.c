/*
 * Fuzz target: the games' move parsers (Hex's cells such as c3, and
 * tic-tac-toe's), which read what a person types at rivet-mcts's prompt
 * and what a GTP controller sends with `play`.
 *
 * The input is: a byte choosing the game and the Hex board's size, a
 * count of moves played at random from the empty board (each chosen by
 * one more byte) to reach a position, then the text, NUL-terminated as
 * the callers give it. A move the parser accepts must be legal in the
 * position, and the game's own notation of it must read back as it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rv_mcts.h"

#define STATE_MAX 1024
#define WHY_MAX 128
#define CELL_MAX 16

/* Plays @p n moves chosen by the input from the empty board. */
static void reach(const rv_mcts_game_t *g, void *s, fuzz_in_t *in, int n)
{
    rv_mcts_move_t legal[RV_MCTS_MAX_MOVES];

    for (int i = 0; i < n; i++) {
        int k = g->legal_moves(s, legal);
        if (k == 0)
            return;
        g->apply(s, legal[fuzz_u16(in) % k]);
    }
}

static bool is_legal(const rv_mcts_game_t *g, const void *s, rv_mcts_move_t m)
{
    rv_mcts_move_t legal[RV_MCTS_MAX_MOVES];
    int k = g->legal_moves(s, legal);

    for (int i = 0; i < k; i++)
        if (legal[i] == m)
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uint8_t first = fuzz_u8(&in);
    const rv_mcts_game_t *g = first & 1 ? rv_mcts_tictactoe() : rv_mcts_hex();
    uint8_t state[STATE_MAX];
    char why[WHY_MAX], cell[CELL_MAX], *text;
    rv_mcts_move_t m, again;

    if (g->state_max > sizeof(state))
        abort();
    if (g == rv_mcts_hex())
        rv_mcts_hex_init(state, 2 + (first >> 1) % (RV_MCTS_HEX_MAX - 1));
    else
        rv_mcts_tictactoe_init(state);
    reach(g, state, &in, fuzz_u8(&in));

    text = fuzz_string(in.p, in.left);
    why[0] = '\0';
    if (g->move_parse(state, text, &m, why, sizeof(why)) == RV_OK) {
        if (!is_legal(g, state, m)) {
            fprintf(stderr, "'%s' parsed as move %d, which is not legal\n",
                    text, (int)m);
            abort();
        }
        g->move_text(state, m, cell, sizeof(cell));
        if (g->move_parse(state, cell, &again, why, sizeof(why)) != RV_OK ||
            again != m) {
            fprintf(stderr, "move %d, written '%s', does not read back\n",
                    (int)m, cell);
            abort();
        }
    } else if (why[0] == '\0') {
        fprintf(stderr, "'%s' refused without a reason\n", text);
        abort();
    }
    fuzz_free((uint8_t *)text, in.left + 1);
    return 0;
}
