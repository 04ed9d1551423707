/*
 * The sequential UCT baseline (Kocsis and Szepesvari 2006): the search
 * the distributed one is measured against, in one thread, through the
 * game's callbacks only.
 *
 * A rollout walks down from the root, choosing at each node whose
 * children all exist the edge of highest UCB1 value
 *   wins / (visits * sims) + c * sqrt(ln(node visits) / visits),
 * until it reaches a node with a move not yet tried: it creates that
 * child, runs @c sims playouts from it and adds the outcome to every
 * edge of its path, each edge counting the points of the player who made
 * its move (1 a win, 1/2 a draw). A rollout that ends on a finished game
 * counts that game's result for all @c sims playouts.
 *
 * Edge statistics are held by the parent, as in the distributed tree.
 * A node keeps only the edges it has expanded (a growing array) and the
 * moves it has not tried, so that a tree of a million nodes on 11x11 Hex
 * costs tens of megabytes rather than the gigabytes of full edge arrays.
 *
 * A tree can outlive one search (rv_uct_tree_*): playing a move keeps the
 * chosen child's subtree, with its statistics, as the new root and frees
 * the rest, as rv_mcts_play does for the distributed tree, so that the
 * two engines can be compared with the same reuse. rv_mcts_uct_search is one
 * search on a tree of its own.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcts_rng.h"
#include "rv_mcts.h"

struct uct_node;

typedef struct uct_edge {
    struct uct_node *child;
    uint64_t visits;
    double wins; /* the mover's points, over visits * sims playouts */
    rv_mcts_move_t move;
} uct_edge_t;

typedef struct uct_node {
    struct uct_node *parent;
    int parent_edge; /* this node's edge in parent->edges */
    int to_play;     /* the player to move here */
    int winner;      /* RV_MCTS_GAME_NONE unless the game is over here */
    int nedges, cap; /* expanded edges, and room for them */
    uct_edge_t *edges;
    uint64_t visits; /* the edges' visits, summed */
    int nuntried;
    rv_mcts_move_t untried[]; /* legal moves not yet expanded */
} uct_node_t;

struct rv_mcts_uct_tree {
    const rv_mcts_game_t *game;
    int sims;
    double c;
    uint64_t rng;
    uint64_t nodes; /* alive */
    void *walk;     /* the position of the node a rollout is at */
    void *sim;      /* a playout's scratch copy */
    uct_node_t *root;
    void *root_state; /* the root's position */
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
};

/* A node for position @p state reached through edge @p edge of
 * @p parent (NULL for the root); NULL when out of memory. */
static uct_node_t *uct_node_new(rv_mcts_uct_tree_t *u, const void *state,
                                uct_node_t *parent, int edge)
{
    const rv_mcts_game_t *g = u->game;
    int winner = g->winner(state);
    int n = winner == RV_MCTS_GAME_NONE ? g->legal_moves(state, u->moves) : 0;
    /* A game that is not over must have a move; one that breaks that
     * rule is scored as a draw rather than walked into. */
    if (n == 0 && winner == RV_MCTS_GAME_NONE)
        winner = RV_MCTS_GAME_DRAW;
    uct_node_t *node =
        malloc(sizeof(*node) + (size_t)n * sizeof(rv_mcts_move_t));
    if (node == NULL)
        return NULL;
    *node = (uct_node_t){.parent = parent,
                         .parent_edge = edge,
                         .to_play = g->to_play(state),
                         .winner = winner,
                         .nuntried = n};
    memcpy(node->untried, u->moves, (size_t)n * sizeof(rv_mcts_move_t));
    u->nodes++;
    return node;
}

/* Frees @p node and its subtree but for a child detached from it (its
 * edge's child set to NULL). */
static void uct_node_free(rv_mcts_uct_tree_t *u, uct_node_t *node)
{
    for (int i = 0; i < node->nedges; i++)
        if (node->edges[i].child != NULL)
            uct_node_free(u, node->edges[i].child);
    free(node->edges);
    free(node);
    u->nodes--;
}

/* The edge of @p node of highest UCB1 value (every edge has a visit). */
static int uct_select(const rv_mcts_uct_tree_t *u, const uct_node_t *node)
{
    double log_n = log((double)node->visits), best_value = -1.0;
    int best = 0;
    for (int i = 0; i < node->nedges; i++) {
        const uct_edge_t *e = &node->edges[i];
        double v = (double)e->visits;
        double value = e->wins / (v * u->sims) + u->c * sqrt(log_n / v);
        if (value > best_value) {
            best_value = value;
            best = i;
        }
    }
    return best;
}

/* Creates a child of @p node for one of its untried moves, drawn at
 * random so that a search cut short has not favoured the first moves.
 * u->walk moves to the child's position. NULL when out of memory. */
