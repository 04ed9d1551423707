/*
 * The search layer's configuration table (mcts.*), registered with core
 * when librivet is loaded; see rv_config.h for the conventions of a table.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "mcts_config.h"

#define OFF(_member) offsetof(rv_mcts_config_t, _member)

static bool c_value(const char *text, double *c)
{
    char *end;
    errno = 0;
    *c = strtod(text, &end);
    return end != text && *end == '\0' && errno == 0 && *c >= 0 && !isinf(*c);
}

static bool check_c(const char *text, char *why, size_t why_len)
{
    double c;
    if (c_value(text, &c))
        return true;
    snprintf(why, why_len, "'%s' is not a number of 0 or more (e.g. 1.0)",
             text);
    return false;
}

rv_status_t mcts_parse_c(const char *text, double *c)
{
    char why[128];
    if (c_value(text, c))
        return RV_OK;
    check_c(text, why, sizeof(why));
    rv_error("mcts.c: %s", why);
    return RV_ERR_CONFIG;
}

static const rv_config_field_t mcts_fields[] = {
    {
        .name = "owner",
        .type = RV_CFG_ENUM,
        .offset = OFF(owner),
        .def = "random",
        .values = "random|hash",
        .help = "Who owns a new node: a worker chosen uniformly at random, "
                "or the worker its position's Zobrist hash names (equal "
                "positions are then one node: a transposition table "
                "sharded across the job).",
    },
    {
        .name = "c",
        .type = RV_CFG_STRING,
        .offset = OFF(c),
        .def = "\"1.0\"",
        .help = "UCB1's exploration constant, a decimal number of 0 or "
                "more.",
        .check = check_c,
    },
    {
        .name = "simulations_per_leaf",
        .type = RV_CFG_INT,
        .offset = OFF(simulations_per_leaf),
        .def = "16",
        .min = 1,
        .max = 4096,
        .help = "Random playouts run from each new leaf.",
    },
    {
        .name = "rollouts_per_move",
        .type = RV_CFG_INT,
        .offset = OFF(rollouts_per_move),
        .def = "20000",
        .min = 1,
        .max = INT64_MAX,
        .help = "Rollouts of a search when the program does not say.",
    },
    {
        .name = "remote_only",
        .type = RV_CFG_BOOL,
        .offset = OFF(remote_only),
        .def = "false",
        .help = "Move between nodes of one process by calls too, instead "
                "of entering them directly (Seriema's overhead "
                "experiment).",
    },
    {
        .name = "inflight",
        .type = RV_CFG_INT,
        .offset = OFF(inflight),
        .def = "32",
        .min = 1,
        .max = 1 << 20,
        .help = "Rollouts in flight at once per worker of the job: more "
                "keeps the workers busy, fewer lets each selection see "
                "more finished results.",
    },
    {
        .name = "size",
        .type = RV_CFG_INT,
        .offset = OFF(size),
        .def = "11",
        .min = 2,
        .max = 19,
        .help = "rivet-mcts: the Hex board's size when --size is not "
                "given.",
    },
    {
        .name = "seed",
        .type = RV_CFG_INT,
        .offset = OFF(seed),
        .def = "0",
        .min = 0,
        .max = INT64_MAX,
        .help = "Seed of the workers' random generators (each worker adds "
                "its id); 0 takes one from the clock.",
    },
    {.name = NULL},
};

static const rv_config_table_t mcts_config_table = {
    .prefix = MCTS_CONFIG_PREFIX,
    .help = "The distributed Monte-Carlo tree search: node owners, UCB1, "
            "playouts per leaf, rollouts per move.",
    .fields = mcts_fields,
    .size = sizeof(rv_mcts_config_t),
};

RV_CONFIG_REGISTER_TABLE(mcts_config_table)
