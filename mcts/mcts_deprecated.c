/*
 * The tree search's names before rivet 0.2, kept for one minor release
 * (rv_mcts.h, CHANGELOG.md): each calls the function that replaced it, so
 * that programs built against the old names still link and run.
 */
#include "rv_mcts.h"

/* This file defines the deprecated functions; it does not use them. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

const rv_mcts_game_t *rv_game_hex(void)
{
    return rv_mcts_hex();
}

rv_status_t rv_hex_init(void *s, int n)
{
    return rv_mcts_hex_init(s, n);
}

int rv_hex_size(const void *s)
{
    return rv_mcts_hex_size(s);
}

const rv_mcts_game_t *rv_game_tictactoe(void)
{
    return rv_mcts_tictactoe();
}

void rv_tictactoe_init(void *s)
{
    rv_mcts_tictactoe_init(s);
}

rv_status_t rv_uct_search(const rv_mcts_game_t *game, const void *state,
                          uint64_t rollouts, int sims, double c, uint64_t seed,
                          rv_mcts_result_t *res)
{
    return rv_mcts_uct_search(game, state, rollouts, sims, c, seed, res);
}

rv_status_t rv_uct_tree_create(const rv_mcts_game_t *game, const void *state,
                               int sims, double c, uint64_t seed,
                               rv_mcts_uct_tree_t **tree)
{
    return rv_mcts_uct_tree_create(game, state, sims, c, seed, tree);
}

rv_status_t rv_uct_tree_search(rv_mcts_uct_tree_t *tree, uint64_t rollouts,
                               rv_mcts_result_t *res)
{
    return rv_mcts_uct_tree_search(tree, rollouts, res);
}

rv_status_t rv_uct_tree_play(rv_mcts_uct_tree_t *tree, rv_mcts_move_t m)
{
    return rv_mcts_uct_tree_play(tree, m);
}

void rv_uct_tree_destroy(rv_mcts_uct_tree_t *tree)
{
    rv_mcts_uct_tree_destroy(tree);
}
