/*
 * Fuzz target: rivet-mcts's GTP command parser (mcts/rivet_mcts_gtp.c), as
 * a controller (HexGui, a tournament script) drives it through stdin: any
 * bytes, lines of any length, ids, comments, control characters, every
 * command with any arguments. Moves reach the games' parsers through
 * `play`.
 *
 * The first byte chooses the game (Hex or tic-tac-toe) and the Hex board's
 * size; the rest is the stream. The program's game functions (app_*),
 * which also move the distributed search's root in rivet-mcts, are here
 * its game's bookkeeping alone (rivet_mcts_game.c), on one process. genmove is answered by the sequential
 * UCT search (a few rollouts) on tic-tac-toe, and on Hex by a result made
 * from the legal moves, as the search would rank them: the parser and what
 * GTP prints of a result are under test here, not the search, whose
 * rollouts on a large Hex board took most of each input's time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "rivet_mcts.h"

#define SEARCH_ROLLOUTS 8
#define SEARCH_SEED 0x9e3779b97f4a7c15ull

static FILE *devnull;

/* ---------------------------------------------------------------------- */
/* rivet-mcts's game, on one process                                       */

rv_status_t app_new_game(app_t *a, int size)
{
    return app_game_reset(a, size);
}

rv_status_t app_play(app_t *a, rv_mcts_move_t m)
{
    rv_mcts_move_t legal[RV_MCTS_MAX_MOVES];
    int n = a->game->legal_moves(a->state, legal);

    /* The search refuses a move that is not legal; so does this one. */
    for (int i = 0; i < n; i++)
        if (legal[i] == m)
            return app_game_record(a, m);
    return RV_ERR_INVALID;
}

rv_status_t app_undo(app_t *a)
{
    if (a->nhistory == 0)
        return RV_ERR_INVALID;
    app_game_replay(a, a->nhistory - 1);
    return RV_OK;
}

rv_status_t app_set_swap(app_t *a, bool on)
{
    return app_game_set_swap(a, on);
}

rv_status_t app_search(app_t *a, double seconds, rv_mcts_result_t *res)
{
    (void)seconds; /* the clock's arithmetic is under test, not its time */
    rv_mcts_move_t legal[RV_MCTS_MAX_MOVES];
    int n;

    if (a->game != rv_mcts_hex())
        return rv_mcts_uct_search(a->game, a->state, SEARCH_ROLLOUTS, 1, 1.0,
                             SEARCH_SEED, res);
    /* Every legal move, fewer visits further down the list, as the
     * search returns them. */
    n = a->game->legal_moves(a->state, legal);
    memset(res, 0, sizeof(*res));
    res->nmoves = n;
    for (int i = 0; i < n; i++)
        res->moves[i] = (rv_mcts_edge_t){
            .move = legal[i], .visits = (uint64_t)(n - i), .win_rate = 0.5};
    res->best = n > 0 ? legal[0] : 0;
    res->rollouts = res->root_visits = (uint64_t)n;
    res->nodes = (uint64_t)n + 1;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    devnull = fopen("/dev/null", "w");
    if (devnull == NULL)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uint8_t first = fuzz_u8(&in);
    app_t *a = calloc(1, sizeof(*a));
    FILE *stream;

    if (devnull == NULL)
        LLVMFuzzerInitialize(NULL, NULL);
    if (a == NULL)
        abort();
    a->game = first & 1 ? rv_mcts_tictactoe() : rv_mcts_hex();
    if (app_new_game(a, 2 + (first >> 1) % (RV_MCTS_HEX_MAX - 1)) != RV_OK)
        abort();
    /* fmemopen refuses an empty buffer; an empty stream is nothing to
     * read anyway. */
    if (in.left > 0) {
        stream = fmemopen((void *)in.p, in.left, "r");
        if (stream == NULL)
            abort();
        gtp_run(a, stream, devnull);
        fclose(stream);
    }
    free(a);
    return 0;
}
