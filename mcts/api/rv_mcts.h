/**
 * @file rv_mcts.h
 * @brief rivet's distributed tree-parallel Monte-Carlo Tree Search
 * (Seriema, "Seriema: RDMA-based remote invocation with a case-study on
 * Monte-Carlo tree search", section 5.3): a user supplies a game as a
 * struct of callbacks (rv_mcts_game_t); rivet supplies the search, its tree
 * spread over every worker thread of the job, and all its communication.
 *
 * The tree. Every node is owned by one worker. A child's owner is chosen
 * uniformly at random (mcts.owner random), or is the worker the Zobrist
 * hash of its position names (mcts.owner hash): identical positions
 * reached by different move orders are then one node, and the workers'
 * node tables form a transposition table sharded across the job
 * (transposition-driven scheduling, Yoshizoe et al. 2011). Statistics are
 * held by the parent for each of its edges (visits and wins), so a node
 * reached through several parents keeps separate counts per edge.
 *
 * A rollout. Selection starts at the root and moves down by UCB1
 * (exploration constant mcts.c) with a virtual loss: an edge's visits are
 * counted when a selection takes it, its wins only when the result comes
 * back, so concurrent selections spread out. Moving to a child owned by
 * another process is an rv_call to its owner; a child of this process is
 * entered directly (unless mcts.remote_only). A node whose children are
 * not all created claims the next one and asks the child's owner to
 * create it with rv_call_buffer carrying the position; the owner creates
 * it and notifies the parent of its address. Selections that reach an
 * edge whose child is still being created are deferred at the parent and
 * resumed by that notification (deferred selection). The new leaf is
 * handed, through a wait-free queue, to a random worker of its process,
 * which runs mcts.simulations_per_leaf random playouts from it; the
 * result travels back up the path the selection took, by calls to the
 * owners of the path's nodes (or directly within a process).
 *
 * Moves. The search runs in phases of rollouts started by the workers of
 * the root owner's process, up to the number asked for. When a move is
 * played the child's subtree is kept as the new root; what is no longer
 * reachable from it is unlinked by its owners and reclaimed through
 * rma's distributed epoch manager (rv_epoch.h).
 *
 * Running a job. Every process calls rv_mcts_init (main thread, before
 * rv_job_run). In the job, worker 0 of the job is the controller: it
 * calls rv_mcts_position, rv_mcts_search, rv_mcts_play and finally
 * rv_mcts_shutdown; every other worker calls rv_mcts_serve, which takes
 * part in all of it and returns after the controller's rv_mcts_shutdown.
 *
 * @note Thread mode: rv_mcts_init from the main thread before rv_job_run.
 * The game's callbacks must be thread-safe for different states (they
 * are called by every worker at once). rv_mcts_serve from each worker but
 * worker 0, and the controller's calls from worker 0, each on its own
 * rv_worker_t; none of them from a handler.
 */
#ifndef RIVET_RV_MCTS_H
#define RIVET_RV_MCTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rivet.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief A move: an index the game defines (a cell of the board). */
typedef uint16_t rv_mcts_move_t;

/** Most legal moves a position may have. */
#define RV_MCTS_MAX_MOVES 1024

/** Winners, as rv_mcts_game_t.winner and playout return them. */
enum {
    RV_MCTS_GAME_NONE = -1,  /**< the game is not over */
    RV_MCTS_GAME_FIRST = 0,  /**< the first player (Hex: black) won */
    RV_MCTS_GAME_SECOND = 1, /**< the second player (Hex: white) won */
    RV_MCTS_GAME_DRAW = 2,   /**< nobody won */
};

/**
 * @brief A two-player game of perfect information, as callbacks on a
 * position. A position is plain data of at most @c state_max bytes (1024
 * at most): it is copied with memcpy and travels in calls, so it holds no
 * pointers, and equal positions are equal bytes. The search follows paths
 * of at most 400 moves (a deeper node is simulated as a leaf); hashes
 * must be the same in every process.
 * @note Every callback is called from many threads at once, each on its
 * own position: it keeps no shared mutable state.
 */
