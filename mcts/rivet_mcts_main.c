/*
 * rivet-mcts: Hex (or tic-tac-toe) against the distributed tree search.
 *
 *   rivetrun -c configs/mcts.yaml build/bin/rivet-mcts [options] MODE
 *
 * Modes:
 *   --moves "a1 b2 ..."  analyse the position after these moves (the
 *                        default, from the empty board): the board, the
 *                        top moves with visits and win rates, rollouts/s,
 *                        and last a line "best CELL"
 *   --play               play a person at the terminal (--human b|w)
 *   --self-play          play itself to the end of the game
 *   --gtp                speak GTP on standard input and output
 * Options: --size N (Hex board, default mcts.size), --rollouts R (per
 * move, default mcts.rollouts_per_move), --game hex|tictactoe, --top K,
 * --check (print the job's counters and check that the visits add up),
 * --uct (search with the plain sequential UCT in worker 0 instead: the
 * framework's baseline, with the same playouts and mcts.* settings),
 * --playouts N (time N random playouts of the empty board in one thread,
 * and nothing else), --swap (Hex with the swap rule: white may answer
 * black's first stone with swap-pieces; GTP's param_game allow_swap sets
 * it too).
 *
 * Worker 0 of the job talks to the person or the controller; every other
 * worker serves the search (rv_mcts_serve).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rivet_mcts.h"
#include "rv_config.h"

typedef enum { MODE_ANALYSE, MODE_PLAY, MODE_SELF, MODE_GTP } mode_t_;

typedef struct opts {
    mode_t_ mode;
    const char *moves;
    const char *game;
    int size;         /* 0: mcts.size */
    int64_t rollouts; /* 0: mcts.rollouts_per_move */
    int human;        /* --play: the person's colour */
    int top;
    bool check;
    bool uct;         /* --uct: the sequential baseline analyses */
    bool swap;        /* --swap: Hex's swap rule */
    int64_t playouts; /* --playouts N: time N playouts, nothing else */
} opts_t;

static opts_t opt = {
    .mode = MODE_ANALYSE, .moves = "", .game = "hex", .top = 10};

/* ---------------------------------------------------------------------- */
/* The game                                                                */

static void announce_winner(const app_t *a, FILE *f)
{
    static const char *const names[] = {"black", "white", "nobody"};
    int win = a->game->winner(a->state);
    if (a->game == rv_mcts_tictactoe())
        fprintf(f, "%s\n",
                win == RV_MCTS_GAME_DRAW    ? "draw"
                : win == RV_MCTS_GAME_FIRST ? "X wins"
                                            : "O wins");
    else
        fprintf(f, "%s wins\n", names[win == RV_MCTS_GAME_DRAW ? 2 : win]);
}

/* ---------------------------------------------------------------------- */
/* Modes                                                                   */

static int check_stats(app_t *a)
{
    rv_mcts_stats_t s;
    if (rv_mcts_stats(a->w, &s) != RV_OK)
        return 1;
    printf("stats: nodes %" PRIu64 " alive, %" PRIu64 " created, %" PRIu64
           " freed, %" PRIu64 " transpositions; %" PRIu64 " playouts; root "
           "visits %" PRIu64 ", rollouts %" PRIu64 "; inconsistent %" PRIu64
           "\n",
           s.nodes_alive, s.nodes_created, s.nodes_freed, s.transpositions,
           s.playouts, s.visits_total, s.rollouts_done, s.inconsistent);
    return s.inconsistent != 0 || s.visits_total < s.rollouts_done;
}

static int analyse(app_t *a)
{
    char buf[4096], why[128];
    snprintf(buf, sizeof(buf), "%s", opt.moves);
    for (char *save = NULL, *t = strtok_r(buf, " ,", &save); t != NULL;
         t = strtok_r(NULL, " ,", &save)) {
        rv_mcts_move_t m;
        if (a->game->move_parse(a->state, t, &m, why, sizeof(why)) != RV_OK) {
            fprintf(stderr, "rivet-mcts: --moves: %s\n", why);
            return 2;
        }
        if (app_play(a, m) != RV_OK)
            return 1;
    }
    a->game->print(a->state, stdout);
    if (a->game->is_terminal(a->state)) {
        announce_winner(a, stdout);
        return 0;
    }
    rv_mcts_result_t *res = malloc(sizeof(*res));
    if (res == NULL || app_search(a, 0, res) != RV_OK) {
        free(res);
        return 1;
    }
    app_print_result(a, res, stdout);
    int rc = opt.check ? check_stats(a) : 0;
    printf("best %s\n", a->game->move_text(a->state, res->best, why, 16));
    free(res);
    return rc;
}

/* --playouts N: the game's random playout alone, from the position,
 * in worker 0's thread: the rate of one core. */
