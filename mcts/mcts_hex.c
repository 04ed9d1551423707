/*
 * Hex on an n x n rhombus, 2 <= n <= RV_MCTS_HEX_MAX, in HexGui/benzene
 * notation: columns a.. are letters, rows 1.. are numbers, a1 is the
 * top-left (acute) corner and cell (row r, column c) is move r * n + c.
 * Black, the first player, connects the top and bottom rows; white
 * connects the left and right columns. Rows lean right as they go down,
 * so (r, c) touches (r-1, c), (r-1, c+1), (r, c-1), (r, c+1), (r+1, c-1)
 * and (r+1, c); (r+1, c+1) is not a neighbour.
 *
 * A position is plain data: a small header and the cells, row-major with
 * n columns, of which only the first n * n travel (state_len). Every
 * byte is a function of the position alone (the unused ones stay zero),
 * so equal positions are equal bytes as well as equal hashes.
 *
 * The swap rule (the pie rule, as Hex tournaments play it) is part of
 * the position: where it holds, white's answer to black's first stone
 * may be RV_MCTS_HEX_SWAP, "swap-pieces" in HexGui's notation, which
 * replaces that stone with a white one mirrored across the long diagonal
 * (row and column exchanged), black to move. Mirroring and recolouring
 * is the same game as exchanging sides with the stone left in place;
 * it keeps black the player who connects top and bottom, as the board
 * HexGui draws does.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "mcts_rng.h"
#include "rv_mcts.h"

#define HEX_CELLS (RV_MCTS_HEX_MAX * RV_MCTS_HEX_MAX)

/* What a cell holds: a player's colour is the player plus one. */
enum { HEX_EMPTY = 0, HEX_BLACK = 1, HEX_WHITE = 2 };

typedef struct hex_state {
    uint8_t n;       /* the size */
    uint8_t to_play; /* 0 black, 1 white */
    int8_t winner;   /* RV_MCTS_GAME_NONE, RV_MCTS_GAME_FIRST or
                        RV_MCTS_GAME_SECOND */
    uint8_t swap;    /* 1: the swap rule holds (0 else, never another
                        value, so equal positions are equal bytes) */
    uint16_t stones; /* cells taken */
    uint8_t cell[HEX_CELLS];
} hex_state_t;

/* The winner is kept in the position, updated by apply from the group of
 * the stone just played (the only group a move can complete), because
 * the search asks for it at every node it passes and a flood fill of the
 * whole board each time would cost more than the playouts. */

/* The six neighbours, as row and column offsets. */
static const int8_t hex_dr[6] = {-1, -1, 0, 0, 1, 1};
static const int8_t hex_dc[6] = {0, 1, -1, 1, -1, 0};

/* ---------------------------------------------------------------------- */
/* Connections                                                             */

/*
 * Follows the stones of @p colour connected to the @p nseeds cells of
 * @p seeds (stones of that colour) and returns which of the colour's
 * edges they touch: bit 0 the first (black: row 1; white: column a),
 * bit 1 the last. It stops as soon as both are touched. Depth-first with
 * an explicit stack on the caller's stack frame: no allocation in the
 * playout's hot path.
 */
static unsigned hex_reach(const hex_state_t *s, uint8_t colour,
                          const uint16_t *seeds, int nseeds)
{
    const int n = s->n;
    uint8_t seen[HEX_CELLS];
    uint16_t stack[HEX_CELLS];
    int sp = 0;
    unsigned touched = 0;

    memset(seen, 0, (size_t)n * (size_t)n);
    for (int i = 0; i < nseeds; i++) {
        seen[seeds[i]] = 1;
        stack[sp++] = seeds[i];
    }
    while (sp > 0) {
        int i = stack[--sp];
        int r = i / n, c = i - r * n;
        int along = colour == HEX_BLACK ? r : c;
        touched |= (along == 0 ? 1u : 0u) | (along == n - 1 ? 2u : 0u);
        if (touched == 3)
            return touched;
        for (int k = 0; k < 6; k++) {
            int nr = r + hex_dr[k], nc = c + hex_dc[k];
            if ((unsigned)nr >= (unsigned)n || (unsigned)nc >= (unsigned)n)
                continue;
            int j = nr * n + nc;
            if (s->cell[j] == colour && !seen[j]) {
                seen[j] = 1;
                stack[sp++] = (uint16_t)j;
            }
        }
    }
    return touched;
}

