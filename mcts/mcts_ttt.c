/*
 * Tic-tac-toe, the small game that keeps the search honest about its
 * interface: it has draws, a game whose length varies, and no Hex
 * structure to lean on. Cells are named as in Hex (column letter, row
 * number, a1 the top-left corner) and cell (row r, column c) is move
 * r * 3 + c. X, the first player, moves first.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mcts_rng.h"
#include "rv_mcts.h"

/* What a cell holds: a player's mark is the player plus one. */
enum { TTT_EMPTY = 0, TTT_X = 1, TTT_O = 2 };

typedef struct ttt_state {
    uint8_t to_play; /* 0 X, 1 O */
    int8_t winner;   /* RV_MCTS_GAME_NONE, _FIRST, _SECOND or _DRAW */
    uint8_t marks;   /* cells taken */
    uint8_t cell[9];
} ttt_state_t;

/* The eight lines of three. */
static const uint8_t ttt_lines[8][3] = {
    {0, 1, 2}, {3, 4, 5}, {6, 7, 8}, /* rows */
    {0, 3, 6}, {1, 4, 7}, {2, 5, 8}, /* columns */
    {0, 4, 8}, {2, 4, 6},            /* diagonals */
};

static size_t ttt_state_len(const void *sv)
{
    (void)sv;
    return sizeof(ttt_state_t);
}

static int ttt_to_play(const void *sv)
{
    return ((const ttt_state_t *)sv)->to_play;
}

static int ttt_winner(const void *sv)
{
    return ((const ttt_state_t *)sv)->winner;
}

static bool ttt_is_terminal(const void *sv)
{
    return ((const ttt_state_t *)sv)->winner != RV_MCTS_GAME_NONE;
}

static int ttt_legal_moves(const void *sv, rv_mcts_move_t *moves)
{
    const ttt_state_t *s = sv;
    int k = 0;
    if (s->winner != RV_MCTS_GAME_NONE)
        return 0;
    for (int i = 0; i < 9; i++)
        if (s->cell[i] == TTT_EMPTY)
            moves[k++] = (rv_mcts_move_t)i;
    return k;
}

/* Whether the mark on cell @p m completes a line through it. */
static bool ttt_completes(const ttt_state_t *s, int m)
{
    uint8_t mark = s->cell[m];
    for (int l = 0; l < 8; l++) {
        const uint8_t *line = ttt_lines[l];
        if ((line[0] == m || line[1] == m || line[2] == m) &&
            s->cell[line[0]] == mark && s->cell[line[1]] == mark &&
            s->cell[line[2]] == mark)
            return true;
    }
    return false;
}

/* As in Hex, an illegal move (off the board, on a mark, or after the
 * end) leaves the position as it is. The winner is kept in the position
 * so that asking for it costs nothing. */
static void ttt_apply(void *sv, rv_mcts_move_t m)
{
    ttt_state_t *s = sv;
    if (m >= 9 || s->cell[m] != TTT_EMPTY || s->winner != RV_MCTS_GAME_NONE)
        return;
    s->cell[m] = (uint8_t)(s->to_play + 1);
    s->marks++;
    if (ttt_completes(s, m))
        s->winner = (int8_t)s->to_play;
    else if (s->marks == 9)
        s->winner = RV_MCTS_GAME_DRAW;
    s->to_play ^= 1;
}

/* Zobrist keys made on the fly from the cell and the mark: nine cells do
 * not need a table, and the keys are the same in every process. */
static uint64_t ttt_key(uint64_t what)
{
    uint64_t x = 0x7474742100000000ull ^ what; /* "ttt!" */
    return mc_rng_splitmix(&x);
}

static uint64_t ttt_hash(const void *sv)
{
    const ttt_state_t *s = sv;
    uint64_t h = s->to_play ? ttt_key(100) : 0;
    for (int i = 0; i < 9; i++)
        if (s->cell[i] != TTT_EMPTY)
            h ^= ttt_key((uint64_t)(i * 2 + s->cell[i] - 1));
    return h;
}

/* Plays the empty cells in a random order until the game ends: unlike a
 * Hex board, a full tic-tac-toe board does not name a winner, so each
 * move is checked. */