typedef struct rv_mcts_game {
    const char *name; /**< e.g. "hex" */
    size_t state_max; /**< most bytes of a position */
    /** The bytes of @p s that matter (at most state_max). */
    size_t (*state_len)(const void *s);
    /** The player to move in @p s: 0 (first) or 1 (second). */
    int (*to_play)(const void *s);
    /** Writes the legal moves of @p s into @p moves (room for
     * RV_MCTS_MAX_MOVES) and returns their number; 0 when the game is
     * over. */
    int (*legal_moves)(const void *s, rv_mcts_move_t *moves);
    /** Plays the legal move @p m in @p s. */
    void (*apply)(void *s, rv_mcts_move_t m);
    /** Whether the game is over in @p s. */
    bool (*is_terminal)(const void *s);
    /** The winner of @p s: RV_MCTS_GAME_NONE while it is not over, else
     * RV_MCTS_GAME_FIRST, RV_MCTS_GAME_SECOND or RV_MCTS_GAME_DRAW. */
    int (*winner)(const void *s);
    /** A Zobrist hash of @p s (equal positions, equal hashes). */
    uint64_t (*hash)(const void *s);
    /** Plays @p s to its end at random, using and advancing the
     * generator state @p rng (xorshift64*, non-zero), and returns the
     * winner (RV_MCTS_GAME_FIRST, RV_MCTS_GAME_SECOND or RV_MCTS_GAME_DRAW). @p
     * s is scratch: its content afterwards is unspecified. */
    int (*playout)(void *s, uint64_t *rng);
    /** Writes move @p m of position @p s as text ("c3") into @p buf of
     * @p len bytes; returns @p buf. */
    char *(*move_text)(const void *s, rv_mcts_move_t m, char *buf, size_t len);
    /** Reads a move of @p s from @p text. Returns RV_OK and sets @p m
     * when @p text names a legal move of @p s; otherwise writes why into
     * @p why (@p why_len bytes) and returns RV_ERR_INVALID. */
    rv_status_t (*move_parse)(const void *s, const char *text,
                              rv_mcts_move_t *m, char *why, size_t why_len);
    /** Draws @p s on @p f for a person; may be NULL. */
    void (*print)(const void *s, FILE *f);
} rv_mcts_game_t;

/** Largest Hex board. */
#define RV_MCTS_HEX_MAX 19

/**
 * @brief Hex: board sizes 2 to 19, HexGui/benzene notation (columns
 * a..s, rows 1..19, a1 the top-left corner). Black moves first and
 * connects top and bottom; white connects left and right. A playout fills
 * every empty cell at random and finds the winner with one flood fill.
 * @return the game (a static struct)
 * @note Any thread.
 */
RV_EXPORT const rv_mcts_game_t *rv_mcts_hex(void);

/**
 * @brief An empty Hex board of @p n x @p n cells, black to move.
 * @param [out] s room for rv_mcts_hex()->state_max bytes
 * @param [in]  n the size, 2 .. RV_MCTS_HEX_MAX
 * @return RV_OK; RV_ERR_INVALID for a size out of range (not logged)
 * @note Any thread.
 */
RV_EXPORT rv_status_t rv_mcts_hex_init(void *s, int n);

/** The move that swaps black's first stone under the swap rule
 * ("swap-pieces"): after it a white stone stands on that stone's mirror
 * across the long diagonal (row and column exchanged), black to move. */
#define RV_MCTS_HEX_SWAP ((rv_mcts_move_t)(RV_MCTS_HEX_MAX * RV_MCTS_HEX_MAX))

/**
 * @brief Sets whether the swap rule holds in the Hex position @p s: where
 * it does, RV_MCTS_HEX_SWAP is one of white's legal answers to black's
 * first stone (and the search weighs it like any move). A position made
 * by rv_mcts_hex_init has the rule off; the rule is part of the position
 * (its bytes and hash), so set it before rv_mcts_position.
 * @param [in,out] s a Hex position
 * @param [in]     on whether the rule holds
 * @return RV_OK; RV_ERR_INVALID for a position that is not Hex's
 * @note Any thread.
 */
