/*
 * The search layer's configuration keys (mcts.*): its struct, filled by
 * core's loader from the table in mcts_config.c.
 */
#ifndef RIVET_MCTS_CONFIG_H
#define RIVET_MCTS_CONFIG_H

#include <stdbool.h>

#include "rivet.h"
#include "rv_config.h"

#define MCTS_CONFIG_PREFIX "mcts"

/* mcts.owner: who owns a new child. */
typedef enum mc_owner_mode {
    MC_OWNER_RANDOM, /* a worker of the job, uniformly at random */
    MC_OWNER_HASH,   /* the worker its position's hash names */
} mc_owner_mode_t;

/* The effective mcts.* keys of a job. */
typedef struct rv_mcts_config {
    mc_owner_mode_t owner;
    char c[RV_CONFIG_STR_MAX]; /* a decimal number */
    int64_t simulations_per_leaf;
    int64_t rollouts_per_move;
    bool remote_only;
    int64_t inflight;
    int64_t size;
    int64_t seed;
} rv_mcts_config_t;

/* The mcts.* keys of @p ctx's configuration. */
/* mcts.c as a number: RV_OK, or RV_ERR_CONFIG (logged) for text that is
 * not a finite decimal number of 0 or more. */
rv_status_t mcts_parse_c(const char *text, double *c);

static inline const rv_mcts_config_t *mcts_config(const rv_context_t *ctx)
{
    return rv_config_component(rv_context_config(ctx), MCTS_CONFIG_PREFIX);
}

#endif