/* Whether black's stones join the top row to the bottom one. On a full
 * board this decides the game: exactly one side is connected. */
static bool hex_black_connects(const hex_state_t *s)
{
    uint16_t top[RV_MCTS_HEX_MAX];
    int k = 0;
    for (int c = 0; c < s->n; c++)
        if (s->cell[c] == HEX_BLACK)
            top[k++] = (uint16_t)c;
    return k > 0 && hex_reach(s, HEX_BLACK, top, k) == 3;
}

/* ---------------------------------------------------------------------- */
/* Zobrist keys                                                            */

/* One key per cell index and colour, one for white to move, and one per
 * size, since the same index names different cells on different sizes.
 * Made once from a fixed seed, so that every process of a job (and every
 * run) hashes alike: positions sent between processes keep their hash. */
static uint64_t hex_key_cell[HEX_CELLS][2];
static uint64_t hex_key_white, hex_key_swap;
static uint64_t hex_key_size[RV_MCTS_HEX_MAX + 1];
static pthread_once_t hex_keys_once = PTHREAD_ONCE_INIT;

static void hex_make_keys(void)
{
    uint64_t x = 0x68657821u; /* "hex!" */
    for (int i = 0; i < HEX_CELLS; i++) {
        hex_key_cell[i][0] = mc_rng_splitmix(&x);
        hex_key_cell[i][1] = mc_rng_splitmix(&x);
    }
    hex_key_white = mc_rng_splitmix(&x);
    for (int n = 0; n <= RV_MCTS_HEX_MAX; n++)
        hex_key_size[n] = mc_rng_splitmix(&x);
    hex_key_swap = mc_rng_splitmix(&x); /* last: the others keep their
                                           values */
}

static uint64_t hex_hash(const void *sv)
{
    const hex_state_t *s = sv;
    pthread_once(&hex_keys_once, hex_make_keys);
    uint64_t h = hex_key_size[s->n] ^ (s->to_play ? hex_key_white : 0) ^
                 (s->swap ? hex_key_swap : 0);
    for (int i = 0; i < s->n * s->n; i++)
        if (s->cell[i] != HEX_EMPTY)
            h ^= hex_key_cell[i][s->cell[i] - 1];
    return h;
}

/* ---------------------------------------------------------------------- */
/* The rules                                                               */

static size_t hex_state_len(const void *sv)
{
    const hex_state_t *s = sv;
    return offsetof(hex_state_t, cell) + (size_t)s->n * s->n;
}

static int hex_to_play(const void *sv)
{
    return ((const hex_state_t *)sv)->to_play;
}

static int hex_winner(const void *sv)
{
    return ((const hex_state_t *)sv)->winner;
}

static bool hex_is_terminal(const void *sv)
{
    return ((const hex_state_t *)sv)->winner != RV_MCTS_GAME_NONE;
}

/* White's answer to black's first stone, where the swap rule holds. */
static bool hex_may_swap(const hex_state_t *s)
{
    return s->swap && s->stones == 1 && s->to_play == 1 &&
           s->winner == RV_MCTS_GAME_NONE;
}

static int hex_legal_moves(const void *sv, rv_mcts_move_t *moves)
{
    const hex_state_t *s = sv;
    int k = 0;
    if (s->winner != RV_MCTS_GAME_NONE)
        return 0;
    for (int i = 0; i < s->n * s->n; i++)
        if (s->cell[i] == HEX_EMPTY)
            moves[k++] = (rv_mcts_move_t)i;
    if (hex_may_swap(s))
        moves[k++] = RV_MCTS_HEX_SWAP;
    return k;
}

/* Swaps black's first stone for white's mirror of it; black to move. A
 * single stone cannot join two sides of a board of 2 or more. */
static void hex_swap(hex_state_t *s)
{
    const int n = s->n;
    for (int i = 0; i < n * n; i++) {
        if (s->cell[i] == HEX_BLACK) {
            s->cell[i] = HEX_EMPTY;
            s->cell[(i % n) * n + i / n] = HEX_WHITE;
            s->to_play = 0;
            return;
        }
    }
}

/* An illegal move (off the board, on a stone, or after the end) leaves
 * the position as it is rather than corrupting it: moves also arrive
 * from other processes. */
