#!/usr/bin/env bash
# A renamed public name still compiles, links and runs for one minor
# release, and its every use warns naming the new one (RV_DEPRECATED,
# CHANGELOG.md). Builds a program written against the tree search's
# names before 0.2 and the collectives' before 0.3, and runs it.
#
#   check_deprecated.sh CC SOURCE_DIR LIBRIVET [CFLAGS]
#
# CFLAGS: what a program needs to load this librivet (a sanitizer build's
# -fsanitize=..., whose runtime must come first).
set -euo pipefail
# The compiler's quotes in ASCII, as grep reads them below.
export LC_ALL=C
cc=$1
src=$2
lib=$3
read -r -a cflags <<< "${4:-}"
inc=(-I"$src/core/api" -I"$src/am/api" -I"$src/rma/api" -I"$src/mcts/api")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/old.c" <<'C'
#include <stdlib.h>
#include "rv_coll.h"
#include "rv_mcts.h"
/* The collectives before 0.3, source first: built and linked, not run
 * (they need a job). */
int old_collectives(rv_worker_t *w);
int old_collectives(rv_worker_t *w)
{
    uint64_t a = 1, b[64];
    return rv_allreduce(w, &a, b, 1, RV_COLL_U64, RV_COLL_SUM) != RV_OK ||
           rv_allgather(w, &a, sizeof(a), b) != RV_OK;
}
int main(void)
{
    static uint8_t s[1024];
    rv_move_t moves[RV_GAME_MAX_MOVES];
    const rv_game_t *g = rv_game_tictactoe();
    rv_mcts_result_t *r = calloc(1, sizeof(*r));
    rv_uct_tree_t *t = NULL;
    rv_tictactoe_init(s);
    if (r == NULL || g->legal_moves(s, moves) != 9 ||
        rv_uct_search(g, s, 300, 1, 1.0, 7, r) != RV_OK || r->nmoves != 9 ||
        rv_uct_tree_create(g, s, 1, 1.0, 7, &t) != RV_OK ||
        rv_uct_tree_search(t, 100, r) != RV_OK ||
        rv_uct_tree_play(t, r->best) != RV_OK)
        return 1;
    rv_uct_tree_destroy(t);
    if (rv_hex_init(s, 5) != RV_OK || rv_hex_size(s) != 5 ||
        rv_game_hex()->to_play(s) != RV_GAME_FIRST || RV_HEX_MAX != 19)
        return 1;
    free(r);
    return 0;
}
C
"$cc" -std=c11 -Wall "${cflags[@]}" "${inc[@]}" "$work/old.c" -o "$work/old" \
    -L"$(dirname "$lib")" -lrivet -Wl,-rpath,"$(dirname "$lib")" \
    2> "$work/warnings" || { cat "$work/warnings"; exit 1; }
bad=0
for old_new in rv_move_t:rv_mcts_move_t RV_GAME_MAX_MOVES:RV_MCTS_MAX_MOVES \
    rv_game_t:rv_mcts_game_t rv_game_tictactoe:rv_mcts_tictactoe \
    rv_uct_tree_t:rv_mcts_uct_tree_t rv_tictactoe_init:rv_mcts_tictactoe_init \
    rv_uct_search:rv_mcts_uct_search rv_uct_tree_create:rv_mcts_uct_tree_create \
    rv_uct_tree_search:rv_mcts_uct_tree_search \
    rv_uct_tree_play:rv_mcts_uct_tree_play \
    rv_uct_tree_destroy:rv_mcts_uct_tree_destroy rv_hex_init:rv_mcts_hex_init \
    rv_hex_size:rv_mcts_hex_size rv_game_hex:rv_mcts_hex \
    RV_GAME_FIRST:RV_MCTS_GAME_FIRST RV_HEX_MAX:RV_MCTS_HEX_MAX \
    rv_allreduce:rv_coll_allreduce rv_allgather:rv_coll_allgather; do
    old=${old_new%%:*} new=${old_new#*:}
    if ! grep -qE "$old. is deprecated: use $new[ (]" "$work/warnings"; then
        echo "no warning that $old is deprecated for $new"
        bad=1
    fi
done
if ! "$work/old"; then
    echo "a program on the old names failed"
    bad=1
fi
[ $bad -eq 0 ] && echo "the names before 0.2 and 0.3 build, warn and run"
exit $bad
