#!/usr/bin/env bash
# A newcomer's first ten minutes, N times: fresh-clone this repository (its committed HEAD) into
# a temporary directory, run the README's `./dev demo` until it prints "ready.", press Ctrl-C
# (SIGINT) and check that it stops cleanly; optionally run `./dev test` too. With --time-wait,
# thousands of loopback client sockets sit in TIME_WAIT throughout (the busy machine of issue
# #17), refreshed so they never expire. With --netns (root), every run gets its own network
# namespace: port 8080 and the TIME_WAIT pressure then touch nobody else on the machine.
#
#   scripts/newcomer-check.sh -n 10 --time-wait 6000 --netns
#   scripts/newcomer-check.sh -n 3 --tests                  # the README's two commands
#   scripts/newcomer-check.sh -n 10 --test-args "-k demo"   # ./dev test -k demo after the demo
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: newcomer-check.sh [options]

  -n N                runs (default 10)
  --time-wait COUNT   keep about COUNT loopback client sockets in TIME_WAIT during each run
  --netns             run each clone in a fresh network namespace (needs root and unshare)
  --tests             also run `./dev test` (the README's second command) in each clone
  --test-args ARGS    also run `./dev test ARGS` in each clone (implies --tests)
  --port N            pass --port N to the demo (default: none, i.e. the README's 8080)
  --ready-timeout S   seconds to wait for "ready." once .venv exists (default 300)
  --rev REV           check out REV in each clone (default: the committed HEAD), e.g. to
                      compare with an older commit under the same conditions
  --keep              keep the clones (default: removed after each run that passed)
USAGE
}

if [ -z "${NEWCOMER_CHECK_RUN:-}" ]; then  # else: re-executed in a namespace, settings in env
runs=10 time_wait=0 netns=0 tests=0 test_args="" port="" ready_timeout=300 keep=0 rev=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) runs=$2; shift 2 ;;
    --time-wait) time_wait=$2; shift 2 ;;
    --netns) netns=1; shift ;;
    --tests) tests=1; shift ;;
    --test-args) tests=1; test_args=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --ready-timeout) ready_timeout=$2; shift 2 ;;
    --rev) rev=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
  esac
done
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
work=$(mktemp -d "${TMPDIR:-/tmp}/fleetscope-newcomer.XXXXXX")
fi
self=$(readlink -f "$0")

# Keeps at least COUNT client sockets in TIME_WAIT (they last 60 s): COUNT at once, says
# "held", then a third of COUNT more every 20 s.
pressure_py='
import socket, sys, time
count = int(sys.argv[1])
while True:
    lst = socket.socket(); lst.bind(("127.0.0.1", 0)); lst.listen(1024)
    made = 0
    while made < count:
        clients = [socket.create_connection(lst.getsockname()) for _ in range(min(500, count - made))]
        servers = [lst.accept()[0] for _ in clients]
        for c in clients: c.close()          # the client closes first: its side gets TIME_WAIT
        for s in servers: s.recv(1); s.close()
        made += len(clients)
    lst.close()
    if count == int(sys.argv[1]):
        print("held", flush=True)
        count //= 3
    time.sleep(20)
'

# A fresh clone whose ./dev has made its .venv (pip needs the network a namespace lacks).
prepare() {
  local i=$1
  local dir="$work/run-$i" started=$SECONDS
  git clone -q "$repo" "$dir"
  [ -z "$rev" ] || git -C "$dir" checkout -q "$rev"
  (cd "$dir" && ./dev shell </dev/null >/dev/null 2>"$work/run-$i.venv.log") || {
    echo "run $i: FAIL creating .venv (log: $work/run-$i.venv.log)"; return 1; }
  echo $((SECONDS - started)) >"$work/run-$i.venv-seconds"
}

# The README's commands in the prepared clone; prints one result line, exit status = verdict.
one_run() {
  local i=$1
  local dir="$work/run-$i" log="$work/run-$i.log" pressure="" demo rc verdict="pass"
  if [ "$time_wait" -gt 0 ]; then
    python3 -c "$pressure_py" "$time_wait" >"$log.pressure" & pressure=$!
    while ! grep -q held "$log.pressure"; do  # until the first COUNT are in place
      kill -0 "$pressure" 2>/dev/null || { echo "run $i: FAIL (TIME_WAIT generator died)"; return 1; }
      sleep 0.1
    done
  fi
  local started=$SECONDS tw
  : >"$log"
  (cd "$dir" && exec ./dev demo ${port:+--port "$port"}) >"$log" 2>&1 & demo=$!
  while ! grep -q '\] ready\.' "$log"; do
    if ! kill -0 "$demo" 2>/dev/null || [ $((SECONDS - started)) -gt "$ready_timeout" ]; then
      verdict="FAIL (no ready line)"; break
    fi
    sleep 1  # polling the log, not fixing a race
  done
  tw=$(ss -Htan state time-wait 2>/dev/null | wc -l)
  local ready_s=$((SECONDS - started))
  kill -INT "$demo" 2>/dev/null || true
  rc=0; wait "$demo" || rc=$?
  if [ "$verdict" = pass ] && { [ "$rc" -ne 0 ] || ! grep -q '^stopped' "$log"; }; then
    verdict="FAIL (exit $rc after Ctrl-C)"
  fi
  local left=()
  mapfile -t left < <(pgrep -f -- "$dir/" || true)  # processes still running from this clone
  if [ ${#left[@]} -gt 0 ]; then
    [ "$verdict" = pass ] && verdict="FAIL (left processes: ${left[*]})"
    kill -KILL "${left[@]}" 2>/dev/null || true
  fi
  local venv_s line
  venv_s=$(cat "$work/run-$i.venv-seconds")
  local what="ready after"
  [ "$verdict" = pass ] || what="gave up after"
  line="run $i: demo $verdict (.venv ${venv_s}s, then $what ${ready_s}s; ${tw} sockets in TIME_WAIT)"
  if [ "$tests" = 1 ]; then
    local trc=0 summary args=()
    read -ra args <<<"$test_args"
    (cd "$dir" && ./dev test -p no:cacheprovider -q "${args[@]}") >"$log.test" 2>&1 || trc=$?
    summary=$(tail -1 "$log.test")
    line="$line; ./dev test $test_args: exit $trc ($summary)"
    [ "$trc" -eq 0 ] || verdict="FAIL"
  fi
  [ -n "$pressure" ] && { kill "$pressure" 2>/dev/null || true; wait "$pressure" 2>/dev/null || true; }
  echo "$line"
  if [ "$verdict" = pass ]; then
    [ "$keep" = 1 ] || rm -rf "$dir"
    return 0
  fi
  echo "  log: $log" >&2
  return 1
}

if [ -n "${NEWCOMER_CHECK_RUN:-}" ]; then  # re-executed inside a fresh network namespace
  ip link set lo up
  one_run "$NEWCOMER_CHECK_RUN"
  exit $?
fi

passed=0
for i in $(seq 1 "$runs"); do
  prepare "$i" || continue
  if [ "$netns" = 1 ]; then
    export work repo time_wait tests test_args port ready_timeout keep
    if NEWCOMER_CHECK_RUN=$i unshare -n "$self"; then passed=$((passed + 1)); fi
  elif one_run "$i"; then
    passed=$((passed + 1))
  fi
done
echo "passed $passed of $runs (logs in $work)"
[ "$passed" -eq "$runs" ]
