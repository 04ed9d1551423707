/*
 * The distributed tree's nodes and a rollout's steps (Seriema, section
 * 5.3.2): selection down the tree by UCB1 with a virtual loss, expansion
 * by a call carrying the new position to the child's owner, the child's
 * notification to its parent (which resumes the selections deferred
 * while it was made), simulation by a worker of the leaf's process, and
 * the result carried back up the path the selection took.
 *
 * A rollout carries its path (mc_hop_t: node, owner, edge) in its calls,
 * so the result goes back up the edges it took even where a node has
 * several parents (mcts.owner hash). Within a process, nodes are entered
 * directly by any of its workers: their counters are relaxed atomics,
 * and an edge's child pointer and its deferred selections follow the
 * protocol of link() and defer().
 */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcts_internal.h"

/* The header of every call of a rollout: a node, the path, and a word
 * the call gives its own meaning (a backpropagation's win counts). */
typedef struct mc_msg {
    rv_gptr_t node;
    uint32_t nhops;
    uint32_t aux;
} mc_msg_t;

typedef struct mc_notify_msg {
    rv_gptr_t parent, child;
    uint32_t edge;
    uint32_t pad;
} mc_notify_msg_t;

static void descend(mc_worker_t *mw, rv_gptr_t g, mc_hop_t *hops,
                    uint32_t nhops);

void mc_fatal(mc_worker_t *mw, const char *what)
{
    rv_error("mcts: %s: a rollout would be lost and its search never end; "
             "ending the job",
             what);
    rv_abort(rv_worker_context(mw->w), 1, what);
}

rv_status_t mc_call(mc_worker_t *mw, uint32_t dest, rv_handler_id_t h,
                    const void *args, size_t len, const void *buf,
                    size_t buf_len)
{
    /* A worker's own calls may find a full queue (am.on_full fail); the
     * call is made again once the worker has progressed. Calls made by
     * handlers are always queued. */
    for (;;) {
        rv_status_t st = buf == NULL
                             ? rv_call(mw->w, dest, h, args, len, NULL, 0)
                             : rv_call_buffer(mw->w, dest, h, args, len, buf,
                                              buf_len, NULL, 0);
        if (st != RV_ERR_AGAIN)
            return st;
        rv_progress(mw->w);
    }
}

/* ---------------------------------------------------------------------- */
/* Nodes                                                                   */

static bool nodes_grow(mc_worker_t *mw)
{
    if (mw->nnodes < mw->nodes_cap)
        return true;
    size_t cap = mw->nodes_cap ? 2 * mw->nodes_cap : 1024;
    mc_node_t **v = realloc(mw->nodes, cap * sizeof(*v));
    if (v == NULL)
        return false;
    mw->nodes = v;
    mw->nodes_cap = cap;
    return true;
}

mc_node_t *mc_node_new(mc_worker_t *mw, const void *state, uint64_t hash)
{
    const rv_mcts_game_t *g = mw->proc->game;
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    size_t len = g->state_len(state);
    int winner = g->winner(state);
    int n = winner == RV_MCTS_GAME_NONE ? g->legal_moves(state, moves) : 0;
    size_t nblocks = ((size_t)n + MC_BLOCK - 1) / MC_BLOCK;
    mc_node_t *node = malloc(sizeof(*node) + nblocks * sizeof(node->blocks[0]) +
                             (size_t)n * sizeof(rv_mcts_move_t) + len);
    if (node == NULL || !nodes_grow(mw)) {
        free(node);
        mc_fatal(mw, "out of memory for a node");
        return NULL;
    }
    memset(node, 0, sizeof(*node));
    node->blocks = (_Atomic(mc_edge_t *) *)(node + 1);
    for (size_t k = 0; k < nblocks; k++)
        atomic_init(&node->blocks[k], NULL);
    node->moves = (rv_mcts_move_t *)(node->blocks + nblocks);
    node->state = (uint8_t *)(node->moves + n);
    memcpy(node->state, state, len);
    node->state_len = (uint16_t)len;
    node->hash = hash;
    node->winner = (int8_t)winner;
    node->to_play = (uint8_t)g->to_play(state);
    node->nedges = (uint32_t)n;
    node->owner = mw->tid;
    /* Children are claimed in this order: a random one each time. */
    for (int i = n - 1; i > 0; i--) {
        uint32_t j = mc_rng_below(&mw->rng, (uint32_t)i + 1);
        rv_mcts_move_t t = moves[i];
        moves[i] = moves[j];
        moves[j] = t;
    }
    memcpy(node->moves, moves, (size_t)n * sizeof(rv_mcts_move_t));
    mw->nodes[mw->nnodes++] = node;
    atomic_fetch_add_explicit(&mw->proc->count.nodes_alive, 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&mw->proc->count.nodes_created, 1,
                              memory_order_relaxed);
    return node;
}

