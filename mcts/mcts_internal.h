/*
 * The search layer's internals: the distributed tree's nodes and edges,
 * the path a rollout carries, the process's and the worker's state, and
 * the calls between the workers.
 */
#ifndef RIVET_MCTS_INTERNAL_H
#define RIVET_MCTS_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uthash.h>
/* liburcu's wait-free queue, inline (no library to link). */
#define _LGPL_SOURCE
#include <urcu/wfcqueue.h>

#include "mcts_config.h"
#include "mcts_rng.h"
#include "rv_am.h"
#include "rv_epoch.h"
#include "rv_gptr.h"
#include "rv_layer.h"
#include "rv_mcts.h"

/* An edge's child owner before the edge is claimed. */
#define MC_NO_OWNER UINT32_MAX

/* Win counts are kept in half playouts, so that a draw counts one half
 * for each side. */
#define MC_WIN 2u
#define MC_DRAW 1u

/* Deepest path a rollout may take, and the largest position: both live
 * on the stack of a rollout's steps. */
#define MC_MAX_DEPTH 400
#define MC_STATE_MAX 1024

/* ---------------------------------------------------------------------- */
/* The tree                                                                */

/* One step of a rollout's path: the edge it took out of a node, and who
 * owns that node (where the result is added on the way back). */
typedef struct mc_hop {
    rv_gptr_t node;
    uint32_t owner;
    uint32_t edge;
} mc_hop_t;

/* A selection waiting for a child being created (deferred selection,
 * Seriema section 5.3.2): its path up to and including the edge. */
typedef struct mc_defer {
    struct mc_defer *next;
    uint32_t nhops;
    mc_hop_t hops[];
} mc_defer_t;

/* An edge: the parent's statistics of one move (visits counted when a
 * selection takes it, wins when its result comes back: the virtual loss
 * of the selections in flight), and where its child lives. */
typedef struct mc_edge {
    _Atomic uint64_t visits;
    _Atomic uint64_t wins;   /* for the player to move at the parent,
                                in MC_WIN units per playout */
    _Atomic rv_gptr_t child; /* 0 until the child's owner notifies */
    _Atomic uint32_t owner;  /* the child's owner, once claimed */
    rv_mcts_move_t move;
    _Atomic(mc_defer_t *) deferred; /* selections waiting for the child */
} mc_edge_t;

typedef struct mc_node {
    UT_hash_handle hh; /* the owner's table (mcts.owner hash) */
    uint64_t hash;
    _Atomic uint64_t visits;     /* selections made here */
    _Atomic uint32_t next_claim; /* edges [0, next_claim) are claimed */
    uint32_t nedges;
    uint32_t owner;        /* the worker owning the node */
    _Atomic uint32_t mark; /* reachability generation (mcts_tree.c) */
    int8_t winner;         /* RV_MCTS_GAME_NONE, or the game is over */
    uint8_t to_play;
    uint16_t state_len;
    rv_mcts_move_t *moves;        /* the legal moves, in a random order: the
                                order their edges are claimed in */
    _Atomic(mc_edge_t *) *blocks; /* edges in blocks of MC_BLOCK, made
                                   when their first edge is claimed */
    uint8_t *state;               /* the position */
} mc_node_t;

/* Edges of a node are made MC_BLOCK at a time as they are claimed: most
 * nodes are leaves whose edges are never claimed, and making all of them
 * up front would cost a leaf of 11x11 Hex 5 KiB of fresh memory. */
#define MC_BLOCK 16

/* Edge @p i of @p n, or NULL while its block is not made yet. */
static inline mc_edge_t *mc_edge(const mc_node_t *n, uint32_t i)
{
    mc_edge_t *b =
        atomic_load_explicit(&n->blocks[i / MC_BLOCK], memory_order_acquire);
    return b != NULL ? &b[i % MC_BLOCK] : NULL;
}

/* ---------------------------------------------------------------------- */
/* Processes and workers                                                   */

/* A leaf to simulate, queued to a worker of its process. */
typedef struct mc_sim {
    struct cds_wfcq_node qnode;
    mc_node_t *leaf;
    uint32_t nhops;
    mc_hop_t hops[];
} mc_sim_t;

struct mc_worker;

/* What the controller asked every worker to do (mcts_layer.c). */
typedef enum mc_op {
    MC_OP_NONE,
    MC_OP_POSITION,
    MC_OP_SEARCH,
    MC_OP_PLAY,
    MC_OP_STATS,
    MC_OP_QUIT,
} mc_op_t;

typedef struct mc_cmd {
    struct mc_cmd *next;
    uint32_t op; /* mc_op_t */
    uint32_t seq;
    uint64_t arg;      /* rollouts, or the move */
    uint64_t limit_ns; /* MC_OP_SEARCH: its wall-time budget, 0 none */
    uint8_t state[];   /* MC_OP_POSITION: the position */
} mc_cmd_t;

/* Counters of a process, summed over the job by rv_mcts_stats. */
typedef struct mc_counters {
    _Atomic uint64_t nodes_alive, nodes_created, nodes_freed;
    _Atomic uint64_t transpositions, playouts, deferred, inconsistent;
} mc_counters_t;