RV_EXPORT rv_status_t rv_mcts_hex_set_swap(void *s, bool on);

/**
 * @brief Whether the swap rule holds in the Hex position @p s.
 * @param [in] s a Hex position
 * @return true where it holds; false where it does not, or for NULL
 * @note Any thread.
 */
RV_EXPORT bool rv_mcts_hex_swap(const void *s);

/**
 * @brief The size of the Hex board @p s.
 * @param [in] s a Hex position
 * @return its n
 * @note Any thread.
 */
RV_EXPORT int rv_mcts_hex_size(const void *s);

/**
 * @brief Tic-tac-toe (a draw with best play), the small game that shows
 * the interface is not Hex's: cells a1..c3 as in Hex, X moves first.
 * @return the game (a static struct)
 * @note Any thread.
 */
RV_EXPORT const rv_mcts_game_t *rv_mcts_tictactoe(void);

/**
 * @brief An empty tic-tac-toe board.
 * @param [out] s room for rv_mcts_tictactoe()->state_max bytes
 * @note Any thread.
 */
RV_EXPORT void rv_mcts_tictactoe_init(void *s);

/**
 * @brief Installs the search layer in @p ctx (after am and rma, which it
 * is built on) for @p game, and registers its handlers.
 * @param [in] ctx  the context, before rv_job_run
 * @param [in] game the game; must outlive the context
 * @return RV_OK (also when installed already with the same game);
 *         RV_ERR_INVALID for a NULL argument, a game without a required
 *         callback or with positions of more than 1024 bytes, another game
 *         installed already, or while a job runs (logged); RV_ERR_CONFIG
 *         for a malformed mcts.c (logged); rv_rma_init's and
 *         rv_am_register's errors
 * @note Main thread, in every process, before rv_job_run.
 */
RV_EXPORT rv_status_t rv_mcts_init(rv_context_t *ctx,
                                   const rv_mcts_game_t *game);

/**
 * @brief Serves the search on a worker other than the controller: runs
 * calls and playouts, and takes part in every step the controller
 * starts, until the controller calls rv_mcts_shutdown.
 * @param [in] w the worker (not worker 0 of the job)
 * @return RV_OK after the shutdown; RV_ERR_INVALID on worker 0 or a job
 *         without the layer (logged); a collective's or a call's error
 * @note From @p w's own thread, not from a handler. It yields the CPU
 *       (sched_yield, then short sleeps) while nothing happens.
 */
RV_EXPORT rv_status_t rv_mcts_serve(rv_worker_t *w);

/**
 * @brief Sets the position searched from: the job's tree is dropped and
 * reclaimed, and a new root made.
 * @param [in] w     the controller (worker 0)
 * @param [in] state the position (copied; reusable on return)
 * @return RV_OK; RV_ERR_INVALID (logged) off worker 0 or without the
 *         layer, or (not logged) for a NULL @p state. A step that fails
 *         once the command is under way ends the job (rv_abort): the
 *         workers' collectives could not line up again.
 * @note Worker 0's thread; the other workers are in rv_mcts_serve.
 */
RV_EXPORT rv_status_t rv_mcts_position(rv_worker_t *w, const void *state);

/** @brief One move of the root and its edge's statistics. */
typedef struct rv_mcts_edge {
    rv_mcts_move_t move; /**< the move */
    uint64_t visits;     /**< rollouts that took it */
    double win_rate;     /**< the mover's wins per playout, 0 .. 1 */
} rv_mcts_edge_t;

/** @brief What a search found. */
typedef struct rv_mcts_result {
    rv_mcts_move_t best; /**< the most visited move (ties: the higher
                         win rate); valid when nmoves > 0 */
    int nmoves;          /**< entries of @c moves (legal moves) */
    rv_mcts_edge_t moves[RV_MCTS_MAX_MOVES]; /**< by visits, most first */
    uint64_t rollouts;    /**< rollouts this search completed */
    uint64_t root_visits; /**< rollouts the root has seen, this search
                               and those kept from earlier moves */
    uint64_t nodes;       /**< nodes alive in the job */
    uint64_t deferred;    /**< selections deferred since the job
                               started */
    double seconds;       /**< wall time of the search */
} rv_mcts_result_t;

