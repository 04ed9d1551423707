/*
 * nim: a new game for rivet's distributed tree search. Nim with heaps of
 * 3, 4 and 5: a move takes one or more objects from one heap, and whoever
 * takes the last object wins. A game is a struct of callbacks on a
 * position of plain bytes (rv_mcts_game_t); rivet runs the search, its
 * tree spread over every worker of the job. The first player wins by
 * leaving heaps whose XOR is 0: from 3, 4, 5 the one such move takes 2
 * from heap a. The controller plays the game out, searching before each
 * move, says whether the search found that move, and checks that the
 * job's tree stayed consistent (rv_mcts_stats).
 *
 *   rivetrun -n 2 -c job.yaml ./nim [rollouts per move]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rivet.h>
#include <rv_mcts.h>

#define HEAPS 3

typedef struct { /* plain bytes: copied with memcpy, sent in calls */
    uint8_t heap[HEAPS];
    uint8_t to_play; /* 0: the first player */
} nim_t;

/* Move m takes m % 16 + 1 objects from heap m / 16. */
static int nim_moves(const void *sv, rv_mcts_move_t *moves)
{
    const nim_t *s = sv;
    int n = 0;
    for (int h = 0; h < HEAPS; h++)
        for (int t = 1; t <= s->heap[h]; t++)
            moves[n++] = (rv_mcts_move_t)(h * 16 + t - 1);
    return n;
}
static void nim_apply(void *sv, rv_mcts_move_t m)
{
    nim_t *s = sv;
    s->heap[m / 16] -= (uint8_t)(m % 16 + 1);
    s->to_play ^= 1;
}
static bool nim_over(const void *sv)
{
    const nim_t *s = sv;
    return s->heap[0] + s->heap[1] + s->heap[2] == 0;
}
/* The player who took the last object is the one not to move. */
static int nim_winner(const void *sv)
{
    const nim_t *s = sv;
    return nim_over(s) ? (s->to_play ^ 1) : RV_MCTS_GAME_NONE;
}
static uint64_t nim_hash(const void *sv)
{
    uint64_t h = 0;
    memcpy(&h, sv, sizeof(nim_t));
    return h * 0x9e3779b97f4a7c15ull; /* equal positions, equal hashes */
}
static int nim_playout(void *sv, uint64_t *rng) /* uniform random moves */
{
    rv_mcts_move_t moves[16 * HEAPS];
    int n;
    while ((n = nim_moves(sv, moves)) > 0) {
        *rng ^= *rng >> 12, *rng ^= *rng << 25, *rng ^= *rng >> 27;
        nim_apply(sv, moves[(*rng * 0x2545f4914f6cdd1dull >> 33) % n]);
    }
    return nim_winner(sv);
}
static char *nim_text(const void *sv, rv_mcts_move_t m, char *buf, size_t len)
{
    (void)sv;
    snprintf(buf, len, "%c%d", 'a' + m / 16, m % 16 + 1); /* "a2" */
    return buf;
}
static rv_status_t nim_parse(const void *sv, const char *text,
                             rv_mcts_move_t *m, char *why, size_t why_len)
{
    const nim_t *s = sv;
    int h = text[0] - 'a', t = atoi(text + 1);
    if (h < 0 || h >= HEAPS || t < 1 || t > s->heap[h]) {
        snprintf(why, why_len, "'%s' is no move: heap a-c, then 1 to its size",
                 text);
        return RV_ERR_INVALID;
    }
    *m = (rv_mcts_move_t)(h * 16 + t - 1);
    return RV_OK;
}
static size_t nim_len(const void *sv) { (void)sv; return sizeof(nim_t); }
static int nim_to_play(const void *sv) { return ((const nim_t *)sv)->to_play; }

static const rv_mcts_game_t nim = {
    .name = "nim", .state_max = sizeof(nim_t), .state_len = nim_len,
    .to_play = nim_to_play, .legal_moves = nim_moves, .apply = nim_apply,
    .is_terminal = nim_over, .winner = nim_winner, .hash = nim_hash,
    .playout = nim_playout, .move_text = nim_text, .move_parse = nim_parse,
};

static uint64_t rollouts = 20000;

static int body(rv_worker_t *w, void *arg)
{
    (void)arg;
    if (rv_worker_tid(w) != 0) /* every other worker serves the search */
        return rv_mcts_serve(w) == RV_OK ? 0 : 1;
    nim_t s = {{3, 4, 5}, 0};
    rv_mcts_result_t *res = malloc(sizeof(*res)); /* large: not on stack */
    char text[8];
    bool found = false;
    if (res == NULL || rv_mcts_position(w, &s) != RV_OK)
        rv_abort(rv_worker_context(w), 1, "nim: no position");
    for (int ply = 0; !nim_over(&s); ply++) {
        if (rv_mcts_search(w, rollouts, res) != RV_OK ||
            rv_mcts_play(w, res->best) != RV_OK)
            rv_abort(rv_worker_context(w), 1, "nim: the search failed");
        if (ply == 0)
            found = res->best == 1; /* a2: take 2 from heap a */
        nim_apply(&s, res->best);
        printf("nim: %s plays %s (%llu rollouts); heaps %d %d %d\n",
               ply % 2 ? "second" : "first", nim_text(&s, res->best, text, 8),
               (unsigned long long)res->rollouts, s.heap[0], s.heap[1],
               s.heap[2]);
    }
    rv_mcts_stats_t st;
    bool ok = rv_mcts_stats(w, &st) == RV_OK && st.inconsistent == 0;
    printf("nim: the %s player won; the first move was %s; %llu playouts, "
           "tree %s\n",
           nim_winner(&s) == RV_MCTS_GAME_FIRST ? "first" : "second",
           found ? "the winning one" : "not the winning one",
           (unsigned long long)st.playouts, ok ? "consistent: ok" : "WRONG");
    free(res);
    return rv_mcts_shutdown(w) == RV_OK && ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    if (argc > 1)
        rollouts = strtoull(argv[1], NULL, 10);
    if (rv_mcts_init(ctx, &nim) != RV_OK) /* mcts.* keys; am and rma too */
        return 1;
    rv_status_t st = rv_job_run(ctx, body, NULL);
    rv_finalize(ctx);
    return st == RV_OK ? 0 : 1;
}