typedef struct mc_proc {
    const rv_mcts_game_t *game;
    const rv_mcts_config_t *cfg;
    double c; /* mcts.c */
    rv_rank_t rank;
    int threads;
    uint32_t nworkers;
    struct mc_worker **workers; /* this process's, by local index */
    mc_counters_t count;
    /* The current search, in the root's process: the rollouts started
     * (MC_EXPIRED set in it once the search's time is up: none starts
     * after) and done, how many to run, and the last search whose end
     * was broadcast. */
    _Atomic uint64_t started, done, target;
    _Atomic uint32_t stop_sent;
    _Atomic uint64_t done_total; /* since the root was made or kept */
    uint64_t inflight;           /* most rollouts in flight */
} mc_proc_t;

typedef struct mc_worker {
    rv_worker_t *w;
    mc_proc_t *proc;
    rv_tid_t tid;
    int local;
    uint64_t rng;
    rv_epoch_manager_t *em; /* the process's instance */
    rv_epoch_token_t *tok;
    /* The leaves handed to this worker to simulate. */
    struct __cds_wfcq_head sim_head;
    struct cds_wfcq_tail sim_tail;
    /* The nodes it owns, and (mcts.owner hash) its share of the
     * transposition table. */
    mc_node_t **nodes;
    size_t nnodes, nodes_cap;
    mc_node_t *table;
    /* The root, as every worker knows it. */
    rv_gptr_t root;
    uint8_t *root_state;
    rv_tid_t root_owner;
    /* The controller's commands not yet run, the one running, the
     * searches stopped, and (the controller) the last one issued. */
    mc_cmd_t *cmds, **cmd_tail;
    uint32_t cmd_seq, stop_seq, next_seq;
    unsigned idle;
    bool quit, begun;
    uint8_t *scratch; /* a position, for playouts */
} mc_worker_t;

typedef struct mc_handlers {
    rv_handler_id_t select, expand, notify, backprop, stop, cmd, mark, check;
} mc_handlers_t;

extern int mc_slot;
extern mc_handlers_t mc_h;

static inline mc_worker_t *mc_of(rv_worker_t *w)
{
    return mc_slot < 0 ? NULL : rv_worker_layer(w, mc_slot);
}

static inline mc_node_t *mc_node(rv_gptr_t g)
{
    return rv_gptr_addr(g);
}

/* The process of worker @p tid. */
static inline rv_rank_t mc_rank_of(const mc_worker_t *mw, uint32_t tid)
{
    return (rv_rank_t)(tid / (uint32_t)mw->proc->threads);
}

/* Whether @p g is a node of this process (and not null). */
static inline bool mc_local(const mc_worker_t *mw, rv_gptr_t g)
{
    return g != RV_GPTR_NULL && rv_gptr_rank(g) == mw->proc->rank;
}

/* Whether a node of process @p rank may be entered directly by @p mw
 * (mcts.remote_only sends everything not its own through calls). */
static inline bool mc_direct(const mc_worker_t *mw, rv_gptr_t g, uint32_t owner)
{
    if (owner == mw->tid)
        return true;
    return !mw->proc->cfg->remote_only && rv_gptr_rank(g) == mw->proc->rank;
}

/* mcts_node.c: nodes, and a rollout's steps. mc_fatal ends the job on
 * what would lose a rollout (its search would never end); mc_call makes
 * a call from a worker's own code or a handler, again after a progress
 * while its destination's queue is full. */
void mc_fatal(mc_worker_t *mw, const char *what);
rv_status_t mc_call(mc_worker_t *mw, uint32_t dest, rv_handler_id_t h,
                    const void *args, size_t len, const void *buf,
                    size_t buf_len);
/* A node of @p state owned by this worker; @p hash is its hash under
 * mcts.owner hash (the table's key), 0 otherwise. */
mc_node_t *mc_node_new(mc_worker_t *mw, const void *state, uint64_t hash);
void mc_node_free(mc_proc_t *p, mc_node_t *n);
rv_status_t mc_node_register(rv_context_t *ctx);
bool mc_rollout_start(mc_worker_t *mw);
/* The search's time is up: no rollout starts from now on, and its end is
 * broadcast once those in flight are done. The root's process only. */
void mc_search_expire(mc_worker_t *mw);

/* The bit of mc_proc_t.started that says the search's time is up. It
 * lives in the counter the rollouts' start moves (a compare-and-swap)
 * so that no rollout can start between the time being found up and the
 * count of those started being read. */
#define MC_EXPIRED ((uint64_t)1 << 63)
unsigned mc_sims_run(mc_worker_t *mw, unsigned most);

/* mcts_tree.c: roots, moves, reclamation and statistics. */
rv_status_t mc_tree_register(rv_context_t *ctx);
rv_status_t mc_tree_position(mc_worker_t *mw, const void *state);
rv_status_t mc_tree_play(mc_worker_t *mw, rv_mcts_move_t m, uint32_t gen);
rv_status_t mc_tree_drop_all(mc_worker_t *mw);
rv_status_t mc_tree_summary(mc_worker_t *mw, bool check, rv_mcts_stats_t *stats,
                            rv_mcts_result_t *res);
rv_epoch_free_fn mc_tree_free_fn(void);

#endif