/**
 * @brief Runs @p rollouts rollouts from the current root on every worker
 * of the job, and reports the root's moves.
 * @param [in]  w        the controller (worker 0)
 * @param [in]  rollouts rollouts to add (0: mcts.rollouts_per_move)
 * @param [out] res      what it found (the caller's)
 * @return RV_OK; RV_ERR_INVALID (logged) off worker 0, without the layer,
 *         or when the root's game is over (res->nmoves 0); a
 *         collective's or a call's error
 * @note Worker 0's thread; the other workers are in rv_mcts_serve.
 */
RV_EXPORT rv_status_t rv_mcts_search(rv_worker_t *w, uint64_t rollouts,
                                     rv_mcts_result_t *res);

/** @brief A search's rollouts left unbounded: rv_mcts_search_timed runs
 * until its time is up. */
#define RV_MCTS_ROLLOUTS_UNBOUNDED UINT64_MAX

/**
 * @brief rv_mcts_search with a wall-time budget: the search ends after
 * @p rollouts rollouts or @p seconds, whichever comes first, and reports
 * the root's moves as rv_mcts_search does.
 *
 * The time counts from the barrier that starts the search on every
 * worker. When it is up, no rollout starts and those in flight finish,
 * so the call returns later than @p seconds by about one rollout's time
 * (a selection, a playout and a backpropagation across the job) plus the
 * summary's collectives; a program playing at a clock keeps a margin for
 * both (rivet-mcts's GTP engine measures them). At least one rollout is
 * run, however short the time. res->rollouts says how many ran.
 * @param [in]  w        the controller (worker 0)
 * @param [in]  rollouts most rollouts to add (0: mcts.rollouts_per_move;
 *                       RV_MCTS_ROLLOUTS_UNBOUNDED: as many as the time
 *                       allows)
 * @param [in]  seconds  the budget; 0 or less: none (rv_mcts_search)
 * @param [out] res      what it found (the caller's)
 * @return as rv_mcts_search's; RV_ERR_INVALID (logged) when neither
 *         bounds the search
 * @note Worker 0's thread; the other workers are in rv_mcts_serve.
 */
RV_EXPORT rv_status_t rv_mcts_search_timed(rv_worker_t *w, uint64_t rollouts,
                                           double seconds,
                                           rv_mcts_result_t *res);

/**
 * @brief Plays @p m at the root: the child's subtree becomes the new
 * root (created if the search never reached it) and everything else is
 * reclaimed through the epoch manager.
 * @param [in] w the controller (worker 0)
 * @param [in] m a legal move of the root position
 * @return RV_OK; RV_ERR_INVALID (logged) off worker 0, without the
 *         layer, or for an illegal move; a collective's or a call's error
 * @note Worker 0's thread; the other workers are in rv_mcts_serve.
 */
RV_EXPORT rv_status_t rv_mcts_play(rv_worker_t *w, rv_mcts_move_t m);

/** @brief Counters of the whole job's search. */
typedef struct rv_mcts_stats {
    uint64_t nodes_alive;    /**< nodes allocated and not yet freed */
    uint64_t nodes_created;  /**< nodes made since the job started */
    uint64_t nodes_freed;    /**< nodes reclaimed */
    uint64_t transpositions; /**< creations that found the node existing */
    uint64_t playouts;       /**< random playouts run */
    uint64_t visits_total;   /**< the root's edge visits, summed */
    uint64_t rollouts_done;  /**< rollouts completed at the root since the
                                  root was made or kept */
    uint64_t inconsistent;   /**< nodes and edges whose visits disagree
                                  (a node's with its edges'; under
                                  mcts.owner random, a child's with its
                                  edge's): 0 unless something was lost or
                                  counted twice */
} rv_mcts_stats_t;

/**
 * @brief Reads the job's counters (a collective the controller starts).
 * @param [in]  w     the controller (worker 0)
 * @param [out] stats the counters, summed over the job
 * @return RV_OK; RV_ERR_INVALID (logged) off worker 0 or without the
 *         layer; a collective's error
 * @note Worker 0's thread; the other workers are in rv_mcts_serve.
 */
