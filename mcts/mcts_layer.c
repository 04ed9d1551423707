/*
 * The search layer's slot, its workers, and the commands that drive a
 * job's search. Worker 0 of the job is the controller: each of its calls
 * (rv_mcts_position, _search, _play, _stats, _shutdown) broadcasts a
 * command, and every worker, the controller included, runs the command's
 * steps in the same order, so the collectives inside them (rv_quiesce,
 * rv_coll_allreduce, rv_barrier, the epoch manager's) line up. The other
 * workers wait for commands in rv_mcts_serve, running calls and playouts
 * meanwhile.
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcts_internal.h"

int mc_slot = -1;
mc_handlers_t mc_h;

static const rv_layer_ops_t mcts_layer;

/* A command as it travels (mcts.cmd, broadcast by the controller). */
typedef struct mc_cmd_wire {
    uint32_t op;
    uint32_t seq;
    uint64_t arg;
    uint64_t limit_ns;
} mc_cmd_wire_t;

/* Spins of an idle worker before it yields, and before it sleeps. */
#define MC_IDLE_YIELD 64
#define MC_IDLE_SLEEP 4096

static double now_s(void)
{
    return (double)rv_time_ns() * 1e-9;
}

/* ---------------------------------------------------------------------- */
/* Commands                                                                */

/* The controller's commands queue at each worker in order (one may
 * arrive while a worker still finishes the previous one's last
 * collective). */
static rv_status_t on_cmd(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    mc_worker_t *mw = mc_of(w);
    mc_cmd_wire_t c;
    if (mw == NULL || call->args_len != sizeof(c) || call->src != 0 ||
        !call->broadcast || call->buf_len > mw->proc->game->state_max) {
        rv_error("mcts: a malformed command from worker %u dropped", call->src);
        return RV_ERR_INVALID;
    }
    memcpy(&c, call->args, sizeof(c));
    if (c.op <= MC_OP_NONE || c.op > MC_OP_QUIT) {
        rv_error("mcts: an unknown command %u dropped", c.op);
        return RV_ERR_INVALID;
    }
    mc_cmd_t *cmd = calloc(1, sizeof(*cmd) + mw->proc->game->state_max);
    if (cmd == NULL) {
        rv_error("mcts: out of memory for a command; the job cannot go on");
        rv_abort(rv_worker_context(w), 1, "mcts: out of memory");
    }
    cmd->op = c.op;
    cmd->seq = c.seq;
    cmd->arg = c.arg;
    cmd->limit_ns = c.limit_ns;
    if (call->buf_len > 0)
        memcpy(cmd->state, call->buf, call->buf_len);
    *mw->cmd_tail = cmd;
    mw->cmd_tail = &cmd->next;
    return RV_OK;
}

static rv_status_t on_stop(rv_worker_t *w, rv_call_t *call, void *arg)
{
    (void)arg;
    mc_worker_t *mw = mc_of(w);
    uint32_t seq;
    if (mw == NULL || call->args_len != sizeof(seq))
        return RV_ERR_INVALID;
    memcpy(&seq, call->args, sizeof(seq));
    if (seq > mw->stop_seq)
        mw->stop_seq = seq;
    return RV_OK;
}

/* Nothing to do: spin a little, then yield the core, then (outside a
 * search, where nothing is urgent) sleep briefly. */
static void idle(mc_worker_t *mw, bool searching)
{
    mw->idle++;
    if (mw->idle < MC_IDLE_YIELD)
        return;
    if (searching || mw->idle < MC_IDLE_SLEEP) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
}

/* Sets the search's counters in every process (the root's moves from
 * process to process as moves are played, and the summary adds them
 * all) and its target; each process's worker 0 does. */
static void search_reset(mc_worker_t *mw, const mc_cmd_t *cmd, bool root_proc)
{
    mc_proc_t *p = mw->proc;
    if (mw->local != 0)
        return;
    atomic_store(&p->started, 0);
    atomic_store(&p->done, 0);
    atomic_store(&p->target, root_proc ? cmd->arg : 0);
    /* The commands' numbers start again with each job of the process. */
    atomic_store(&p->stop_sent, 0);
}