void mc_node_free(mc_proc_t *p, mc_node_t *n)
{
    /* Deferred selections cannot remain: a node is freed only when the
     * job is quiet (mcts_tree.c). */
    for (uint32_t k = 0; k * MC_BLOCK < n->nedges; k++) {
        mc_edge_t *b = atomic_load(&n->blocks[k]);
        for (uint32_t i = 0; b != NULL && i < MC_BLOCK; i++) {
            mc_defer_t *d = atomic_load(&b[i].deferred);
            while (d != NULL) {
                mc_defer_t *next = d->next;
                free(d);
                d = next;
            }
        }
        free(b);
    }
    free(n);
    atomic_fetch_sub_explicit(&p->count.nodes_alive, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&p->count.nodes_freed, 1, memory_order_relaxed);
}

/* Edge @p i of @p n, just claimed: made with its block if it is the
 * block's first claimed edge to get here (claims of one block may race:
 * one block wins the exchange, the others are freed). */
static mc_edge_t *edge_claimed(mc_worker_t *mw, mc_node_t *n, uint32_t i)
{
    _Atomic(mc_edge_t *) *slot = &n->blocks[i / MC_BLOCK];
    mc_edge_t *b = atomic_load_explicit(slot, memory_order_acquire);
    if (b == NULL) {
        mc_edge_t *nb = calloc(MC_BLOCK, sizeof(*nb));
        if (nb == NULL) {
            mc_fatal(mw, "out of memory for a node's edges");
            return NULL;
        }
        uint32_t first = i - i % MC_BLOCK;
        for (uint32_t k = 0; k < MC_BLOCK && first + k < n->nedges; k++) {
            nb[k].move = n->moves[first + k];
            atomic_init(&nb[k].owner, MC_NO_OWNER);
        }
        if (atomic_compare_exchange_strong_explicit(
                slot, &b, nb, memory_order_acq_rel, memory_order_acquire))
            b = nb;
        else
            free(nb);
    }
    return &b[i % MC_BLOCK];
}

/* The owner of a new node of position @p s (mcts.owner). */
static uint32_t pick_owner(mc_worker_t *mw, const void *s)
{
    mc_proc_t *p = mw->proc;
    if (p->cfg->owner == MC_OWNER_HASH)
        return (uint32_t)(p->game->hash(s) % p->nworkers);
    return mc_rng_below(&mw->rng, p->nworkers);
}

/* ---------------------------------------------------------------------- */
/* Calls                                                                   */

static void send_path(mc_worker_t *mw, uint32_t dest, rv_handler_id_t h,
                      rv_gptr_t node, uint32_t aux, const mc_hop_t *hops,
                      uint32_t nhops, const void *buf, size_t buf_len)
{
    uint8_t msg[sizeof(mc_msg_t) + MC_MAX_DEPTH * sizeof(mc_hop_t)];
    mc_msg_t m = {.node = node, .nhops = nhops, .aux = aux};
    size_t len = sizeof(m) + nhops * sizeof(mc_hop_t);
    memcpy(msg, &m, sizeof(m));
    memcpy(msg + sizeof(m), hops, nhops * sizeof(mc_hop_t));
    rv_status_t st = mc_call(mw, dest, h, msg, len, buf, buf_len);
    if (st != RV_OK) {
        rv_error("mcts: a call to worker %u failed: %s", dest,
                 rv_status_str(st));
        mc_fatal(mw, "a rollout's call failed");
    }
}

/* Reads a rollout call's header and path into @p hops; false (logged)
 * for a malformed call. */