RV_EXPORT rv_status_t rv_mcts_stats(rv_worker_t *w, rv_mcts_stats_t *stats);

/**
 * @brief Ends the search: the tree is reclaimed and every rv_mcts_serve
 * returns.
 * @param [in] w the controller (worker 0)
 * @return RV_OK; RV_ERR_INVALID (logged) off worker 0 or without the
 *         layer; a collective's error
 * @note Worker 0's thread. After it, rv_mcts_* calls fail until the next
 *       job.
 */
RV_EXPORT rv_status_t rv_mcts_shutdown(rv_worker_t *w);

/**
 * @brief A plain sequential UCT search in the calling thread, with the
 * game's own playout and no rivet calls: the baseline of the framework.
 * @param [in]  game        the game
 * @param [in]  state       the root position (not changed)
 * @param [in]  rollouts    rollouts to run
 * @param [in]  sims        playouts per leaf (as mcts.simulations_per_leaf)
 * @param [in]  c           exploration constant (as mcts.c)
 * @param [in]  seed        the generator's seed (non-zero)
 * @param [out] res         what it found (the caller's)
 * @return RV_OK; RV_ERR_INVALID when the game is over; RV_ERR_NO_MEMORY
 * @note Any thread; it allocates its tree and frees it before returning
 *       (res->seconds counts both).
 */
RV_EXPORT rv_status_t rv_mcts_uct_search(const rv_mcts_game_t *game,
                                         const void *state, uint64_t rollouts,
                                         int sims, double c, uint64_t seed,
                                         rv_mcts_result_t *res);

/** @brief A sequential UCT tree kept from one search to the next. */
typedef struct rv_mcts_uct_tree rv_mcts_uct_tree_t;

/**
 * @brief A sequential UCT tree of one root, for searches that keep what
 * they found across moves (rv_mcts_uct_tree_play), as the distributed search
 * does.
 * @param [in]  game  the game
 * @param [in]  state the root position (copied)
 * @param [in]  sims  playouts per leaf (as mcts.simulations_per_leaf)
 * @param [in]  c     exploration constant (as mcts.c)
 * @param [in]  seed  the generator's seed (non-zero)
 * @param [out] tree  the tree (NULL on an error)
 * @return RV_OK; RV_ERR_INVALID for a NULL argument, sims < 1, c < 0 or a
 *         finished game; RV_ERR_NO_MEMORY
 * @note Any thread; a tree is used by one thread at a time.
 */
RV_EXPORT rv_status_t rv_mcts_uct_tree_create(const rv_mcts_game_t *game,
                                              const void *state, int sims,
                                              double c, uint64_t seed,
                                              rv_mcts_uct_tree_t **tree);

/**
 * @brief Adds @p rollouts rollouts to @p tree and reports its root's
 * moves: res->root_visits counts those kept from earlier moves too,
 * res->nodes the tree's nodes, res->seconds this search alone.
 * @param [in]  tree     the tree
 * @param [in]  rollouts rollouts to add
 * @param [out] res      what it found (the caller's)
 * @return RV_OK; RV_ERR_INVALID for a NULL argument or a root whose game
 *         is over (res->nmoves 0); RV_ERR_NO_MEMORY (the rollouts done
 *         are kept)
 * @note The thread using the tree.
 */
RV_EXPORT rv_status_t rv_mcts_uct_tree_search(rv_mcts_uct_tree_t *tree,
                                              uint64_t rollouts,
                                              rv_mcts_result_t *res);

/**
 * @brief Plays @p m at the root: the child's subtree, with its
 * statistics, becomes the root (a new node if no rollout reached it) and
 * the rest of the tree is freed before it returns.
 * @param [in] tree the tree
 * @param [in] m    a legal move of the root position
 * @return RV_OK; RV_ERR_INVALID for a NULL tree or a move that is not
 *         legal at the root; RV_ERR_NO_MEMORY (the tree unchanged)
 * @note The thread using the tree.
 */
RV_EXPORT rv_status_t rv_mcts_uct_tree_play(rv_mcts_uct_tree_t *tree,
                                            rv_mcts_move_t m);

