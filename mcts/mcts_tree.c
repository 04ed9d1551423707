/*
 * The tree as a whole: its root, the move that keeps a subtree, the
 * reclamation of what is no longer reachable, and the job's statistics.
 * Each runs on every worker at once, as a step of a controller's command
 * (mcts_layer.c), between searches: the job is quiet (rv_quiesce) when
 * nodes are unlinked.
 *
 * Reclamation is a mark and sweep, since under mcts.owner hash the tree
 * is a graph (a position reached by two move orders is one node): the
 * new root's owner marks what the new root reaches, by calls to the
 * owners of other processes' nodes; every worker then unlinks the nodes
 * it owns that are not marked and hands them to rma's distributed epoch
 * manager, which frees each at its owner once no worker can hold it.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "mcts_internal.h"
#include "rv_coll.h"

typedef struct mc_mark_msg {
    rv_gptr_t node;
    uint32_t gen;
    uint32_t pad;
} mc_mark_msg_t;

/* ---------------------------------------------------------------------- */
/* Marking                                                                 */

/* Marks @p g and what it reaches: the nodes of this process directly
 * (an explicit stack: a tree may be deep), the others' by a call. */
static void mark_from(mc_worker_t *mw, rv_gptr_t g, uint32_t gen)
{
    size_t cap = 256, n = 0;
    rv_gptr_t *stack = malloc(cap * sizeof(*stack));
    if (stack == NULL) {
        /* What is not marked is freed: a node kept unmarked would be
         * freed while reachable. */
        mc_fatal(mw, "out of memory marking the tree");
        return;
    }
    stack[n++] = g;
    while (n > 0) {
        mc_node_t *node = mc_node(stack[--n]);
        if (atomic_exchange_explicit(&node->mark, gen, memory_order_relaxed) ==
            gen)
            continue;
        for (uint32_t i = 0; i < node->nedges; i++) {
            mc_edge_t *e = mc_edge(node, i);
            rv_gptr_t c = e != NULL ? atomic_load(&e->child) : RV_GPTR_NULL;
            if (c == RV_GPTR_NULL)
                continue;
            if (rv_gptr_rank(c) != mw->proc->rank) {
                mc_mark_msg_t m = {.node = c, .gen = gen};
                uint32_t owner = atomic_load(&e->owner);
                if (mc_call(mw, owner, mc_h.mark, &m, sizeof(m), NULL, 0) !=
                    RV_OK)
                    mc_fatal(mw, "marking the tree failed");
                continue;
            }
            if (n == cap) {
                rv_gptr_t *s = realloc(stack, 2 * cap * sizeof(*s));
                if (s == NULL) {
                    mc_fatal(mw, "out of memory marking the tree");
                    break;
                }
                stack = s;
                cap *= 2;
            }
            stack[n++] = c;
        }
    }
    free(stack);
}

