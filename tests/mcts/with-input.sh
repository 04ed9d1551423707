#!/usr/bin/env bash
# Runs a command with the given text (printf escapes allowed) on its
# standard input: a person's answers at rivet-mcts --play, from a pipe.
#   with-input.sh TEXT -- COMMAND...
set -uo pipefail
text=$1
shift 2
printf "$text" | "$@"
