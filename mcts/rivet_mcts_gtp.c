/*
 * rivet-mcts --gtp: the Go Text Protocol (version 2) as Hex engines speak
 * it (benzene/MoHex, HexGui): a command per line, optionally preceded by
 * a numeric id; each answer is "=id text" or "?id message" followed by an
 * empty line. Colours are b/black and w/white; cells are in the game's
 * notation (a1 the top-left corner). Positions alternate (the search's
 * games have no pass): play and genmove take the colour to move only,
 * and say whose turn it is otherwise; genmove on a finished game answers
 * resign for the loser and pass otherwise.
 *
 * Time controls (time_settings, time_left) are kept per colour by the
 * clock of rivet_mcts_clock.c; a genmove under them searches for its
 * share of the time left rather than for a number of rollouts.
 */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "rivet_mcts.h"

#define GTP_LINE 4096
#define GTP_MAX_ARGS 8

typedef struct gtp {
    app_t *a;
    FILE *out;
    const char *id; /* the command's id, or "" */
    bool quit;
    gtp_clock_t clock[2]; /* black's and white's */
} gtp_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void answer(gtp_t *g, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void answer(gtp_t *g, bool ok, const char *fmt, ...)
{
    va_list ap;
    /* "=id " always: a multi-line answer (showboard) starts "= " and its
     * first line, as HexGui requires ("Invalid HTP response" else). */
    fprintf(g->out, "%c%s ", ok ? '=' : '?', g->id);
    va_start(ap, fmt);
    vfprintf(g->out, fmt, ap);
    va_end(ap);
    fputs("\n\n", g->out);
    fflush(g->out);
}

/* Colour names: 0 black (the first player), 1 white; -1 for others. */
static int colour_of(const char *s)
{
    if (strcasecmp(s, "b") == 0 || strcasecmp(s, "black") == 0)
        return 0;
    if (strcasecmp(s, "w") == 0 || strcasecmp(s, "white") == 0)
        return 1;
    return -1;
}

static const char *const colour_name[2] = {"black", "white"};

static const char *const commands[] = {
    "boardsize",        "clear_board", "genmove",    "known_command",
    "list_commands",    "name",        "param_game", "play",
    "protocol_version", "quit",        "showboard",  "time_left",
    "time_settings",    "undo",        "version",
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static bool known(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i], name) == 0)
            return true;
    return false;
}

/* A colour argument that must be the side to move (the game's positions
 * alternate), or an answered error. */
static int side_to_move(gtp_t *g, const char *arg)
{
    app_t *a = g->a;
    int c = colour_of(arg);
    if (c < 0) {
        answer(g, false, "invalid color '%s' (b, w, black or white)", arg);
        return -1;
    }
    if (a->game->is_terminal(a->state)) {
        answer(g, false, "the game is over");
        return -1;
    }
    if (c != a->game->to_play(a->state)) {
        answer(g, false, "it is %s's turn",
               colour_name[a->game->to_play(a->state)]);
        return -1;
    }
    return c;
}

static void cmd_boardsize(gtp_t *g, int argc, char **argv)
{
    char *end;
    long n = argc >= 1 ? strtol(argv[0], &end, 10) : 0;
    if (argc < 1 || argc > 2 || *end != '\0') {
        answer(g, false, "syntax: boardsize N or boardsize N N");
        return;
    }
    if (argc == 2 && strtol(argv[1], NULL, 10) != n) {
        answer(g, false, "unacceptable size: only square boards");
        return;
    }
    if (g->a->game != rv_mcts_hex() && n != 3) {
        answer(g, false, "unacceptable size: tic-tac-toe is 3x3");
        return;
    }
    if (n < 2 || n > RV_MCTS_HEX_MAX || app_new_game(g->a, (int)n) != RV_OK) {
        answer(g, false, "unacceptable size: 2 to %d", RV_MCTS_HEX_MAX);
        return;
    }
    answer(g, true, "%s", "");
}

static void cmd_play(gtp_t *g, int argc, char **argv)
{
    app_t *a = g->a;
    char why[128];
    rv_mcts_move_t m;
    if (argc != 2) {
        answer(g, false, "syntax: play COLOR CELL");
        return;
    }
    if (side_to_move(g, argv[0]) < 0)
        return;
    if (a->game->move_parse(a->state, argv[1], &m, why, sizeof(why)) != RV_OK) {
        answer(g, false, "%s", why);
        return;
    }
    if (app_play(a, m) != RV_OK)
        answer(g, false, "the search could not play %s", argv[1]);
    else
        answer(g, true, "%s", "");
}

