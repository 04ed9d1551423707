/*
 * rivet-mcts, the program: the game a person or a GTP controller plays
 * against the distributed search (rivet_mcts_app.c, used by the modes of
 * rivet_mcts_main.c and the GTP engine of rivet_mcts_gtp.c).
 */
#ifndef RIVET_MCTS_APP_H
#define RIVET_MCTS_APP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "rv_mcts.h"

/* The game being played, kept by the controller (worker 0). */
typedef struct app {
    const rv_mcts_game_t *game;
    rv_worker_t *w;
    int size;            /* Hex: the board's size */
    uint64_t rollouts;   /* per move (0: mcts.rollouts_per_move) */
    double resign_below; /* genmove resigns under this win rate */
    bool uct;            /* search with the sequential baseline */
    int top;             /* moves app_print_result prints */
    uint8_t start[1024]; /* the empty board */
    uint8_t state[1024]; /* the position now */
    rv_mcts_move_t history[RV_MCTS_MAX_MOVES];
    int nhistory;
} app_t;

/* A new game of @p size (Hex) on an empty board; RV_ERR_INVALID for a
 * size out of range. */
rv_status_t app_new_game(app_t *a, int size);
/* Plays @p m (legal) in the game and at the search's root. */
rv_status_t app_play(app_t *a, rv_mcts_move_t m);
/* Takes the last move back; RV_ERR_INVALID when there is none. */
rv_status_t app_undo(app_t *a);
/* Searches the position; res is the caller's. */
rv_status_t app_search(app_t *a, rv_mcts_result_t *res);
/* Prints the @c top best moves of @p res and its rate. */
void app_print_result(const app_t *a, const rv_mcts_result_t *res, FILE *f);

/* An integer key of the job's configuration, or @p def. */
int64_t app_config_int(rv_context_t *ctx, const char *key, int64_t def);

/* Speaks GTP on @p in / @p out until quit or the end of @p in. */
int gtp_run(app_t *a, FILE *in, FILE *out);

#endif