static bool read_path(mc_worker_t *mw, const rv_call_t *call, mc_msg_t *m,
                      mc_hop_t *hops)
{
    if (call->args_len < sizeof(*m))
        goto bad;
    memcpy(m, call->args, sizeof(*m));
    if (m->nhops > MC_MAX_DEPTH ||
        call->args_len != sizeof(*m) + m->nhops * sizeof(mc_hop_t))
        goto bad;
    memcpy(hops, (const uint8_t *)call->args + sizeof(*m),
           m->nhops * sizeof(mc_hop_t));
    if (m->node != RV_GPTR_NULL && !mc_local(mw, m->node))
        goto bad;
    /* Each hop names a node and its owner, which must live in the same
     * process: the owner is where the node is entered. */
    for (uint32_t i = 0; i < m->nhops; i++)
        if (hops[i].node == RV_GPTR_NULL ||
            hops[i].owner >= mw->proc->nworkers ||
            rv_gptr_rank(hops[i].node) != mc_rank_of(mw, hops[i].owner))
            goto bad;
    return true;
bad:
    rv_error("mcts: a malformed call of %zu bytes from worker %u dropped",
             call->args_len, call->src);
    return false;
}

/* ---------------------------------------------------------------------- */
/* Backpropagation                                                         */

/* Broadcasts the end of the current search, once (the last rollout's
 * return and the search's deadline may both see it ended). */
static void search_stop(mc_worker_t *mw)
{
    mc_proc_t *p = mw->proc;
    uint32_t seq = mw->cmd_seq, sent = atomic_load(&p->stop_sent);
    do {
        if (sent >= seq)
            return;
    } while (!atomic_compare_exchange_weak(&p->stop_sent, &sent, seq));
    rv_status_t st = rv_broadcast(mw->w, mc_h.stop, &seq, sizeof(seq), NULL, 0);
    if (st != RV_OK)
        rv_error("mcts: the end of the search could not be broadcast: %s",
                 rv_status_str(st));
}

/* One rollout came back to the root (this is the root's process). The
 * search ends with its target's last rollout or, once its time is up,
 * with the last of those started: none starts after MC_EXPIRED is set,
 * so when the end is broadcast no rollout is left in flight. */
static void rollout_done(mc_worker_t *mw)
{
    mc_proc_t *p = mw->proc;
    atomic_fetch_add_explicit(&p->done_total, 1, memory_order_relaxed);
    uint64_t d = atomic_fetch_add(&p->done, 1) + 1;
    uint64_t s = atomic_load(&p->started);
    if (d == atomic_load(&p->target) ||
        ((s & MC_EXPIRED) && d >= (s & ~MC_EXPIRED)))
        search_stop(mw);
}

void mc_search_expire(mc_worker_t *mw)
{
    mc_proc_t *p = mw->proc;
    if (atomic_load(&p->started) & MC_EXPIRED)
        return;
    /* From here no rollout starts (its compare-and-swap on started
     * fails); s is every one that did. A rollout_done before this is
     * counted in done below; one after sees MC_EXPIRED. */
    uint64_t s = atomic_fetch_or(&p->started, MC_EXPIRED);
    if (s & MC_EXPIRED)
        return;
    if (atomic_load(&p->done) >= s)
        search_stop(mw);
}

/* A backpropagation call carries both players' wins in one 32-bit word:
 * 16 bits each hold MC_WIN times mcts.simulations_per_leaf's maximum. */
_Static_assert(MC_WIN * 4096 <= 0xffff, "wins of a leaf fit 16 bits");

/* Adds the result (@p w2: each player's wins, in MC_WIN units) to the
 * edges of the path, deepest first: directly while the nodes are this
 * process's, then by a call to the next owner. */
static void backprop(mc_worker_t *mw, const mc_hop_t *hops, uint32_t nhops,
                     const uint32_t w2[2])
{
    while (nhops > 0) {
        const mc_hop_t *h = &hops[nhops - 1];
        if (!mc_direct(mw, h->node, h->owner)) {
            send_path(mw, h->owner, mc_h.backprop, RV_GPTR_NULL,
                      w2[0] | w2[1] << 16, hops, nhops, NULL, 0);
            return;
        }
        mc_node_t *n = mc_node(h->node);
        mc_edge_t *e = h->edge < n->nedges ? mc_edge(n, h->edge) : NULL;
        if (e == NULL) {
            rv_error("mcts: a result for edge %u of a node of %u dropped",
                     h->edge, n->nedges);
            return;
        }
        atomic_fetch_add_explicit(&e->wins, w2[n->to_play],
                                  memory_order_relaxed);
        nhops--;
    }
    rollout_done(mw);
}