/**
 * @brief Frees @p tree and every node it holds.
 * @param [in] tree the tree (NULL: nothing)
 */
RV_EXPORT void rv_mcts_uct_tree_destroy(rv_mcts_uct_tree_t *tree);

/*
 * Names before rivet 0.2 (deprecated), out of the reference.
 * The tree search's public names now all start with rv_mcts_ (before,
 * rv_uct_search read as a call of UCX's UCT layer to those who use UCX).
 * The old names compile for one more minor release, with a warning that
 * names the new one; CHANGELOG.md says how to migrate. The old
 * rv_mcts_move_t (a root move and its statistics) is rv_mcts_edge_t: that
 * name now means a move, so it has no alias.
 */
/** @cond RV_DEPRECATED_NAMES */
typedef rv_mcts_move_t rv_move_t RV_DEPRECATED("use rv_mcts_move_t");
typedef rv_mcts_game_t rv_game_t RV_DEPRECATED("use rv_mcts_game_t");
typedef rv_mcts_uct_tree_t
    rv_uct_tree_t RV_DEPRECATED("use rv_mcts_uct_tree_t");
enum {
    RV_GAME_MAX_MOVES RV_DEPRECATED("use RV_MCTS_MAX_MOVES") =
        RV_MCTS_MAX_MOVES,
    RV_GAME_NONE RV_DEPRECATED("use RV_MCTS_GAME_NONE") = RV_MCTS_GAME_NONE,
    RV_GAME_FIRST RV_DEPRECATED("use RV_MCTS_GAME_FIRST") = RV_MCTS_GAME_FIRST,
    RV_GAME_SECOND RV_DEPRECATED("use RV_MCTS_GAME_SECOND") =
        RV_MCTS_GAME_SECOND,
    RV_GAME_DRAW RV_DEPRECATED("use RV_MCTS_GAME_DRAW") = RV_MCTS_GAME_DRAW,
    RV_HEX_MAX RV_DEPRECATED("use RV_MCTS_HEX_MAX") = RV_MCTS_HEX_MAX,
};
RV_DEPRECATED("use rv_mcts_hex")
RV_EXPORT const rv_mcts_game_t *rv_game_hex(void);
RV_DEPRECATED("use rv_mcts_hex_init")
RV_EXPORT rv_status_t rv_hex_init(void *s, int n);
RV_DEPRECATED("use rv_mcts_hex_size") RV_EXPORT int rv_hex_size(const void *s);
RV_DEPRECATED("use rv_mcts_tictactoe")
RV_EXPORT const rv_mcts_game_t *rv_game_tictactoe(void);
RV_DEPRECATED("use rv_mcts_tictactoe_init")
RV_EXPORT void rv_tictactoe_init(void *s);
RV_DEPRECATED("use rv_mcts_uct_search")
RV_EXPORT rv_status_t rv_uct_search(const rv_mcts_game_t *game,
                                    const void *state, uint64_t rollouts,
                                    int sims, double c, uint64_t seed,
                                    rv_mcts_result_t *res);
RV_DEPRECATED("use rv_mcts_uct_tree_create")
RV_EXPORT rv_status_t rv_uct_tree_create(const rv_mcts_game_t *game,
                                         const void *state, int sims, double c,
                                         uint64_t seed,
                                         rv_mcts_uct_tree_t **tree);
RV_DEPRECATED("use rv_mcts_uct_tree_search")
RV_EXPORT rv_status_t rv_uct_tree_search(rv_mcts_uct_tree_t *tree,
                                         uint64_t rollouts,
                                         rv_mcts_result_t *res);
RV_DEPRECATED("use rv_mcts_uct_tree_play")
RV_EXPORT rv_status_t rv_uct_tree_play(rv_mcts_uct_tree_t *tree,
                                       rv_mcts_move_t m);
RV_DEPRECATED("use rv_mcts_uct_tree_destroy")
RV_EXPORT void rv_uct_tree_destroy(rv_mcts_uct_tree_t *tree);
/** @endcond */

#ifdef __cplusplus
}
#endif

#endif