static int playout_rate(app_t *a)
{
    uint8_t s[sizeof(a->state)];
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int64_t wins[3] = {0, 0, 0};
    int64_t t0 = rv_time_ns();
    for (int64_t i = 0; i < opt.playouts; i++) {
        memcpy(s, a->state, a->game->state_len(a->state));
        wins[a->game->playout(s, &rng)]++;
    }
    double sec = 1e-9 * (double)(rv_time_ns() - t0);
    printf("%" PRId64 " playouts in %.3f s: %.0f playouts/s on one core; "
           "the first player won %.1f%%\n",
           opt.playouts, sec, (double)opt.playouts / sec,
           100.0 * (double)wins[0] / (double)opt.playouts);
    return 0;
}

/* The engine's move: searches and plays the best move. */
static int engine_move(app_t *a, rv_mcts_result_t *res)
{
    char cell[16];
    if (app_search(a, 0, res) != RV_OK || app_play(a, res->best) != RV_OK)
        return 1;
    /* The position is the one after the move: the mover is not to play. */
    int mover = !a->game->to_play(a->state);
    static const char *const hex_names[] = {"black", "white"};
    static const char *const ttt_names[] = {"X", "O"};
    printf("%s plays %s (%" PRIu64 " visits, win rate %.1f%%, %.0f "
           "rollouts/s)\n",
           (a->game == rv_mcts_hex() ? hex_names : ttt_names)[mover],
           a->game->move_text(a->state, res->best, cell, sizeof(cell)),
           res->moves[0].visits, 100.0 * res->moves[0].win_rate,
           res->seconds > 0 ? (double)res->rollouts / res->seconds : 0.0);
    return 0;
}

static int self_play(app_t *a)
{
    rv_mcts_result_t *res = malloc(sizeof(*res));
    int rc = res == NULL;
    a->game->print(a->state, stdout);
    while (rc == 0 && !a->game->is_terminal(a->state)) {
        rc = engine_move(a, res);
        a->game->print(a->state, stdout);
        fflush(stdout);
    }
    if (rc == 0)
        announce_winner(a, stdout);
    if (rc == 0 && opt.check)
        rc = check_stats(a);
    free(res);
    return rc;
}

/* The person's move, read from standard input until it is legal; false
 * at the end of the input or on "quit". */
static bool human_move(app_t *a, rv_mcts_move_t *m)
{
    char line[256], why[128];
    for (;;) {
        printf("your move (%s), or quit: ",
               a->game->to_play(a->state) ? "white" : "black");
        fflush(stdout);
        if (fgets(line, sizeof(line), stdin) == NULL)
            return false;
        line[strcspn(line, " \t\r\n")] = '\0';
        if (strcmp(line, "quit") == 0)
            return false;
        if (line[0] == '\0')
            continue;
        if (a->game->move_parse(a->state, line, m, why, sizeof(why)) == RV_OK)
            return true;
        printf("%s\n", why);
    }
}

static int play_person(app_t *a)
{
    rv_mcts_result_t *res = malloc(sizeof(*res));
    int rc = res == NULL;
    a->game->print(a->state, stdout);
    while (rc == 0 && !a->game->is_terminal(a->state)) {
        rv_mcts_move_t m;
        if (a->game->to_play(a->state) == opt.human) {
            if (!human_move(a, &m))
                break;
            rc = app_play(a, m) != RV_OK;
        } else {
            rc = engine_move(a, res);
        }
        a->game->print(a->state, stdout);
        fflush(stdout);
    }
    if (rc == 0 && a->game->is_terminal(a->state))
        announce_winner(a, stdout);
    free(res);
    return rc;
}

/* ---------------------------------------------------------------------- */
/* The job                                                                 */

static rv_status_t worker(rv_worker_t *w, void *arg)
{
    app_t *a = arg;
    if (rv_worker_tid(w) != 0)
        return rv_mcts_serve(w);
    a->w = w;
    int rc = app_new_game(a, a->size) != RV_OK;
    if (rc == 0) {
        switch (opt.mode) {
        case MODE_ANALYSE:
            rc = opt.playouts > 0 ? playout_rate(a) : analyse(a);
            break;
        case MODE_PLAY:
            rc = play_person(a);
            break;
        case MODE_SELF:
            rc = self_play(a);
            break;
        case MODE_GTP:
            rc = gtp_run(a, stdin, stdout);
            break;
        }
    }
    fflush(stdout);
    rv_status_t st = rv_mcts_shutdown(w);
    return rc != 0 ? RV_ERR_INVALID : st;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: rivet-mcts [--size N] [--rollouts R] [--game hex|tictactoe]\n"
        "                  [--top K] [--check] [--uct] [--playouts N] "
        "[--swap]\n"
        "                  [--moves \"a1 b2 ...\" | --play [--human b|w] |\n"
        "                   --self-play | --gtp] [--help] [--version]\n"
        "under rivetrun, e.g. rivetrun -c configs/mcts.yaml "
        "build/bin/rivet-mcts --size 7 --moves \"d4\"\n");
}

