"""`fleetscope completion bash|zsh`: a script for the shell to load, e.g.
`source <(fleetscope completion bash)`. The script hands the words typed so far to
`fleetscope __complete words -- ...` and offers what it prints (fleetscope.client.complete),
so both shells complete the same things: kinds, clusters and namespaces from the API (as the
caller, with the connection flags on the line), statuses, formats, contexts, flags."""

from __future__ import annotations

import argparse
import sys

BASH = r"""# bash completion for fleetscope; load with: source <(fleetscope completion bash)
_fleetscope_complete() {
    local IFS=$'\n' out
    out=$("${COMP_WORDS[0]}" __complete words -- "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null) || return 0
    COMPREPLY=($out)
    if [[ ${#COMPREPLY[@]} -eq 1 && ${COMPREPLY[0]} == */ ]]; then
        compopt -o nospace 2>/dev/null
    fi
    return 0
}
complete -o default -F _fleetscope_complete fleetscope
"""

ZSH = r"""#compdef fleetscope
# zsh completion for fleetscope; load with: source <(fleetscope completion zsh)
# (after compinit), or save as _fleetscope in a directory of $fpath.
_fleetscope() {
    local -a found whole partial
    found=(${(f)"$(${words[1]} __complete words -- "${(@)words[2,CURRENT]}" 2>/dev/null)"})
    local c
    for c in $found; do
        if [[ $c == */ ]]; then partial+=($c); else whole+=($c); fi
    done
    (( $#whole )) && compadd -Q -- $whole
    (( $#partial )) && compadd -Q -S '' -- $partial
    return 0
}
if (( $+functions[compdef] )); then
    compdef _fleetscope fleetscope
fi
"""

SCRIPTS = {"bash": BASH, "zsh": ZSH}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shell", choices=sorted(SCRIPTS), help="the shell to complete in")


def run(args: argparse.Namespace) -> int:
    sys.stdout.write(SCRIPTS[args.shell])
    return 0
