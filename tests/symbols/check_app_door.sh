#!/usr/bin/env bash
# An application's door is rivet.h (and the layers' api/ headers above
# it): it must not hand out the transport plugin's interface, which is
# rv_layer.h's, for the layers and tools built on core. Preprocesses each
# application header and fails if the plugin's ops table, transport
# worker or capabilities are declared in what it pulls in.
#
#   check_app_door.sh CC SOURCE_DIR
set -euo pipefail
cc=$1
src=$2
inc=(-I"$src/core/api" -I"$src/am/api" -I"$src/rma/api" -I"$src/store/api"
     -I"$src/mcts/api")
bad=0
for h in rivet.h rv_am.h rv_rma.h rv_store.h rv_mcts.h; do
    out=$(echo "#include \"$h\"" | "$cc" -E -P "${inc[@]}" -x c -)
    for sym in rv_transport_ops_t rv_transport_caps_t rv_worker_tworker \
               rv_context_transport; do
        if grep -qw "$sym" <<< "$out"; then
            echo "$h declares $sym: the plugin interface is rv_layer.h's"
            bad=1
        fi
    done
done
[ $bad -eq 0 ] && echo "the application headers hold no plugin interface"
exit $bad
