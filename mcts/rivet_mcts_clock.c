/*
 * rivet-mcts's game clock: GTP's time controls (GTP version 2, sections
 * 6.3.4 and 6.3.5, "time_settings" and "time_left"), as tournament
 * managers (gogui-twogtp, HexGui's) send them, and the share of the time
 * left that one genmove may spend.
 *
 * The controller sets main time, then Canadian byo-yomi: a period of
 * byo_yomi_time seconds for byo_yomi_stones moves, renewed when they are
 * played. byo_yomi_time 0 is absolute time (sudden death); byo_yomi_time
 * above 0 with byo_yomi_stones 0 means no limit, as the protocol says.
 * Before a genmove the controller may say what the engine's clock shows
 * ("time_left COLOR TIME STONES", STONES 0 in main time); the engine
 * keeps its own account too, for a controller that does not.
 *
 * A move's budget spreads the time left over the moves the engine may
 * still have to play: in absolute time every move it could still make
 * (half the empty cells, rounded up), so that the clock cannot run out
 * however long the game goes; with byo-yomi behind it, half as many,
 * since the period catches what main time misses.
 */
#include <math.h>

#include "rivet_mcts.h"

void clock_settings(gtp_clock_t clocks[2], double main_s, double byo_s,
                    int byo_stones)
{
    for (int c = 0; c < 2; c++) {
        gtp_clock_t *k = &clocks[c];
        k->timed = !(byo_s > 0 && byo_stones == 0);
        k->main_s = main_s;
        k->byo_s = byo_s;
        k->byo_stones = byo_stones;
        k->left_s = main_s;
        k->stones = 0;
        /* No main time: the game starts in its first period. */
        if (k->timed && !(main_s > 0) && byo_s > 0) {
            k->left_s = byo_s;
            k->stones = byo_stones;
        }
    }
}

void clock_left(gtp_clock_t *k, double left_s, int stones)
{
    k->left_s = left_s;
    k->stones = stones;
}

double clock_budget(const gtp_clock_t *k, int empty)
{
    if (!k->timed)
        return -1;
    /* A clock already overdrawn still bounds the move: as short as can
     * be, never "no limit". */
    if (k->left_s <= 0 && k->stones > 0)
        return 0;
    if (k->stones > 0)
        return k->left_s / k->stones;
    int moves = (empty + 1) / 2;
    if (k->byo_s > 0)
        moves = (moves + 1) / 2;
    if (moves < 1)
        moves = 1;
    double share = (k->left_s > 0 ? k->left_s : 0) / moves;
    if (k->byo_s > 0 && k->byo_stones > 0)
        share += k->byo_s / k->byo_stones;
    return share;
}

void clock_spend(gtp_clock_t *k, double spent_s)
{
    if (!k->timed)
        return;
    k->left_s -= spent_s;
    if (k->stones == 0) {
        if (k->left_s >= 0 || !(k->byo_s > 0))
            return;
        /* Main time ran out during this move: the rest of it came from
         * the first period, of which it is the first stone. */
        k->left_s += k->byo_s;
        k->stones = k->byo_stones;
    }
    if (--k->stones == 0) {
        k->left_s = k->byo_s;
        k->stones = k->byo_stones;
    }
}

double clock_search_time(gtp_clock_t *k, double budget)
{
    /* What a genmove costs beside its search (the command's broadcast,
     * the rollouts in flight when the time is up, the summary, the
     * answer): the most seen lately, decaying, never under 10 ms. */
    double t = budget * 0.9 - fmax(k->overhead_s, 0.01);
    return t > 0.001 ? t : 0.001;
}

void clock_overhead(gtp_clock_t *k, double spent_s, double searched_s)
{
    double o = spent_s - searched_s;
    k->overhead_s = fmax(o, 0.8 * k->overhead_s);
}