/* The integer of option @p name in [min, max], or false, saying why. */
static bool int_arg(const char *name, const char *v, long long min,
                    long long max, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < min || x > max) {
        fprintf(stderr,
                "rivet-mcts: --%s '%s': expected an integer from %lld to "
                "%lld\n",
                name, v, min, max);
        return false;
    }
    *out = x;
    return true;
}

enum {
    O_PLAY = 256,
    O_SELF,
    O_GTP,
    O_CHECK,
    O_UCT,
    O_MOVES,
    O_SIZE,
    O_ROLLOUTS,
    O_GAME,
    O_TOP,
    O_PLAYOUTS,
    O_HUMAN,
    O_SWAP,
};

/* The command line into opt: 0, or the exit status (0 after --help). */
static int parse_args(int argc, char **argv)
{
    static const struct option longs[] = {
        {"play", no_argument, NULL, O_PLAY},
        {"self-play", no_argument, NULL, O_SELF},
        {"gtp", no_argument, NULL, O_GTP},
        {"check", no_argument, NULL, O_CHECK},
        {"uct", no_argument, NULL, O_UCT},
        {"moves", required_argument, NULL, O_MOVES},
        {"size", required_argument, NULL, O_SIZE},
        {"rollouts", required_argument, NULL, O_ROLLOUTS},
        {"game", required_argument, NULL, O_GAME},
        {"top", required_argument, NULL, O_TOP},
        {"playouts", required_argument, NULL, O_PLAYOUTS},
        {"human", required_argument, NULL, O_HUMAN},
        {"swap", no_argument, NULL, O_SWAP},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long long x;
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case O_PLAY:
            opt.mode = MODE_PLAY;
            break;
        case O_SELF:
            opt.mode = MODE_SELF;
            break;
        case O_GTP:
            opt.mode = MODE_GTP;
            break;
        case O_CHECK:
            opt.check = true;
            break;
        case O_UCT:
            opt.uct = true;
            break;
        case O_MOVES:
            opt.moves = optarg;
            break;
        case O_SIZE:
            if (!int_arg("size", optarg, 2, RV_MCTS_HEX_MAX, &x))
                return 2;
            opt.size = (int)x;
            break;
        case O_ROLLOUTS:
            if (!int_arg("rollouts", optarg, 0, INT64_MAX, &x))
                return 2;
            opt.rollouts = x;
            break;
        case O_GAME:
            opt.game = optarg;
            break;
        case O_TOP:
            if (!int_arg("top", optarg, 1, INT32_MAX, &x))
                return 2;
            opt.top = (int)x;
            break;
        case O_PLAYOUTS:
            if (!int_arg("playouts", optarg, 0, INT64_MAX, &x))
                return 2;
            opt.playouts = x;
            break;
        case O_HUMAN:
            if (strcmp(optarg, "b") != 0 && strcmp(optarg, "w") != 0 &&
                strcmp(optarg, "B") != 0 && strcmp(optarg, "W") != 0) {
                fprintf(stderr, "rivet-mcts: --human '%s': b or w\n", optarg);
                return 2;
            }
            opt.human = optarg[0] == 'w' || optarg[0] == 'W';
            break;
        case O_SWAP:
            opt.swap = true;
            break;
        case 'h':
            usage(stdout);
            return -1;
        case 'V':
            printf("rivet-mcts (rivet) %s\n", rv_version(NULL, NULL, NULL));
            return -1;
        default: /* getopt_long said what was wrong */
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "rivet-mcts: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    rv_context_t *ctx;
    if (rv_init(&argc, &argv, &ctx) != RV_OK)
        return 1;
    int rc = parse_args(argc, argv);
    if (rc != 0) {
        rv_finalize(ctx);
        return rc < 0 ? 0 : rc;
    }
    static app_t app = {.resign_below = 0.03};
    if (strcmp(opt.game, "hex") == 0) {
        app.game = rv_mcts_hex();
    } else if (strcmp(opt.game, "tictactoe") == 0) {
        app.game = rv_mcts_tictactoe();
    } else {
        fprintf(stderr, "rivet-mcts: unknown game '%s' (hex or tictactoe)\n",
                opt.game);
        return 2;
    }
    app.uct = opt.uct;
    app.top = opt.top;
    app.size = opt.size ? opt.size : (int)app_config_int(ctx, "mcts.size", 11);
    app.rollouts = (uint64_t)opt.rollouts;
    app.swap = opt.swap;
    if (app.game == rv_mcts_hex() &&
        (app.size < 2 || app.size > RV_MCTS_HEX_MAX)) {
        fprintf(stderr, "rivet-mcts: --size %d: Hex boards are 2 to %d\n",
                app.size, RV_MCTS_HEX_MAX);
        return 2;
    }
    if (app.swap && app.game != rv_mcts_hex()) {
        fprintf(stderr, "rivet-mcts: --swap: only Hex has the swap rule\n");
        return 2;
    }
    if (rv_mcts_init(ctx, app.game) != RV_OK)
        return 1;
    rv_status_t st = rv_job_run(ctx, worker, &app);
    rv_finalize(ctx);
    return st == RV_OK ? 0 : 1;
}