static uct_node_t *uct_expand(rv_mcts_uct_tree_t *u, uct_node_t *node)
{
    if (node->nedges == node->cap) {
        int cap = node->cap ? 2 * node->cap : 4;
        uct_edge_t *edges = realloc(node->edges, (size_t)cap * sizeof(*edges));
        if (edges == NULL)
            return NULL;
        node->edges = edges;
        node->cap = cap;
    }
    int j = (int)mc_rng_below(&u->rng, (uint32_t)node->nuntried);
    rv_mcts_move_t m = node->untried[j];
    u->game->apply(u->walk, m);
    uct_node_t *child = uct_node_new(u, u->walk, node, node->nedges);
    if (child == NULL)
        return NULL;
    node->untried[j] = node->untried[--node->nuntried];
    node->edges[node->nedges++] = (uct_edge_t){.child = child, .move = m};
    return child;
}

/* Counts the outcomes of u->sims playouts from @p leaf (u->walk) into
 * @p outcome, indexed by RV_MCTS_GAME_FIRST, _SECOND and _DRAW. */
static void uct_simulate(rv_mcts_uct_tree_t *u, const uct_node_t *leaf,
                         uint64_t outcome[3])
{
    if (leaf->winner != RV_MCTS_GAME_NONE) {
        outcome[leaf->winner] += (uint64_t)u->sims;
        return;
    }
    size_t len = u->game->state_len(u->walk);
    for (int i = 0; i < u->sims; i++) {
        memcpy(u->sim, u->walk, len);
        outcome[u->game->playout(u->sim, &u->rng)]++;
    }
}

/* Adds @p outcome to every edge from @p leaf up to the root. */
static void uct_backup(uct_node_t *leaf, const uint64_t outcome[3])
{
    double draws = 0.5 * (double)outcome[RV_MCTS_GAME_DRAW];
    for (uct_node_t *n = leaf; n->parent != NULL; n = n->parent) {
        uct_node_t *p = n->parent;
        uct_edge_t *e = &p->edges[n->parent_edge];
        e->visits++;
        e->wins += (double)outcome[p->to_play] + draws;
        p->visits++;
    }
}

/* One rollout from @p root; RV_ERR_NO_MEMORY if a node could not be
 * made (the tree is left consistent). */
static rv_status_t uct_rollout(rv_mcts_uct_tree_t *u, uct_node_t *root,
                               const void *state)
{
    uint64_t outcome[3] = {0, 0, 0};
    uct_node_t *node = root;

    memcpy(u->walk, state, u->game->state_len(state));
    while (node->winner == RV_MCTS_GAME_NONE && node->nuntried == 0) {
        uct_edge_t *e = &node->edges[uct_select(u, node)];
        u->game->apply(u->walk, e->move);
        node = e->child;
    }
    if (node->winner == RV_MCTS_GAME_NONE) {
        node = uct_expand(u, node);
        if (node == NULL)
            return RV_ERR_NO_MEMORY;
    }
    uct_simulate(u, node, outcome);
    uct_backup(node, outcome);
    return RV_OK;
}

/* Most visits first; among equals the higher win rate, then the lower
 * move, so that the order does not depend on qsort. */
static int uct_cmp_moves(const void *a, const void *b)
{
    const rv_mcts_edge_t *x = a, *y = b;
    if (x->visits != y->visits)
        return x->visits > y->visits ? -1 : 1;
    if (x->win_rate != y->win_rate)
        return x->win_rate > y->win_rate ? -1 : 1;
    return (x->move > y->move) - (x->move < y->move);
}

/* The root's moves, tried or not, into @p res. */
static void uct_report(const rv_mcts_uct_tree_t *u, const uct_node_t *root,
                       rv_mcts_result_t *res)
{
    int k = 0;
    for (int i = 0; i < root->nedges; i++) {
        const uct_edge_t *e = &root->edges[i];
        res->moves[k++] = (rv_mcts_edge_t){
            .move = e->move,
            .visits = e->visits,
            .win_rate =
                e->visits ? e->wins / ((double)e->visits * u->sims) : 0.0};
    }
    for (int i = 0; i < root->nuntried; i++)
        res->moves[k++] = (rv_mcts_edge_t){.move = root->untried[i]};
    qsort(res->moves, (size_t)k, sizeof(res->moves[0]), uct_cmp_moves);
    res->nmoves = k;
    res->best = k > 0 ? res->moves[0].move : 0;
    res->root_visits = root->visits;
    res->nodes = u->nodes;
    res->deferred = 0;
}

static double uct_now(void)
{
    return (double)rv_time_ns() * 1e-9;
}

static void uct_result_clear(rv_mcts_result_t *res)
{
    res->nmoves = 0;
    res->best = 0;
    res->rollouts = res->root_visits = res->nodes = res->deferred = 0;
    res->seconds = 0.0;
}