/* A search's rollouts: the workers of the root's process start them (no
 * more than mcts.inflight per worker of the job in flight), every worker
 * runs calls and playouts, until the last rollout's return broadcasts
 * the end. A search with a time budget counts it from the barrier that
 * starts it; when it is up, the rollouts in flight finish and no more
 * start (after the first, so that a search always has a move). */
static rv_status_t search(mc_worker_t *mw, const mc_cmd_t *cmd)
{
    mc_proc_t *p = mw->proc;
    bool root_proc = rv_gptr_rank(mw->root) == p->rank;
    search_reset(mw, cmd, root_proc);
    rv_status_t st = rv_barrier(mw->w);
    if (st != RV_OK)
        return st;
    int64_t deadline =
        cmd->limit_ns > 0 ? rv_time_ns() + (int64_t)cmd->limit_ns : 0;
    while (mw->stop_seq < cmd->seq) {
        bool busy = false;
        for (int k = 0; root_proc && k < 8 && mc_rollout_start(mw); k++)
            busy = true;
        busy |= mc_sims_run(mw, 1) > 0;
        busy |= rv_progress(mw->w) > 0;
        if (root_proc && deadline != 0 && rv_time_ns() >= deadline &&
            atomic_load(&p->done) > 0)
            mc_search_expire(mw);
        if (busy)
            mw->idle = 0;
        else
            idle(mw, true);
    }
    return rv_quiesce(mw->w);
}

/* Runs command @p cmd's steps on this worker; @p stats and @p res get
 * the controller's results. */
static rv_status_t exec(mc_worker_t *mw, const mc_cmd_t *cmd,
                        rv_mcts_stats_t *stats, rv_mcts_result_t *res)
{
    rv_status_t st = RV_OK;
    mw->cmd_seq = cmd->seq;
    switch ((mc_op_t)cmd->op) {
    case MC_OP_POSITION:
        return mc_tree_position(mw, cmd->state);
    case MC_OP_SEARCH:
        st = search(mw, cmd);
        if (st == RV_OK)
            st = mc_tree_summary(mw, false, NULL, res);
        return st;
    case MC_OP_PLAY:
        return mc_tree_play(mw, (rv_mcts_move_t)cmd->arg, cmd->seq);
    case MC_OP_STATS:
        return mc_tree_summary(mw, true, stats, NULL);
    case MC_OP_QUIT:
        st = mc_tree_drop_all(mw);
        rv_epoch_deregister(mw->tok);
        mw->tok = NULL;
        if (st == RV_OK)
            st = rv_epoch_manager_destroy(mw->w, mw->em);
        mw->quit = true;
        return st;
    case MC_OP_NONE:
        break;
    }
    return RV_ERR_INVALID;
}

/* The next command, if one arrived. */
static mc_cmd_t *cmd_take(mc_worker_t *mw)
{
    mc_cmd_t *cmd = mw->cmds;
    if (cmd != NULL) {
        mw->cmds = cmd->next;
        if (mw->cmds == NULL)
            mw->cmd_tail = &mw->cmds;
    }
    return cmd;
}

/* The first command of a worker creates the job's epoch manager (a
 * collective, the first of the search's on every worker). */