static rv_status_t on_mark(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    mc_worker_t *mw = mc_of(w);
    mc_mark_msg_t m;
    if (mw == NULL || call->args_len != sizeof(m))
        return RV_ERR_INVALID;
    memcpy(&m, call->args, sizeof(m));
    if (!mc_local(mw, m.node)) {
        rv_error("mcts: a malformed mark from worker %u dropped", call->src);
        return RV_ERR_INVALID;
    }
    mark_from(mw, m.node, m.gen);
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Sweeping                                                                */

static void epoch_free(rv_worker_t *w, void *obj, void *arg)
{
    (void)w;
    mc_node_free(arg, obj);
}

/* Unlinks this worker's nodes not marked @p gen (all of them for gen 0)
 * and defers their deletion to the epoch manager. */
static void sweep(mc_worker_t *mw, uint32_t gen)
{
    size_t kept = 0;
    rv_epoch_pin(mw->tok);
    for (size_t i = 0; i < mw->nnodes; i++) {
        mc_node_t *n = mw->nodes[i];
        if (gen != 0 &&
            atomic_load_explicit(&n->mark, memory_order_relaxed) == gen) {
            mw->nodes[kept++] = n;
            continue;
        }
        mc_node_t *in_table = NULL;
        if (mw->table != NULL)
            HASH_FIND(hh, mw->table, &n->hash, sizeof(n->hash), in_table);
        if (in_table == n)
            HASH_DELETE(hh, mw->table, n);
        rv_epoch_defer_delete(mw->tok, rv_gptr_make(mw->proc->rank, n));
    }
    rv_epoch_unpin(mw->tok);
    mw->nnodes = kept;
}

/* Every worker: what is not marked @p gen goes; when the job is quiet
 * again, worker 0 has the epoch manager free it everywhere while the
 * others progress in the barrier. */
static rv_status_t reclaim(mc_worker_t *mw, uint32_t gen)
{
    rv_status_t st = rv_quiesce(mw->w);
    if (st != RV_OK)
        return st;
    sweep(mw, gen);
    st = rv_barrier(mw->w);
    if (st == RV_OK && mw->tid == 0)
        st = rv_epoch_clear(mw->w, mw->em);
    rv_status_t st2 = rv_barrier(mw->w);
    return st != RV_OK ? st : st2;
}

/* ---------------------------------------------------------------------- */
/* Roots                                                                   */

/* Every worker learns the root its owner set (the others give 0). */
static rv_status_t root_share(mc_worker_t *mw, rv_gptr_t root, uint32_t owner,
                              bool mine)
{
    uint64_t in[2] = {mine ? root : 0, mine ? (uint64_t)owner + 1 : 0}, out[2];
    rv_status_t st =
        rv_coll_allreduce(mw->w, out, in, 2, RV_COLL_U64, RV_COLL_MAX);
    if (st != RV_OK)
        return st;
    mw->root = out[0];
    mw->root_owner = (rv_tid_t)(out[1] - 1);
    if (mw->local == 0)
        atomic_store(&mw->proc->done_total, 0);
    return RV_OK;
}

rv_status_t mc_tree_position(mc_worker_t *mw, const void *state)
{
    rv_status_t st = reclaim(mw, 0);
    if (st != RV_OK)
        return st;
    memcpy(mw->root_state, state, mw->proc->game->state_len(state));
    mc_node_t *root = NULL;
    if (mw->tid == 0 && (root = mc_node_new(mw, state, 0)) == NULL)
        st = RV_ERR_NO_MEMORY;
    rv_gptr_t g = root ? rv_gptr_make(mw->proc->rank, root) : 0;
    rv_status_t st2 = root_share(mw, g, 0, mw->tid == 0);
    return st != RV_OK ? st : st2;
}

/* At the root's owner: the child of move @p m, made here if no rollout
 * reached it. */
static rv_gptr_t child_of(mc_worker_t *mw, rv_mcts_move_t m, uint32_t *owner)
{
    mc_node_t *root = mc_node(mw->root);
    for (uint32_t i = 0; i < root->nedges; i++) {
        mc_edge_t *e = mc_edge(root, i);
        rv_gptr_t c = e != NULL ? atomic_load(&e->child) : RV_GPTR_NULL;
        if (root->moves[i] == m && c != RV_GPTR_NULL) {
            *owner = atomic_load(&e->owner);
            return c;
        }
    }
    uint8_t s[MC_STATE_MAX];
    memcpy(s, root->state, root->state_len);
    mw->proc->game->apply(s, m);
    mc_node_t *n = mc_node_new(mw, s, 0);
    *owner = mw->tid;
    return n ? rv_gptr_make(mw->proc->rank, n) : RV_GPTR_NULL;
}

rv_status_t mc_tree_play(mc_worker_t *mw, rv_mcts_move_t m, uint32_t gen)
{
    bool mine = mw->tid == mw->root_owner;
    uint32_t owner = 0;
    rv_gptr_t g = mine ? child_of(mw, m, &owner) : RV_GPTR_NULL;
    rv_status_t st = root_share(mw, g, owner, mine);
    if (st != RV_OK)
        return st;
    if (mw->root == RV_GPTR_NULL)
        return RV_ERR_NO_MEMORY;
    mw->proc->game->apply(mw->root_state, m);
    if (mw->tid == mw->root_owner)
        mark_from(mw, mw->root, gen);
    return reclaim(mw, gen);
}

rv_status_t mc_tree_drop_all(mc_worker_t *mw)
{
    mw->root = RV_GPTR_NULL;
    return reclaim(mw, 0);
}

/* ---------------------------------------------------------------------- */
/* Conservation and statistics                                             */

typedef struct mc_check_msg {
    rv_gptr_t node;
    uint64_t edge_visits;
} mc_check_msg_t;

/* Node @p n was reached through an edge of @p edge_visits visits: every
 * one of them but the rollout that created it moved on into @p n, unless
 * @p n ends the game (then none did). */
static void check_child(mc_proc_t *p, const mc_node_t *n, uint64_t edge_visits)
{
    uint64_t v = atomic_load(&n->visits);
    bool ok = n->winner != RV_MCTS_GAME_NONE ? v == 0 : v + 1 == edge_visits;
    if (!ok) {
        rv_error("mcts: a node was entered %" PRIu64 " times through an "
                 "edge of %" PRIu64 " visits",
                 v, edge_visits);
        atomic_fetch_add(&p->count.inconsistent, 1);
    }
}

static rv_status_t on_check(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    mc_worker_t *mw = mc_of(w);
    mc_check_msg_t m;
    if (mw == NULL || call->args_len != sizeof(m))
        return RV_ERR_INVALID;
    memcpy(&m, call->args, sizeof(m));
    if (!mc_local(mw, m.node))
        return RV_ERR_INVALID;
    check_child(mw->proc, mc_node(m.node), m.edge_visits);
    return RV_OK;
}

/* Checks that nothing was lost or counted twice: a node's visits are
 * its edges' visits summed, and (a tree: mcts.owner random) a child's
 * agree with its edge's, wherever the child lives. */
static void check_nodes(mc_worker_t *mw)
{
    mc_proc_t *p = mw->proc;
    bool tree = p->cfg->owner == MC_OWNER_RANDOM;
    for (size_t k = 0; k < mw->nnodes; k++) {
        mc_node_t *n = mw->nodes[k];
        uint64_t sum = 0;
        for (uint32_t i = 0; i < n->nedges; i++) {
            mc_edge_t *e = mc_edge(n, i);
            if (e == NULL)
                continue;
            uint64_t v = atomic_load(&e->visits);
            rv_gptr_t c = atomic_load(&e->child);
            sum += v;
            if (!tree || c == RV_GPTR_NULL)
                continue;
            if (rv_gptr_rank(c) == p->rank) {
                check_child(p, mc_node(c), v);
                continue;
            }
            mc_check_msg_t m = {.node = c, .edge_visits = v};
            if (mc_call(mw, atomic_load(&e->owner), mc_h.check, &m, sizeof(m),
                        NULL, 0) != RV_OK)
                mc_fatal(mw, "checking the tree failed");
        }
        if (sum != atomic_load(&n->visits)) {
            rv_error("mcts: a node of %" PRIu64 " visits has edges of %" PRIu64,
                     atomic_load(&n->visits), sum);
            atomic_fetch_add(&p->count.inconsistent, 1);
        }
    }
}

/* The counters every process adds to the job's (its worker 0 gives the
 * process's), then the root's moves (its owner gives them). */
enum { MC_SUM_COUNTERS = 10, MC_SUM_MOVES = 3 };

static size_t sum_fill(mc_worker_t *mw, uint64_t *v)
{
    mc_proc_t *p = mw->proc;
    if (mw->local == 0) {
        v[0] = atomic_load(&p->count.nodes_alive);
        v[1] = atomic_load(&p->count.nodes_created);
        v[2] = atomic_load(&p->count.nodes_freed);
        v[3] = atomic_load(&p->count.transpositions);
        v[4] = atomic_load(&p->count.playouts);
        v[5] = atomic_load(&p->count.deferred);
        v[6] = atomic_load(&p->count.inconsistent);
        v[7] = atomic_load(&p->done_total);
        v[9] = atomic_load(&p->done); /* this search's */
    }
    if (mw->tid != mw->root_owner || mw->root == RV_GPTR_NULL)
        return 0;
    mc_node_t *root = mc_node(mw->root);
    uint64_t *m = v + MC_SUM_COUNTERS;
    for (uint32_t i = 0; i < root->nedges; i++) {
        mc_edge_t *e = mc_edge(root, i);
        m[3 * i] = root->moves[i];
        m[3 * i + 1] = e != NULL ? atomic_load(&e->visits) : 0;
        m[3 * i + 2] = e != NULL ? atomic_load(&e->wins) : 0;
        v[8] += m[3 * i + 1];
    }
    return root->nedges;
}

static int by_visits(const void *a, const void *b)
{
    const rv_mcts_edge_t *x = a, *y = b;
    if (x->visits != y->visits)
        return x->visits < y->visits ? 1 : -1;
    return (x->win_rate < y->win_rate) - (x->win_rate > y->win_rate);
}

rv_status_t mc_tree_summary(mc_worker_t *mw, bool check, rv_mcts_stats_t *stats,
                            rv_mcts_result_t *res)
{
    if (check) {
        check_nodes(mw);
        rv_status_t st = rv_quiesce(mw->w);
        if (st != RV_OK)
            return st;
    }
    size_t len = MC_SUM_COUNTERS + MC_SUM_MOVES * RV_MCTS_MAX_MOVES + 1;
    uint64_t *v = calloc(2 * len, sizeof(*v));
    if (v == NULL) {
        mc_fatal(mw, "out of memory for the search's summary");
        return RV_ERR_NO_MEMORY;
    }
    v[len - 1] = sum_fill(mw, v);
    rv_status_t st =
        rv_coll_allreduce(mw->w, v + len, v, len, RV_COLL_U64, RV_COLL_SUM);
    const uint64_t *r = v + len;
    if (st == RV_OK && stats != NULL)
        *stats = (rv_mcts_stats_t){.nodes_alive = r[0],
                                   .nodes_created = r[1],
                                   .nodes_freed = r[2],
                                   .transpositions = r[3],
                                   .playouts = r[4],
                                   .inconsistent = r[6],
                                   .rollouts_done = r[7],
                                   .visits_total = r[8]};
    if (st == RV_OK && res != NULL) {
        double scale =
            (double)MC_WIN * (double)mw->proc->cfg->simulations_per_leaf;
        res->nmoves = (int)r[len - 1];
        for (int k = 0; k < res->nmoves; k++) {
            const uint64_t *m = r + MC_SUM_COUNTERS + 3 * k;
            res->moves[k] = (rv_mcts_edge_t){
                .move = (rv_mcts_move_t)m[0],
                .visits = m[1],
                .win_rate = m[1] ? (double)m[2] / (scale * (double)m[1]) : 0};
        }
        qsort(res->moves, (size_t)res->nmoves, sizeof(res->moves[0]),
              by_visits);
        res->best = res->nmoves > 0 ? res->moves[0].move : 0;
        res->root_visits = r[8];
        res->rollouts = r[9];
        res->nodes = r[0];
        res->deferred = r[5];
    }
    free(v);
    return st;
}

rv_status_t mc_tree_register(rv_context_t *ctx)
{
    rv_status_t st =
        rv_am_register(ctx, "mcts.mark", on_mark, NULL, &mc_h.mark);
    if (st == RV_OK)
        st = rv_am_register(ctx, "mcts.check", on_check, NULL, &mc_h.check);
    return st;
}

rv_epoch_free_fn mc_tree_free_fn(void)
{
    return epoch_free;
}