rv_status_t rv_mcts_uct_tree_create(const rv_mcts_game_t *game,
                                    const void *state, int sims, double c,
                                    uint64_t seed, rv_mcts_uct_tree_t **tree)
{
    if (tree == NULL)
        return RV_ERR_INVALID;
    *tree = NULL;
    if (game == NULL || state == NULL || sims < 1 || !(c >= 0.0) ||
        game->is_terminal(state))
        return RV_ERR_INVALID;
    rv_mcts_uct_tree_t *u = malloc(sizeof(*u));
    if (u == NULL)
        return RV_ERR_NO_MEMORY;
    /* A zero seed would stall xorshift64*; the header asks for a
     * non-zero one, and mixing it lets neighbouring seeds differ. */
    *u = (rv_mcts_uct_tree_t){
        .game = game, .sims = sims, .c = c, .rng = mc_rng_seed(seed)};
    u->walk = malloc(game->state_max);
    u->sim = malloc(game->state_max);
    u->root_state = malloc(game->state_max);
    if (u->walk != NULL && u->sim != NULL && u->root_state != NULL) {
        memcpy(u->root_state, state, game->state_len(state));
        u->root = uct_node_new(u, state, NULL, -1);
    }
    if (u->root == NULL) {
        rv_mcts_uct_tree_destroy(u);
        return RV_ERR_NO_MEMORY;
    }
    *tree = u;
    return RV_OK;
}

rv_status_t rv_mcts_uct_tree_search(rv_mcts_uct_tree_t *u, uint64_t rollouts,
                                    rv_mcts_result_t *res)
{
    if (res == NULL)
        return RV_ERR_INVALID;
    uct_result_clear(res);
    if (u == NULL || u->root->winner != RV_MCTS_GAME_NONE)
        return RV_ERR_INVALID;
    double start = uct_now();
    rv_status_t st = RV_OK;
    for (uint64_t i = 0; i < rollouts && st == RV_OK; i++)
        if ((st = uct_rollout(u, u->root, u->root_state)) == RV_OK)
            res->rollouts++;
    if (st == RV_OK)
        uct_report(u, u->root, res);
    res->seconds = uct_now() - start;
    return st;
}

/* The edge of @p node for move @p m, or -1 when no rollout took it. */
static int uct_edge_of(const uct_node_t *node, rv_mcts_move_t m)
{
    for (int i = 0; i < node->nedges; i++)
        if (node->edges[i].move == m)
            return i;
    return -1;
}

static bool uct_untried(const uct_node_t *node, rv_mcts_move_t m)
{
    for (int i = 0; i < node->nuntried; i++)
        if (node->untried[i] == m)
            return true;
    return false;
}

rv_status_t rv_mcts_uct_tree_play(rv_mcts_uct_tree_t *u, rv_mcts_move_t m)
{
    if (u == NULL)
        return RV_ERR_INVALID;
    uct_node_t *old = u->root;
    int i = uct_edge_of(old, m);
    if (i < 0 && !uct_untried(old, m))
        return RV_ERR_INVALID;
    uct_node_t *root;
    if (i >= 0) {
        /* The child keeps its subtree and the statistics of its own
         * edges; it leaves the old root before that is freed. */
        root = old->edges[i].child;
        old->edges[i].child = NULL;
        root->parent = NULL;
        root->parent_edge = -1;
    } else {
        memcpy(u->walk, u->root_state, u->game->state_len(u->root_state));
        u->game->apply(u->walk, m);
        if ((root = uct_node_new(u, u->walk, NULL, -1)) == NULL)
            return RV_ERR_NO_MEMORY; /* the tree is as it was */
    }
    u->game->apply(u->root_state, m);
    uct_node_free(u, old);
    u->root = root;
    return RV_OK;
}

void rv_mcts_uct_tree_destroy(rv_mcts_uct_tree_t *u)
{
    if (u == NULL)
        return;
    if (u->root != NULL)
        uct_node_free(u, u->root);
    free(u->walk);
    free(u->sim);
    free(u->root_state);
    free(u);
}

rv_status_t rv_mcts_uct_search(const rv_mcts_game_t *game, const void *state,
                               uint64_t rollouts, int sims, double c,
                               uint64_t seed, rv_mcts_result_t *res)
{
    if (res == NULL)
        return RV_ERR_INVALID;
    uct_result_clear(res);
    double start = uct_now();
    rv_mcts_uct_tree_t *u;
    rv_status_t st = rv_mcts_uct_tree_create(game, state, sims, c, seed, &u);
    if (st == RV_OK)
        st = rv_mcts_uct_tree_search(u, rollouts, res);
    rv_mcts_uct_tree_destroy(u);
    /* The one-shot search's time covers its tree's making and freeing. */
    res->seconds = uct_now() - start;
    return st;
}