static rv_status_t worker_begin(mc_worker_t *mw)
{
    if (mw->begun)
        return RV_OK;
    rv_epoch_manager_t *em;
    rv_status_t st =
        rv_epoch_manager_create(mw->w, mc_tree_free_fn(), mw->proc, &em);
    if (st != RV_OK)
        return st;
    mw->em = em;
    mw->tok = rv_epoch_register(em);
    if (mw->tok == NULL)
        mc_fatal(mw, "no epoch token for the tree's reclamation");
    mw->begun = true;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Serving and the controller                                              */

rv_status_t rv_mcts_serve(rv_worker_t *w)
{
    mc_worker_t *mw = mc_of(w);
    if (mw == NULL || mw->tid == 0) {
        rv_error("rv_mcts_serve on %s: the other workers serve while worker "
                 "0 controls",
                 mw == NULL ? "a job without rv_mcts_init" : "worker 0");
        return RV_ERR_INVALID;
    }
    rv_status_t st = worker_begin(mw);
    while (st == RV_OK && !mw->quit) {
        mc_cmd_t *cmd = cmd_take(mw);
        if (cmd != NULL) {
            /* A command is a sequence of collectives: a worker that
             * failed one cannot rejoin the others' next step. */
            if (exec(mw, cmd, NULL, NULL) != RV_OK)
                mc_fatal(mw, "a step of the controller's command failed");
            free(cmd);
            mw->idle = 0;
            continue;
        }
        bool busy = mc_sims_run(mw, 1) > 0;
        busy |= rv_progress(w) > 0;
        if (busy)
            mw->idle = 0;
        else
            idle(mw, false);
    }
    return st;
}

/* The controller's side of a command: broadcast it, wait for its own
 * copy, and run it like every worker. */
static rv_status_t control(rv_worker_t *w, const char *what, mc_op_t op,
                           uint64_t arg, uint64_t limit_ns, const void *state,
                           rv_mcts_stats_t *stats, rv_mcts_result_t *res)
{
    mc_worker_t *mw = mc_of(w);
    if (mw == NULL || mw->tid != 0 || mw->quit) {
        rv_error("%s: %s", what,
                 mw == NULL ? "the job has no search layer (rv_mcts_init)"
                 : mw->quit ? "the search was shut down"
                            : "only worker 0 controls the search");
        return RV_ERR_INVALID;
    }
    rv_status_t st = worker_begin(mw);
    if (st != RV_OK)
        return st;
    mc_cmd_wire_t c = {
        .op = op, .seq = ++mw->next_seq, .arg = arg, .limit_ns = limit_ns};
    size_t n = state ? mw->proc->game->state_len(state) : 0;
    st = rv_broadcast_buffer(w, mc_h.cmd, &c, sizeof(c), state, n, NULL, 0);
    if (st != RV_OK)
        return st;
    mc_cmd_t *cmd;
    while ((cmd = cmd_take(mw)) == NULL)
        rv_progress(w);
    st = exec(mw, cmd, stats, res);
    free(cmd);
    if (st != RV_OK)
        mc_fatal(mw, "a step of the controller's command failed");
    return st;
}

rv_status_t rv_mcts_position(rv_worker_t *w, const void *state)
{
    if (state == NULL)
        return RV_ERR_INVALID;
    return control(w, "rv_mcts_position", MC_OP_POSITION, 0, 0, state, NULL,
                   NULL);
}

/* Whether @p m is a legal move of the controller's root position. */
static bool legal(const mc_worker_t *mw, rv_mcts_move_t m)
{
    rv_mcts_move_t moves[RV_MCTS_MAX_MOVES];
    int n = mw->proc->game->legal_moves(mw->root_state, moves);
    for (int i = 0; i < n; i++)
        if (moves[i] == m)
            return true;
    return false;
}

static rv_status_t root_usable(rv_worker_t *w, const char *what)
{
    mc_worker_t *mw = mc_of(w);
    if (mw != NULL && mw->tid == 0 && !mw->quit && mw->root == RV_GPTR_NULL) {
        rv_error("%s: no position yet (rv_mcts_position first)", what);
        return RV_ERR_INVALID;
    }
    return RV_OK;
}

/* A search for @p rollouts rollouts within @p limit_ns (0: no limit), as
 * the program's call @p what asked for it. */
static rv_status_t search_control(rv_worker_t *w, const char *what,
                                  uint64_t rollouts, uint64_t limit_ns,
                                  rv_mcts_result_t *res)
{
    mc_worker_t *mw = mc_of(w);
    if (res == NULL || root_usable(w, what) != RV_OK)
        return RV_ERR_INVALID;
    memset(res, 0, offsetof(rv_mcts_result_t, moves));
    if (mw != NULL && mw->root != RV_GPTR_NULL &&
        mw->proc->game->is_terminal(mw->root_state)) {
        rv_error("%s: the game is over in the root position", what);
        return RV_ERR_INVALID;
    }
    if (rollouts == 0 && mw != NULL)
        rollouts = (uint64_t)mw->proc->cfg->rollouts_per_move;
    double t0 = now_s();
    rv_status_t st =
        control(w, what, MC_OP_SEARCH, rollouts, limit_ns, NULL, NULL, res);
    res->seconds = now_s() - t0;
    if (st != RV_OK)
        res->rollouts = 0;
    return st;
}

rv_status_t rv_mcts_search_timed(rv_worker_t *w, uint64_t rollouts,
                                 double seconds, rv_mcts_result_t *res)
{
    if (!(seconds > 0) && rollouts == RV_MCTS_ROLLOUTS_UNBOUNDED) {
        rv_error("rv_mcts_search_timed: neither a number of rollouts nor a "
                 "time bounds the search");
        return RV_ERR_INVALID;
    }
    /* At least 1 ns: 0 says "no limit" on the wire. */
    uint64_t limit_ns = 0;
    if (seconds > 0)
        limit_ns = seconds >= 1e9   ? UINT64_MAX / 4
                   : seconds < 1e-9 ? 1
                                    : (uint64_t)(seconds * 1e9);
    return search_control(w, "rv_mcts_search_timed", rollouts, limit_ns, res);
}

rv_status_t rv_mcts_search(rv_worker_t *w, uint64_t rollouts,
                           rv_mcts_result_t *res)
{
    if (rollouts == RV_MCTS_ROLLOUTS_UNBOUNDED) {
        rv_error("rv_mcts_search: an unbounded search needs a time "
                 "(rv_mcts_search_timed)");
        return RV_ERR_INVALID;
    }
    return search_control(w, "rv_mcts_search", rollouts, 0, res);
}

rv_status_t rv_mcts_play(rv_worker_t *w, rv_mcts_move_t m)
{
    mc_worker_t *mw = mc_of(w);
    if (root_usable(w, "rv_mcts_play") != RV_OK)
        return RV_ERR_INVALID;
    if (mw != NULL && mw->tid == 0 && !legal(mw, m)) {
        rv_error("rv_mcts_play: move %u is not legal in the root position",
                 (unsigned)m);
        return RV_ERR_INVALID;
    }
    return control(w, "rv_mcts_play", MC_OP_PLAY, m, 0, NULL, NULL, NULL);
}

rv_status_t rv_mcts_stats(rv_worker_t *w, rv_mcts_stats_t *stats)
{
    if (stats == NULL)
        return RV_ERR_INVALID;
    return control(w, "rv_mcts_stats", MC_OP_STATS, 0, 0, NULL, stats, NULL);
}

rv_status_t rv_mcts_shutdown(rv_worker_t *w)
{
    return control(w, "rv_mcts_shutdown", MC_OP_QUIT, 0, 0, NULL, NULL, NULL);
}

/* ---------------------------------------------------------------------- */
/* The layer                                                               */

static void worker_free(mc_worker_t *mw)
{
    mc_cmd_t *cmd;
    while ((cmd = cmd_take(mw)) != NULL)
        free(cmd);
    free(mw->nodes);
    free(mw->scratch);
    free(mw->root_state);
    free(mw);
}

static rv_status_t mcts_worker_start(rv_worker_t *w)
{
    mc_proc_t *p = rv_layer_context(rv_worker_context(w), mc_slot);
    mc_worker_t *mw = calloc(1, sizeof(*mw));
    if (mw == NULL)
        return RV_ERR_NO_MEMORY;
    mw->w = w;
    mw->proc = p;
    mw->tid = rv_worker_tid(w);
    mw->local = rv_worker_local(w);
    mw->cmd_tail = &mw->cmds;
    mw->scratch = malloc(p->game->state_max);
    mw->root_state = calloc(1, p->game->state_max);
    if (mw->scratch == NULL || mw->root_state == NULL) {
        worker_free(mw);
        return RV_ERR_NO_MEMORY;
    }
    uint64_t seed = p->cfg->seed
                        ? (uint64_t)p->cfg->seed
                        : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
    mw->rng = mc_rng_seed(seed + mw->tid);
    __cds_wfcq_init(&mw->sim_head, &mw->sim_tail);
    p->workers[mw->local] = mw;
    rv_worker_layer_set(w, mc_slot, mw);
    return RV_OK;
}

/* The job ends: what the search did not reclaim (a program that never
 * called rv_mcts_shutdown) is freed here, each worker its own. */
static void mcts_worker_stop(rv_worker_t *w)
{
    mc_worker_t *mw = mc_of(w);
    if (mw == NULL)
        return;
    struct cds_wfcq_node *q;
    while ((q = __cds_wfcq_dequeue_nonblocking(&mw->sim_head, &mw->sim_tail)) !=
               NULL &&
           q != CDS_WFCQ_WOULDBLOCK)
        free(caa_container_of(q, mc_sim_t, qnode));
    HASH_CLEAR(hh, mw->table);
    for (size_t i = 0; i < mw->nnodes; i++)
        mc_node_free(mw->proc, mw->nodes[i]);
    if (mw->tok != NULL)
        rv_epoch_deregister(mw->tok);
    mw->proc->workers[mw->local] = NULL;
    rv_worker_layer_set(w, mc_slot, NULL);
    worker_free(mw);
}

static void mcts_context_fini(rv_context_t *ctx)
{
    mc_proc_t *p = rv_layer_context(ctx, mc_slot);
    if (p != NULL) {
        free(p->workers);
        free(p);
    }
    mc_slot = -1;
}

static const rv_layer_ops_t mcts_layer = {
    .name = "mcts",
    .worker_start = mcts_worker_start,
    .worker_stop = mcts_worker_stop,
    .context_fini = mcts_context_fini,
};

static bool game_complete(const rv_mcts_game_t *g)
{
    return g->state_len && g->to_play && g->legal_moves && g->apply &&
           g->is_terminal && g->winner && g->hash && g->playout &&
           g->move_text && g->move_parse && g->state_max > 0 &&
           g->state_max <= MC_STATE_MAX;
}

static rv_status_t handlers_register(rv_context_t *ctx)
{
    rv_status_t st = rv_am_register(ctx, "mcts.cmd", on_cmd, NULL, &mc_h.cmd);
    if (st == RV_OK)
        st = rv_am_register(ctx, "mcts.stop", on_stop, NULL, &mc_h.stop);
    if (st == RV_OK)
        st = mc_node_register(ctx);
    if (st == RV_OK)
        st = mc_tree_register(ctx);
    return st;
}

rv_status_t rv_mcts_init(rv_context_t *ctx, const rv_mcts_game_t *game)
{
    if (ctx == NULL || game == NULL)
        return RV_ERR_INVALID;
    int slot = rv_layer_find(ctx, &mcts_layer);
    if (slot >= 0) {
        mc_proc_t *p = rv_layer_context(ctx, slot);
        return p->game == game ? RV_OK : RV_ERR_INVALID;
    }
    if (!game_complete(game)) {
        rv_error("rv_mcts_init: game '%s' lacks a callback, or its "
                 "positions are larger than %d bytes",
                 game->name ? game->name : "?", MC_STATE_MAX);
        return RV_ERR_INVALID;
    }
    rv_status_t st = rv_rma_init(ctx);
    if (st != RV_OK)
        return st;
    mc_proc_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return RV_ERR_NO_MEMORY;
    p->game = game;
    p->cfg = mcts_config(ctx);
    p->rank = rv_rank(ctx);
    p->threads = rv_threads(ctx);
    p->nworkers = rv_nworkers(ctx);
    p->inflight = (uint64_t)p->cfg->inflight * p->nworkers;
    p->workers = calloc((size_t)p->threads, sizeof(*p->workers));
    st = p->workers == NULL ? RV_ERR_NO_MEMORY : mcts_parse_c(p->cfg->c, &p->c);
    if (st == RV_OK)
        st = handlers_register(ctx);
    if (st == RV_OK)
        st = rv_layer_install(ctx, &mcts_layer, p, &mc_slot);
    if (st != RV_OK) {
        free(p->workers);
        free(p);
    }
    return st;
}
