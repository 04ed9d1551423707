/*
 * rivet-mcts's game, shared by its modes (rivet_mcts_main.c) and its GTP
 * engine (rivet_mcts_gtp.c): each change of the game (rivet_mcts_game.c)
 * made at the distributed search's root too, and the search of it, on
 * worker 0 of the job.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rivet_mcts.h"
#include "rv_config.h"

rv_status_t app_new_game(app_t *a, int size)
{
    rv_status_t st = app_game_reset(a, size);
    return st != RV_OK ? st : rv_mcts_position(a->w, a->state);
}

rv_status_t app_play(app_t *a, rv_mcts_move_t m)
{
    /* The search refuses an illegal move before the game records it. */
    rv_status_t st = rv_mcts_play(a->w, m);
    return st != RV_OK ? st : app_game_record(a, m);
}

rv_status_t app_undo(app_t *a)
{
    if (a->nhistory == 0)
        return RV_ERR_INVALID;
    app_game_replay(a, a->nhistory - 1);
    return rv_mcts_position(a->w, a->state);
}

rv_status_t app_set_swap(app_t *a, bool on)
{
    rv_status_t st = app_game_set_swap(a, on);
    return st != RV_OK ? st : rv_mcts_position(a->w, a->state);
}

int64_t app_config_int(rv_context_t *ctx, const char *key, int64_t def)
{
    int64_t v = def;
    rv_config_get_int(rv_context_config(ctx), key, &v);
    return v;
}

static double config_c(rv_context_t *ctx)
{
    char buf[64];
    if (rv_config_get(rv_context_config(ctx), "mcts.c", buf, sizeof(buf)) !=
        RV_OK)
        return 1.0;
    return strtod(buf, NULL);
}

rv_status_t app_search(app_t *a, double seconds, rv_mcts_result_t *res)
{
    if (!a->uct && seconds > 0)
        return rv_mcts_search_timed(a->w, RV_MCTS_ROLLOUTS_UNBOUNDED, seconds,
                                    res);
    if (!a->uct)
        return rv_mcts_search(a->w, a->rollouts, res);
    /* The plain sequential UCT with the same playouts, in this thread:
     * the framework's baseline. */
    rv_context_t *ctx = rv_worker_context(a->w);
    uint64_t n =
        a->rollouts
            ? a->rollouts
            : (uint64_t)app_config_int(ctx, "mcts.rollouts_per_move", 20000);
    uint64_t seed = (uint64_t)app_config_int(ctx, "mcts.seed", 0);
    return rv_mcts_uct_search(
        a->game, a->state, n,
        (int)app_config_int(ctx, "mcts.simulations_per_leaf", 16),
        config_c(ctx), seed ? seed : 0x9e3779b97f4a7c15ull, res);
}

void app_print_result(const app_t *a, const rv_mcts_result_t *res, FILE *f)
{
    char cell[16];
    fprintf(f, "%-6s %10s %9s\n", "move", "visits", "win rate");
    for (int i = 0; i < res->nmoves && i < a->top; i++) {
        const rv_mcts_edge_t *m = &res->moves[i];
        fprintf(f, "%-6s %10" PRIu64 " %8.1f%%\n",
                a->game->move_text(a->state, m->move, cell, sizeof(cell)),
                m->visits, 100.0 * m->win_rate);
    }
    fprintf(f,
            "%" PRIu64 " rollouts in %.3f s: %.0f rollouts/s; %" PRIu64
            " nodes, %" PRIu64 " selections deferred\n",
            res->rollouts, res->seconds,
            res->seconds > 0 ? (double)res->rollouts / res->seconds : 0.0,
            res->nodes, res->deferred);
}