static void hex_apply(void *sv, rv_mcts_move_t m)
{
    hex_state_t *s = sv;
    if (m == RV_MCTS_HEX_SWAP && hex_may_swap(s)) {
        hex_swap(s);
        return;
    }
    if (m >= s->n * s->n || s->cell[m] != HEX_EMPTY ||
        s->winner != RV_MCTS_GAME_NONE)
        return;
    uint8_t colour = (uint8_t)(s->to_play + 1);
    s->cell[m] = colour;
    s->stones++;
    if (hex_reach(s, colour, &m, 1) == 3)
        s->winner = (int8_t)s->to_play;
    s->to_play ^= 1;
}

/*
 * Fills every empty cell at random, the player to move taking the first,
 * third, ... of a random order, which is a random choice of ceil(k / 2)
 * of the k empty cells: a partial Fisher-Yates shuffle draws just those.
 * One flood fill then decides, as a full board has exactly one winner.
 * The filled board is left in @p sv (the tests read it).
 */
static int hex_playout(void *sv, uint64_t *rng)
{
    hex_state_t *s = sv;
    uint16_t empty[HEX_CELLS];
    int k = 0, nn = s->n * s->n;

    if (s->winner != RV_MCTS_GAME_NONE)
        return s->winner;
    for (int i = 0; i < nn; i++)
        if (s->cell[i] == HEX_EMPTY)
            empty[k++] = (uint16_t)i;
    uint8_t mover = (uint8_t)(s->to_play + 1), other = (uint8_t)(3 - mover);
    int mine = (k + 1) / 2;
    for (int i = 0; i < mine; i++) {
        int j = i + (int)mc_rng_below(rng, (uint32_t)(k - i));
        uint16_t cell = empty[j];
        empty[j] = empty[i];
        s->cell[cell] = mover;
    }
    for (int i = mine; i < k; i++)
        s->cell[empty[i]] = other;
    s->stones = (uint16_t)nn;
    s->to_play ^= (uint8_t)(k & 1);
    s->winner =
        hex_black_connects(s) ? RV_MCTS_GAME_FIRST : RV_MCTS_GAME_SECOND;
    return s->winner;
}

/* ---------------------------------------------------------------------- */
/* Notation                                                                */

static char *hex_move_text(const void *sv, rv_mcts_move_t m, char *buf,
                           size_t len)
{
    const hex_state_t *s = sv;
    if (len == 0)
        return buf;
    if (m == RV_MCTS_HEX_SWAP)
        snprintf(buf, len, "swap-pieces");
    else if (m >= s->n * s->n)
        snprintf(buf, len, "??");
    else
        snprintf(buf, len, "%c%d", 'a' + m % s->n, m / s->n + 1);
    return buf;
}