static int ttt_playout(void *sv, uint64_t *rng)
{
    ttt_state_t *s = sv;
    rv_mcts_move_t empty[9];
    int k = ttt_legal_moves(s, empty);
    for (int i = 0; i < k && s->winner == RV_MCTS_GAME_NONE; i++) {
        int j = i + (int)mc_rng_below(rng, (uint32_t)(k - i));
        rv_mcts_move_t m = empty[j];
        empty[j] = empty[i];
        ttt_apply(s, m);
    }
    return s->winner;
}

static char *ttt_move_text(const void *sv, rv_mcts_move_t m, char *buf,
                           size_t len)
{
    (void)sv;
    if (len == 0)
        return buf;
    if (m >= 9)
        snprintf(buf, len, "??");
    else
        snprintf(buf, len, "%c%d", 'a' + m % 3, m / 3 + 1);
    return buf;
}

static rv_status_t ttt_refuse(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static rv_status_t ttt_refuse(char *why, size_t why_len, const char *fmt, ...)
{
    if (why != NULL && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return RV_ERR_INVALID;
}

/* Reads a cell as Hex does: a letter and a row number of one or two
 * digits (so that "d10" is off the board, not malformed), either case,
 * blanks around it allowed. */
static rv_status_t ttt_move_parse(const void *sv, const char *text,
                                  rv_mcts_move_t *m, char *why, size_t why_len)
{
    const ttt_state_t *s = sv;
    const char *p = text;
    int col, row = 0, digits = 0;

    while (p != NULL && isspace((unsigned char)*p))
        p++;
    if (p == NULL || !isalpha((unsigned char)p[0]) ||
        !isdigit((unsigned char)p[1]) ||
        (p[1] == '0' && isdigit((unsigned char)p[2])))
        return ttt_refuse(why, why_len,
                          "wrong notation: expected a cell like b2");
    col = tolower((unsigned char)*p++) - 'a';
    for (; isdigit((unsigned char)*p) && digits < 2; p++, digits++)
        row = row * 10 + (*p - '0');
    while (isspace((unsigned char)*p))
        p++;
    if (*p != '\0')
        return ttt_refuse(why, why_len,
                          "wrong notation: expected a cell like b2");
    static const char *const over[3] = {"X has won", "O has won", "a draw"};
    if (s->winner != RV_MCTS_GAME_NONE)
        return ttt_refuse(why, why_len, "the game is over: %s",
                          over[s->winner]);
    if (col >= 3 || row < 1 || row > 3)
        return ttt_refuse(why, why_len, "cell %c%d is off the 3x3 board",
                          'a' + col, row);
    int i = (row - 1) * 3 + col;
    if (s->cell[i] != TTT_EMPTY)
        return ttt_refuse(why, why_len, "cell %c%d is occupied", 'a' + col,
                          row);
    *m = (rv_mcts_move_t)i;
    return RV_OK;
}

static void ttt_print(const void *sv, FILE *f)
{
    const ttt_state_t *s = sv;
    static const char mark[3] = {'.', 'X', 'O'};

    fprintf(f, "   a  b  c\n");
    for (int r = 0; r < 3; r++)
        fprintf(f, "%2d %c  %c  %c %d\n", r + 1, mark[s->cell[r * 3]],
                mark[s->cell[r * 3 + 1]], mark[s->cell[r * 3 + 2]], r + 1);
    fprintf(f, "   a  b  c\n");
    if (s->winner == RV_MCTS_GAME_NONE)
        fprintf(f, "%c to move\n", s->to_play ? 'O' : 'X');
    else if (s->winner == RV_MCTS_GAME_DRAW)
        fprintf(f, "a draw\n");
    else
        fprintf(f, "%c has won\n", s->winner == RV_MCTS_GAME_FIRST ? 'X' : 'O');
}

static const rv_mcts_game_t ttt_game = {
    .name = "tictactoe",
    .state_max = sizeof(ttt_state_t),
    .state_len = ttt_state_len,
    .to_play = ttt_to_play,
    .legal_moves = ttt_legal_moves,
    .apply = ttt_apply,
    .is_terminal = ttt_is_terminal,
    .winner = ttt_winner,
    .hash = ttt_hash,
    .playout = ttt_playout,
    .move_text = ttt_move_text,
    .move_parse = ttt_move_parse,
    .print = ttt_print,
};

const rv_mcts_game_t *rv_mcts_tictactoe(void)
{
    return &ttt_game;
}

void rv_mcts_tictactoe_init(void *sv)
{
    ttt_state_t *s = sv;
    if (s == NULL)
        return;
    memset(s, 0, sizeof(*s));
    s->winner = RV_MCTS_GAME_NONE;
}
