/*
 * rivet-mcts's game bookkeeping: the position, the board it started from
 * and the moves played since, with no search and no job. rivet_mcts_app.c
 * moves the distributed search's root with each change; the GTP fuzz
 * target links this file alone and keeps the same game on one process.
 */
#include <string.h>

#include "rivet_mcts.h"

rv_status_t app_game_reset(app_t *a, int size)
{
    if (a->game == rv_mcts_hex()) {
        if (rv_mcts_hex_init(a->start, size) != RV_OK)
            return RV_ERR_INVALID;
        rv_mcts_hex_set_swap(a->start, a->swap);
        a->size = size;
    } else {
        rv_mcts_tictactoe_init(a->start);
    }
    memcpy(a->state, a->start, a->game->state_max);
    a->nhistory = 0;
    return RV_OK;
}

rv_status_t app_game_record(app_t *a, rv_mcts_move_t m)
{
    if (a->nhistory == RV_MCTS_MAX_MOVES)
        return RV_ERR_INVALID;
    a->game->apply(a->state, m);
    a->history[a->nhistory++] = m;
    return RV_OK;
}

void app_game_replay(app_t *a, int n)
{
    a->nhistory = n;
    memcpy(a->state, a->start, a->game->state_max);
    for (int i = 0; i < a->nhistory; i++)
        a->game->apply(a->state, a->history[i]);
}

rv_status_t app_game_set_swap(app_t *a, bool on)
{
    if (a->game != rv_mcts_hex())
        return RV_ERR_INVALID;
    /* A swap played cannot be unplayed by a rule turned off. */
    for (int i = 0; !on && i < a->nhistory; i++)
        if (a->history[i] == RV_MCTS_HEX_SWAP)
            return RV_ERR_INVALID;
    a->swap = on;
    rv_mcts_hex_set_swap(a->start, on);
    app_game_replay(a, a->nhistory);
    return RV_OK;
}