/* Writes a message into @p why (if there is room) and fails. */
static rv_status_t hex_refuse(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static rv_status_t hex_refuse(char *why, size_t why_len, const char *fmt, ...)
{
    if (why != NULL && why_len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return RV_ERR_INVALID;
}

/* Reads "c3" (either case, blanks around it allowed) into a column and a
 * row number; false for anything else. A row number with a leading zero
 * ("c03") is refused so that every cell has one spelling. */
static bool hex_read_cell(const char *text, int *col, int *row, char *name,
                          size_t name_len)
{
    while (isspace((unsigned char)*text))
        text++;
    if (!isalpha((unsigned char)text[0]) || !isdigit((unsigned char)text[1]) ||
        (text[1] == '0' && isdigit((unsigned char)text[2])))
        return false;
    int c = tolower((unsigned char)text[0]) - 'a', r = 0, digits = 0;
    const char *p = text + 1;
    for (; isdigit((unsigned char)*p) && digits < 4; p++, digits++)
        r = r * 10 + (*p - '0');
    while (isspace((unsigned char)*p))
        p++;
    if (*p != '\0')
        return false;
    *col = c;
    *row = r;
    snprintf(name, name_len, "%c%d", 'a' + c, r);
    return true;
}

static rv_status_t hex_move_parse(const void *sv, const char *text,
                                  rv_mcts_move_t *m, char *why, size_t why_len)
{
    const hex_state_t *s = sv;
    char name[16];
    int col, row;

    if (text != NULL && strcasecmp(text, "swap-pieces") == 0) {
        if (!hex_may_swap(s))
            return hex_refuse(why, why_len,
                              s->swap ? "swap-pieces answers black's first "
                                        "stone only"
                                      : "the swap rule is off");
        *m = RV_MCTS_HEX_SWAP;
        return RV_OK;
    }
    if (text == NULL || !hex_read_cell(text, &col, &row, name, sizeof(name)))
        return hex_refuse(why, why_len,
                          "wrong notation: expected a cell like c3");
    if (s->winner != RV_MCTS_GAME_NONE)
        return hex_refuse(why, why_len, "the game is over: %s has won",
                          s->winner == RV_MCTS_GAME_FIRST ? "black" : "white");
    if (col >= s->n || row < 1 || row > s->n)
        return hex_refuse(why, why_len, "cell %s is off the %dx%d board", name,
                          s->n, s->n);
    int i = (row - 1) * s->n + col;
    if (s->cell[i] != HEX_EMPTY)
        return hex_refuse(why, why_len, "cell %s is occupied", name);
    *m = (rv_mcts_move_t)i;
    return RV_OK;
}

/* ---------------------------------------------------------------------- */
/* Drawing                                                                 */

/* The letters of the columns, each over its cells of the row that begins
 * @p indent characters in. */
static void hex_print_letters(int n, int indent, FILE *f)
{
    fprintf(f, "%*s", indent, "");
    for (int c = 0; c < n; c++)
        fprintf(f, "%c%s", 'a' + c, c + 1 < n ? "  " : "\n");
}

/*
 * As benzene's showboard: the letters above and below, each row one
 * space further right than the one above it (the rhombus), its number at
 * both ends, X for black and O for white. Row r's cells begin r + 3
 * characters in.
 */
static void hex_print(const void *sv, FILE *f)
{
    const hex_state_t *s = sv;
    static const char mark[3] = {'.', 'X', 'O'};
    const int n = s->n;

    hex_print_letters(n, 3, f);
    for (int r = 0; r < n; r++) {
        fprintf(f, "%*s%2d\\", r, "", r + 1);
        for (int c = 0; c < n; c++)
            fprintf(f, "%s%c", c ? "  " : "", mark[s->cell[r * n + c]]);
        fprintf(f, "\\%d\n", r + 1);
    }
    hex_print_letters(n, n + 2, f);
    fprintf(f, "X (black) joins top and bottom, O (white) left and right: ");
    if (s->winner == RV_MCTS_GAME_NONE)
        fprintf(f, "%s to move\n", s->to_play ? "O (white)" : "X (black)");
    else
        fprintf(f, "%s has won\n",
                s->winner == RV_MCTS_GAME_FIRST ? "X (black)" : "O (white)");
}

/* ---------------------------------------------------------------------- */
/* The game                                                                */

static const rv_mcts_game_t hex_game = {
    .name = "hex",
    .state_max = sizeof(hex_state_t),
    .state_len = hex_state_len,
    .to_play = hex_to_play,
    .legal_moves = hex_legal_moves,
    .apply = hex_apply,
    .is_terminal = hex_is_terminal,
    .winner = hex_winner,
    .hash = hex_hash,
    .playout = hex_playout,
    .move_text = hex_move_text,
    .move_parse = hex_move_parse,
    .print = hex_print,
};

const rv_mcts_game_t *rv_mcts_hex(void)
{
    return &hex_game;
}

rv_status_t rv_mcts_hex_init(void *sv, int n)
{
    hex_state_t *s = sv;
    if (s == NULL || n < 2 || n > RV_MCTS_HEX_MAX)
        return RV_ERR_INVALID;
    memset(s, 0, sizeof(*s));
    s->n = (uint8_t)n;
    s->winner = RV_MCTS_GAME_NONE;
    return RV_OK;
}

rv_status_t rv_mcts_hex_set_swap(void *sv, bool on)
{
    hex_state_t *s = sv;
    if (s == NULL || s->n < 2 || s->n > RV_MCTS_HEX_MAX)
        return RV_ERR_INVALID;
    s->swap = on;
    return RV_OK;
}

bool rv_mcts_hex_swap(const void *sv)
{
    return sv != NULL && ((const hex_state_t *)sv)->swap;
}

int rv_mcts_hex_size(const void *sv)
{
    return sv != NULL ? ((const hex_state_t *)sv)->n : 0;
}