/* The search's time for @p colour's move under its clock, 0 when the
 * clock sets none; *budget_p the move's whole share (below 0: none). */
static double move_time(gtp_t *g, int colour, double *budget_p)
{
    rv_mcts_move_t legal[RV_MCTS_MAX_MOVES];
    int empty = g->a->game->legal_moves(g->a->state, legal);
    *budget_p = clock_budget(&g->clock[colour], empty);
    return *budget_p < 0 ? 0 : clock_search_time(&g->clock[colour], *budget_p);
}

/* Searches and plays @p colour's move. */
static void genmove(gtp_t *g, int colour, rv_mcts_result_t *res, double t0)
{
    app_t *a = g->a;
    char cell[16];
    double budget, search = move_time(g, colour, &budget);
    if (app_search(a, search, res) != RV_OK || res->nmoves == 0) {
        answer(g, false, "the search failed");
        return;
    }
    if (res->moves[0].win_rate < a->resign_below) {
        answer(g, true, "resign");
    } else {
        a->game->move_text(a->state, res->best, cell, sizeof(cell));
        if (app_play(a, res->best) != RV_OK) {
            answer(g, false, "the search could not play %s", cell);
            return;
        }
        answer(g, true, "%s", cell);
    }
    double spent = now_s() - t0;
    clock_spend(&g->clock[colour], spent);
    if (budget >= 0)
        clock_overhead(&g->clock[colour], spent, search);
}

static void cmd_genmove(gtp_t *g, int argc, char **argv)
{
    app_t *a = g->a;
    double t0 = now_s();
    rv_mcts_result_t *res = malloc(sizeof(*res));
    int colour;
    if (argc != 1) {
        answer(g, false, "syntax: genmove COLOR");
    } else if (res == NULL) {
        answer(g, false, "out of memory");
    } else if (colour_of(argv[0]) >= 0 && a->game->is_terminal(a->state)) {
        /* A finished game, as MoHex answers it: the loser resigns, a
         * winner or a draw has nothing to play. */
        int w = a->game->winner(a->state);
        answer(g, true, "%s",
               w == RV_MCTS_GAME_FIRST + !colour_of(argv[0]) ? "resign"
                                                             : "pass");
    } else if ((colour = side_to_move(g, argv[0])) >= 0) {
        genmove(g, colour, res, t0);
    }
    free(res);
}

/* benzene's game parameters, of which rivet-mcts has one: allow_swap,
 * Hex's swap rule ("param_game" alone lists it as MoHex does). */
static void cmd_param_game(gtp_t *g, int argc, char **argv)
{
    app_t *a = g->a;
    if (argc == 0) {
        answer(g, true, "\n[bool] allow_swap %d", a->swap ? 1 : 0);
        return;
    }
    if (strcmp(argv[0], "allow_swap") != 0) {
        answer(g, false, "unknown parameter '%s' (allow_swap)", argv[0]);
        return;
    }
    int on = argc != 2 ? -1
             : strcmp(argv[1], "1") == 0 || strcasecmp(argv[1], "true") == 0 ? 1
             : strcmp(argv[1], "0") == 0 || strcasecmp(argv[1], "false") == 0
                 ? 0
                 : -1;
    if (on < 0)
        answer(g, false, "syntax: param_game allow_swap 0|1");
    else if (a->game != rv_mcts_hex())
        answer(g, false, "only Hex has the swap rule");
    else if (app_set_swap(a, on) != RV_OK)
        answer(g, false, "%s",
               on ? "the search could not take the position"
                  : "a swap was played: undo it before turning the rule off");
    else
        answer(g, true, "%s", "");
}

/* A number of seconds or stones: finite, 0 or more. */
static bool time_arg(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return end != s && *end == '\0' && isfinite(*v) && *v >= 0 && *v < 1e9;
}

static void cmd_time_settings(gtp_t *g, int argc, char **argv)
{
    double main_s, byo_s, stones;
    if (argc != 3 || !time_arg(argv[0], &main_s) ||
        !time_arg(argv[1], &byo_s) || !time_arg(argv[2], &stones) ||
        stones != floor(stones)) {
        answer(g, false,
               "syntax: time_settings MAIN_TIME BYO_YOMI_TIME "
               "BYO_YOMI_STONES (seconds, seconds, moves)");
        return;
    }
    clock_settings(g->clock, main_s, byo_s, (int)stones);
    answer(g, true, "%s", "");
}

static void cmd_time_left(gtp_t *g, int argc, char **argv)
{
    double left, stones;
    int c = argc == 3 ? colour_of(argv[0]) : -1;
    if (c < 0 || !time_arg(argv[1], &left) || !time_arg(argv[2], &stones) ||
        stones != floor(stones)) {
        answer(g, false, "syntax: time_left COLOR TIME STONES");
        return;
    }
    clock_left(&g->clock[c], left, (int)stones);
    answer(g, true, "%s", "");
}