/* The result of @p sims playouts that all end as @p winner. */
static void result_of(int winner, uint32_t sims, uint32_t w2[2])
{
    w2[0] = w2[1] = 0;
    if (winner == RV_MCTS_GAME_DRAW)
        w2[0] = w2[1] = MC_DRAW * sims;
    else
        w2[winner] = MC_WIN * sims;
}

static void backprop_exact(mc_worker_t *mw, const mc_node_t *n,
                           const mc_hop_t *hops, uint32_t nhops)
{
    uint32_t w2[2];
    result_of(n->winner, (uint32_t)mw->proc->cfg->simulations_per_leaf, w2);
    backprop(mw, hops, nhops, w2);
}

static rv_status_t on_backprop(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    mc_worker_t *mw = mc_of(w);
    mc_hop_t hops[MC_MAX_DEPTH];
    mc_msg_t m;
    if (mw == NULL || !read_path(mw, call, &m, hops) || m.nhops == 0)
        return RV_ERR_INVALID;
    uint32_t w2[2] = {m.aux & 0xffff, m.aux >> 16};
    backprop(mw, hops, m.nhops, w2);
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Simulation                                                              */

/* Hands leaf @p leaf to a random worker of this process (a wait-free
 * queue each, Seriema section 5.3.2). */
static void queue_sim(mc_worker_t *mw, mc_node_t *leaf, const mc_hop_t *hops,
                      uint32_t nhops)
{
    mc_proc_t *p = mw->proc;
    mc_sim_t *s = malloc(sizeof(*s) + nhops * sizeof(mc_hop_t));
    if (s == NULL) {
        mc_fatal(mw, "out of memory for a simulation");
        return;
    }
    s->leaf = leaf;
    s->nhops = nhops;
    memcpy(s->hops, hops, nhops * sizeof(mc_hop_t));
    cds_wfcq_node_init(&s->qnode);
    mc_worker_t *t = p->workers[mc_rng_below(&mw->rng, (uint32_t)p->threads)];
    RV_TSAN_RELEASE(s); /* the queue's ordering, for ThreadSanitizer */
    cds_wfcq_enqueue(&t->sim_head, &t->sim_tail, &s->qnode);
}

unsigned mc_sims_run(mc_worker_t *mw, unsigned most)
{
    const rv_mcts_game_t *g = mw->proc->game;
    uint32_t sims = (uint32_t)mw->proc->cfg->simulations_per_leaf;
    unsigned n = 0;
    for (; n < most; n++) {
        struct cds_wfcq_node *q =
            __cds_wfcq_dequeue_nonblocking(&mw->sim_head, &mw->sim_tail);
        if (q == NULL || q == CDS_WFCQ_WOULDBLOCK)
            break;
        mc_sim_t *s = caa_container_of(q, mc_sim_t, qnode);
        RV_TSAN_ACQUIRE(s);
        uint32_t w2[2] = {0, 0};
        for (uint32_t k = 0; k < sims; k++) {
            memcpy(mw->scratch, s->leaf->state, s->leaf->state_len);
            int win = g->playout(mw->scratch, &mw->rng);
            if (win == RV_MCTS_GAME_DRAW) {
                w2[0] += MC_DRAW;
                w2[1] += MC_DRAW;
            } else {
                w2[win] += MC_WIN;
            }
        }
        atomic_fetch_add_explicit(&mw->proc->count.playouts, sims,
                                  memory_order_relaxed);
        backprop(mw, s->hops, s->nhops, w2);
        free(s);
    }
    return n;
}

/* ---------------------------------------------------------------------- */
/* Deferred selection and the child's notification                          */

/* Continues each deferred selection of list @p d into @p child. */
static void resume(mc_worker_t *mw, mc_defer_t *d, rv_gptr_t child,
                   uint32_t owner)
{
    while (d != NULL) {
        mc_defer_t *next = d->next;
        if (mc_direct(mw, child, owner)) {
            mc_hop_t hops[MC_MAX_DEPTH];
            memcpy(hops, d->hops, d->nhops * sizeof(mc_hop_t));
            descend(mw, child, hops, d->nhops);
        } else {
            send_path(mw, owner, mc_h.select, child, 0, d->hops, d->nhops, NULL,
                      0);
        }
        free(d);
        d = next;
    }
}

/* The child of edge @p e is known (at @p owner): publish it, then take
 * the selections deferred before. The owner is stored before the child,
 * so whoever sees the child sees its owner. The child's store and the
 * exchange pair with defer()'s push and load (all sequentially
 * consistent): whichever of the two comes second sees the other's, so
 * every deferred selection is resumed, once, by whoever takes it out of
 * the list. */
static void link(mc_worker_t *mw, mc_edge_t *e, rv_gptr_t child, uint32_t owner)
{
    atomic_store_explicit(&e->owner, owner, memory_order_relaxed);
    atomic_store(&e->child, child);
    mc_defer_t *d = atomic_exchange(&e->deferred, NULL);
    resume(mw, d, child, owner);
}

static void defer(mc_worker_t *mw, mc_edge_t *e, const mc_hop_t *hops,
                  uint32_t nhops)
{
    mc_defer_t *d = malloc(sizeof(*d) + nhops * sizeof(mc_hop_t));
    if (d == NULL) {
        mc_fatal(mw, "out of memory for a deferred selection");
        return;
    }
    d->nhops = nhops;
    memcpy(d->hops, hops, nhops * sizeof(mc_hop_t));
    d->next = atomic_load(&e->deferred);
    while (!atomic_compare_exchange_weak(&e->deferred, &d->next, d))
        ;
    atomic_fetch_add_explicit(&mw->proc->count.deferred, 1,
                              memory_order_relaxed);
    rv_gptr_t child = atomic_load(&e->child);
    if (child != RV_GPTR_NULL)
        resume(mw, atomic_exchange(&e->deferred, NULL), child,
               atomic_load_explicit(&e->owner, memory_order_relaxed));
}

static void notify(mc_worker_t *mw, const mc_hop_t *parent, rv_gptr_t child)
{
    if (mc_direct(mw, parent->node, parent->owner)) {
        link(mw, mc_edge(mc_node(parent->node), parent->edge), child, mw->tid);
        return;
    }
    mc_notify_msg_t m = {
        .parent = parent->node, .child = child, .edge = parent->edge};
    rv_status_t st =
        mc_call(mw, parent->owner, mc_h.notify, &m, sizeof(m), NULL, 0);
    if (st != RV_OK) {
        rv_error("mcts: notifying worker %u of a child failed: %s",
                 parent->owner, rv_status_str(st));
        mc_fatal(mw, "a child's notification failed");
    }
}

static rv_status_t on_notify(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    mc_worker_t *mw = mc_of(w);
    mc_notify_msg_t m;
    if (mw == NULL || call->args_len != sizeof(m))
        return RV_ERR_INVALID;
    memcpy(&m, call->args, sizeof(m));
    mc_node_t *n = mc_local(mw, m.parent) ? mc_node(m.parent) : NULL;
    mc_edge_t *e = n != NULL && m.edge < n->nedges ? mc_edge(n, m.edge) : NULL;
    if (e == NULL || m.child == RV_GPTR_NULL ||
        rv_gptr_rank(m.child) != mc_rank_of(mw, call->src) ||
        atomic_load(&e->child) != RV_GPTR_NULL) {
        rv_error("mcts: a malformed notification from worker %u dropped",
                 call->src);
        return RV_ERR_INVALID;
    }
    link(mw, e, m.child, call->src);
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Expansion                                                               */

/* The node of position @p s owned by this worker under mcts.owner hash
 * (a transposition), or NULL. */
static mc_node_t *table_find(mc_worker_t *mw, const void *s, size_t len,
                             uint64_t h)
{
    mc_node_t *n;
    HASH_FIND(hh, mw->table, &h, sizeof(h), n);
    if (n != NULL && (n->state_len != len || memcmp(n->state, s, len) != 0))
        return NULL;
    return n;
}

/* At the child's owner: makes the node of position @p s (or finds it, a
 * transposition), tells the parent (the path's last hop), and goes on
 * with the rollout: a new leaf is simulated, a node found goes on being
 * selected through. */
static void create_child(mc_worker_t *mw, const void *s, mc_hop_t *hops,
                         uint32_t nhops)
{
    mc_proc_t *p = mw->proc;
    bool hash = p->cfg->owner == MC_OWNER_HASH;
    size_t len = p->game->state_len(s);
    uint64_t h = hash ? p->game->hash(s) : 0;
    mc_node_t *n = hash ? table_find(mw, s, len, h) : NULL;
    bool found = n != NULL;
    if (n == NULL) {
        n = mc_node_new(mw, s, h);
        if (n == NULL)
            return;
        /* A different position of the same hash keeps the table's entry
         * (this node is then not found again: a lost transposition, not
         * a wrong one). */
        mc_node_t *other = NULL;
        if (hash)
            HASH_FIND(hh, mw->table, &h, sizeof(h), other);
        if (hash && other == NULL)
            HASH_ADD(hh, mw->table, hash, sizeof(n->hash), n);
    } else {
        atomic_fetch_add_explicit(&p->count.transpositions, 1,
                                  memory_order_relaxed);
    }
    rv_gptr_t g = rv_gptr_make(p->rank, n);
    notify(mw, &hops[nhops - 1], g);
    if (found)
        descend(mw, g, hops, nhops);
    else if (n->winner != RV_MCTS_GAME_NONE)
        backprop_exact(mw, n, hops, nhops);
    else
        queue_sim(mw, n, hops, nhops);
}

static rv_status_t on_expand(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    mc_worker_t *mw = mc_of(w);
    mc_hop_t hops[MC_MAX_DEPTH];
    uint8_t s[MC_STATE_MAX];
    mc_msg_t m;
    if (mw == NULL || !read_path(mw, call, &m, hops))
        return RV_ERR_INVALID;
    const rv_mcts_game_t *g = mw->proc->game;
    memset(s, 0, g->state_max);
    if (call->buf_len > 0 && call->buf_len <= g->state_max)
        memcpy(s, call->buf, call->buf_len);
    if (m.nhops == 0 || call->buf_len == 0 || call->buf_len > g->state_max ||
        g->state_len(s) != call->buf_len) {
        rv_error("mcts: a malformed expansion from worker %u dropped",
                 call->src);
        return RV_ERR_INVALID;
    }
    create_child(mw, s, hops, m.nhops);
    return RV_OK;
}

/* Claims edge @p i of node @p n (at @p g) and has its child made by the
 * child's owner: here if that is this worker, else by a call carrying
 * the child's position (rv_call_buffer, even within the process, as the
 * node tables are the owners'). */
static void expand(mc_worker_t *mw, rv_gptr_t g, mc_node_t *n, uint32_t i,
                   mc_hop_t *hops, uint32_t nhops)
{
    const rv_mcts_game_t *game = mw->proc->game;
    mc_edge_t *e = edge_claimed(mw, n, i);
    uint8_t s[MC_STATE_MAX];
    if (e == NULL)
        return;
    atomic_fetch_add_explicit(&e->visits, 1, memory_order_relaxed);
    memcpy(s, n->state, n->state_len);
    game->apply(s, e->move);
    uint32_t owner = pick_owner(mw, s);
    atomic_store_explicit(&e->owner, owner, memory_order_relaxed);
    hops[nhops++] = (mc_hop_t){.node = g, .owner = n->owner, .edge = i};
    if (owner == mw->tid)
        create_child(mw, s, hops, nhops);
    else
        send_path(mw, owner, mc_h.expand, RV_GPTR_NULL, 0, hops, nhops, s,
                  game->state_len(s));
}

/* ---------------------------------------------------------------------- */
/* Selection                                                               */

/* UCB1 over @p n's edges (every one claimed, so every one visited); the
 * wins of selections still in flight are missing, which is the virtual
 * loss that spreads concurrent selections out. An edge whose block its
 * claimer has not published yet is passed over; UINT32_MAX when that
 * leaves none. */
static uint32_t ucb_pick(const mc_worker_t *mw, mc_node_t *n)
{
    double scale = (double)MC_WIN * (double)mw->proc->cfg->simulations_per_leaf;
    double c = mw->proc->c;
    double lnN =
        log((double)atomic_load_explicit(&n->visits, memory_order_relaxed));
    uint32_t best = UINT32_MAX;
    double best_v = -1.0;
    for (uint32_t i = 0; i < n->nedges; i++) {
        mc_edge_t *e = mc_edge(n, i);
        if (e == NULL) {
            i += MC_BLOCK - 1 - i % MC_BLOCK;
            continue;
        }
        uint64_t v = atomic_load_explicit(&e->visits, memory_order_relaxed);
        if (v == 0)
            return i;
        double q =
            (double)atomic_load_explicit(&e->wins, memory_order_relaxed) /
            (scale * (double)v);
        double u = q + c * sqrt(lnN / (double)v);
        if (u > best_v) {
            best_v = u;
            best = i;
        }
    }
    return best;
}

/* Selection from node @p g (this process's) with the path so far: moves
 * down while the nodes may be entered directly, and ends by claiming a
 * child, deferring, or calling the next node's owner. */
static void descend(mc_worker_t *mw, rv_gptr_t g, mc_hop_t *hops,
                    uint32_t nhops)
{
    for (;;) {
        mc_node_t *n = mc_node(g);
        if (n->winner != RV_MCTS_GAME_NONE) {
            backprop_exact(mw, n, hops, nhops);
            return;
        }
        if (nhops == MC_MAX_DEPTH) {
            /* No deeper path fits a call: the node is simulated as a
             * leaf (its visits then stay one short of its edge's). */
            queue_sim(mw, n, hops, nhops);
            return;
        }
        atomic_fetch_add_explicit(&n->visits, 1, memory_order_relaxed);
        /* Claims stop at the last edge: the count never wraps, however
         * often a node is passed through. */
        uint32_t i = atomic_load_explicit(&n->next_claim, memory_order_relaxed);
        if (i < n->nedges)
            i = atomic_fetch_add_explicit(&n->next_claim, 1,
                                          memory_order_relaxed);
        if (i < n->nedges) {
            expand(mw, g, n, i, hops, nhops);
            return;
        }
        /* A claimer of this process publishes its edge's block right
         * after its claim (or ends the job): wait for it in the rare case
         * there is no other edge to take. */
        while ((i = ucb_pick(mw, n)) == UINT32_MAX)
            sched_yield();
        mc_edge_t *e = mc_edge(n, i);
        atomic_fetch_add_explicit(&e->visits, 1, memory_order_relaxed);
        hops[nhops++] = (mc_hop_t){.node = g, .owner = n->owner, .edge = i};
        rv_gptr_t child = atomic_load(&e->child);
        if (child == RV_GPTR_NULL) {
            defer(mw, e, hops, nhops);
            return;
        }
        uint32_t owner = atomic_load_explicit(&e->owner, memory_order_relaxed);
        if (!mc_direct(mw, child, owner)) {
            send_path(mw, owner, mc_h.select, child, 0, hops, nhops, NULL, 0);
            return;
        }
        g = child;
    }
}

static rv_status_t on_select(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    mc_worker_t *mw = mc_of(w);
    mc_hop_t hops[MC_MAX_DEPTH];
    mc_msg_t m;
    if (mw == NULL || !read_path(mw, call, &m, hops) || m.node == RV_GPTR_NULL)
        return RV_ERR_INVALID;
    descend(mw, m.node, hops, m.nhops);
    return RV_OK;
}

bool mc_rollout_start(mc_worker_t *mw)
{
    mc_proc_t *p = mw->proc;
    uint64_t s = atomic_load(&p->started);
    do {
        if ((s & MC_EXPIRED) || s >= atomic_load(&p->target) ||
            s - atomic_load(&p->done) >= p->inflight)
            return false;
    } while (!atomic_compare_exchange_weak(&p->started, &s, s + 1));
    mc_hop_t hops[MC_MAX_DEPTH];
    if (mc_direct(mw, mw->root, mw->root_owner))
        descend(mw, mw->root, hops, 0);
    else
        send_path(mw, mw->root_owner, mc_h.select, mw->root, 0, hops, 0, NULL,
                  0);
    return true;
}

rv_status_t mc_node_register(rv_context_t *ctx)
{
    static const struct {
        const char *name;
        rv_call_fn fn;
        rv_handler_id_t *id;
    } hs[] = {
        {"mcts.select", on_select, &mc_h.select},
        {"mcts.expand", on_expand, &mc_h.expand},
        {"mcts.notify", on_notify, &mc_h.notify},
        {"mcts.backprop", on_backprop, &mc_h.backprop},
    };
    for (size_t i = 0; i < sizeof(hs) / sizeof(hs[0]); i++) {
        rv_status_t st =
            rv_am_register(ctx, hs[i].name, hs[i].fn, NULL, hs[i].id);
        if (st != RV_OK)
            return st;
    }
    return RV_OK;
}
