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
    bool swap;           /* Hex: the swap rule holds */
    int top;             /* moves app_print_result prints */
    uint8_t start[1024]; /* the empty board */
    uint8_t state[1024]; /* the position now */
    rv_mcts_move_t history[RV_MCTS_MAX_MOVES];
    int nhistory;
} app_t;

/* A new game of @p size (Hex) on an empty board; RV_ERR_INVALID for a
 * size out of range. */
rv_status_t app_new_game(app_t *a, int size);
/* Turns Hex's swap rule on or off in the game, its moves so far kept
 * (RV_ERR_INVALID, nothing changed, for off when a swap was played), and
 * at the search's root. */
rv_status_t app_set_swap(app_t *a, bool on);
/* Plays @p m (legal) in the game and at the search's root. */
rv_status_t app_play(app_t *a, rv_mcts_move_t m);
/* Takes the last move back; RV_ERR_INVALID when there is none. */
rv_status_t app_undo(app_t *a);
/* Searches the position for a->rollouts rollouts or, when @p seconds is
 * above 0, for as many as fit in that time (the sequential baseline,
 * a->uct, has no clock and runs a->rollouts); res is the caller's. */
rv_status_t app_search(app_t *a, double seconds, rv_mcts_result_t *res);
/* Prints the @c top best moves of @p res and its rate. */
void app_print_result(const app_t *a, const rv_mcts_result_t *res, FILE *f);

/* The game's bookkeeping alone, with no search (rivet_mcts_game.c):
 * the start of a new game of @p size (RV_ERR_INVALID out of range);
 * @p m recorded as played (RV_ERR_INVALID, nothing changed, when the
 * history is full); the position after the history's first @p n moves;
 * Hex's swap rule on or off, as app_set_swap says. */
rv_status_t app_game_reset(app_t *a, int size);
rv_status_t app_game_record(app_t *a, rv_mcts_move_t m);
void app_game_replay(app_t *a, int n);
rv_status_t app_game_set_swap(app_t *a, bool on);

/* An integer key of the job's configuration, or @p def. */
int64_t app_config_int(rv_context_t *ctx, const char *key, int64_t def);

/* A player's clock under GTP's time controls (rivet_mcts_clock.c). */
typedef struct gtp_clock {
    bool timed;        /* time_settings set a limit */
    double main_s;     /* main time */
    double byo_s;      /* a byo-yomi period (0: absolute time) */
    int byo_stones;    /* the moves a period is for */
    double left_s;     /* main time left, or the period's */
    int stones;        /* 0: in main time; else moves left in the period */
    double overhead_s; /* a genmove's time beside its search, lately */
} gtp_clock_t;

/* time_settings: both players' clocks start anew. */
void clock_settings(gtp_clock_t clocks[2], double main_s, double byo_s,
                    int byo_stones);
/* time_left: what the controller's clock shows for one player. */
void clock_left(gtp_clock_t *k, double left_s, int stones);
/* The seconds the next move may take with @p empty cells left to play
 * (0 for a clock already overdrawn); below 0 when the clock sets no
 * limit. */
double clock_budget(const gtp_clock_t *k, int empty);
/* The search's share of a move's @p budget, the rest kept for what a
 * genmove does beside it. */
double clock_search_time(gtp_clock_t *k, double budget);
/* A move took @p spent_s, of which @p searched_s were the search's
 * budget: the clock runs down and the overhead is learnt. */
void clock_spend(gtp_clock_t *k, double spent_s);
void clock_overhead(gtp_clock_t *k, double spent_s, double searched_s);

/* Speaks GTP on @p in / @p out until quit or the end of @p in. */
int gtp_run(app_t *a, FILE *in, FILE *out);

#endif