static void cmd_showboard(gtp_t *g)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL) {
        answer(g, false, "out of memory");
        return;
    }
    g->a->game->print(g->a->state, f);
    fclose(f);
    while (len > 0 && text[len - 1] == '\n')
        text[--len] = '\0';
    answer(g, true, "\n%s", text);
    free(text);
}

static void run(gtp_t *g, const char *cmd, int argc, char **argv)
{
    if (strcmp(cmd, "name") == 0) {
        answer(g, true, "rivet-mcts");
    } else if (strcmp(cmd, "version") == 0) {
        answer(g, true, "%s", RIVET_VERSION_STRING);
    } else if (strcmp(cmd, "protocol_version") == 0) {
        answer(g, true, "2");
    } else if (strcmp(cmd, "known_command") == 0) {
        if (argc != 1)
            answer(g, false, "syntax: known_command NAME");
        else
            answer(g, true, "%s", known(argv[0]) ? "true" : "false");
    } else if (strcmp(cmd, "list_commands") == 0) {
        fprintf(g->out, "=%s", g->id);
        for (size_t i = 0; i < NCOMMANDS; i++)
            fprintf(g->out, "%s%s", i ? "\n" : " ", commands[i]);
        fputs("\n\n", g->out);
        fflush(g->out);
    } else if (strcmp(cmd, "boardsize") == 0) {
        cmd_boardsize(g, argc, argv);
    } else if (strcmp(cmd, "clear_board") == 0) {
        if (app_new_game(g->a, g->a->size) != RV_OK)
            answer(g, false, "the search could not start a new game");
        else
            answer(g, true, "%s", "");
    } else if (strcmp(cmd, "play") == 0) {
        cmd_play(g, argc, argv);
    } else if (strcmp(cmd, "genmove") == 0) {
        cmd_genmove(g, argc, argv);
    } else if (strcmp(cmd, "undo") == 0) {
        if (app_undo(g->a) != RV_OK)
            answer(g, false, "cannot undo");
        else
            answer(g, true, "%s", "");
    } else if (strcmp(cmd, "showboard") == 0) {
        cmd_showboard(g);
    } else if (strcmp(cmd, "param_game") == 0) {
        cmd_param_game(g, argc, argv);
    } else if (strcmp(cmd, "time_settings") == 0) {
        cmd_time_settings(g, argc, argv);
    } else if (strcmp(cmd, "time_left") == 0) {
        cmd_time_left(g, argc, argv);
    } else if (strcmp(cmd, "quit") == 0) {
        answer(g, true, "%s", "");
        g->quit = true;
    } else {
        answer(g, false, "unknown command");
    }
}

/* Splits @p line into words (comments after '#' dropped, control
 * characters as blanks) and runs it. */
static void gtp_line(gtp_t *g, char *line)
{
    char *argv[GTP_MAX_ARGS + 2], *save = NULL;
    int argc = 0;
    char *hash = strchr(line, '#');
    if (hash != NULL)
        *hash = '\0';
    for (char *p = line; *p; p++)
        if (iscntrl((unsigned char)*p))
            *p = ' ';
    for (char *t = strtok_r(line, " ", &save); t != NULL;
         t = strtok_r(NULL, " ", &save)) {
        if (argc == GTP_MAX_ARGS + 2) {
            answer(g, false, "too many arguments");
            return;
        }
        argv[argc++] = t;
    }
    if (argc == 0)
        return;
    int first = 0;
    g->id = "";
    if (argv[0][strspn(argv[0], "0123456789")] == '\0') {
        g->id = argv[0];
        first = 1;
        if (argc == 1) {
            answer(g, false, "missing command");
            return;
        }
    }
    if (argc - first - 1 > GTP_MAX_ARGS) {
        answer(g, false, "too many arguments");
        return;
    }
    run(g, argv[first], argc - first - 1, argv + first + 1);
}

int gtp_run(app_t *a, FILE *in, FILE *out)
{
    gtp_t g = {.a = a, .out = out, .id = ""};
    char line[GTP_LINE];
    while (!g.quit && fgets(line, sizeof(line), in) != NULL) {
        if (strchr(line, '\n') == NULL && !feof(in)) {
            int c;
            while ((c = fgetc(in)) != EOF && c != '\n')
                ;
            g.id = "";
            answer(&g, false, "line too long");
            continue;
        }
        gtp_line(&g, line);
    }
    return 0;
}
