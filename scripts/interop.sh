# What the gateway's interop scripts (scripts/gateway-interop, scripts/search-interop) share:
# the clients' installs, the Inspector CLI, and running checks, servers and their cleanup.
# Sourced; expects ROOT, HOME_DIR, NODE_CACHE, NODE_WHEEL_VERSION and CHECK_TIMEOUT set, and
# INTEROP_NAME (the script's name, in its messages). CHECK_FUNCTIONS names the shell functions a
# check's command may use (inspector, leftovers and no_leftovers by default).

die() { echo "$INTEROP_NAME: $*" >&2; exit 2; }
# shellcheck source=scripts/node.sh
. "$ROOT/scripts/node.sh"

# path_in PREFIX TEXT: the folder or file in parentheses on TEXT's line starting with PREFIX,
# as scripts/legacy-clients prints them after installing (it keeps its own versions; these
# scripts reuse its installs).
path_in() {
  local line
  line=$(printf '%s\n' "$2" | grep -F -m 1 "$1") || die "no line \"$1\" in: $2"
  printf '%s\n' "$line" | sed -n 's/^[^(]*(\([^)]*\)).*/\1/p'
}

# The clients every one of these scripts drives: mcp 1.x and the Inspector CLI (installed by
# scripts/legacy-clients), mcp 2.x (scripts/parts) and Node 24; sets LEGACY_PYTHON,
# INSPECTOR_JS, MODERN_PYTHON and NODE_BIN.
install_clients() {
  local said
  said=$("$ROOT/scripts/legacy-clients" install)
  LEGACY_PYTHON=$(path_in "legacy-clients: mcp " "$said")
  INSPECTOR_JS=$(path_in "legacy-clients: Inspector " "$said")
  MODERN_PYTHON=$("$ROOT/scripts/parts" path mcp2-python)
  ensure_node
}

# The toolwire binary to test (TOOLWIRE_BIN, else the release build), as an absolute path.
toolwire_bin() {
  local bin=${TOOLWIRE_BIN:-${CARGO_TARGET_DIR:-target}/release/toolwire}
  [ -x "$bin" ] ||
    die "$bin is not an executable; build it (cargo build --release -p toolwire-cli) or set TOOLWIRE_BIN"
  echo "$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
}

# The clients, each a shell function run by `check` in a child bash.
# inspector ERA ARGS...: the Inspector CLI (its target last, after `--`, for stdio).
inspector() {
  local era=$1
  shift
  PATH="$NODE_BIN:$PATH" "$NODE_BIN/node" "$INSPECTOR_JS" --cli --protocol-era "$era" \
    --format json --connect-timeout 20000 ${RUST_LOG:+-e "RUST_LOG=$RUST_LOG"} "$@"
}

PASSED=0
FAILED=0
CHECK_FUNCTIONS=${CHECK_FUNCTIONS:-inspector leftovers no_leftovers}

# check [-v] NAME COMMAND: runs COMMAND (shell text) under a timeout, its output into the
# results folder; prints PASS or FAIL with the time taken and its last line, and the whole
# output on FAIL (with -v, also on PASS).
check() {
  local verbose=
  if [ "$1" = -v ]; then verbose=1; shift; fi
  local name=$1 log rc=0 start end took
  shift
  log=$OUT/$(printf '%s' "$name" | tr -c 'A-Za-z0-9_.-' '_').log
  start=$(date +%s.%N)
  # `timeout` runs a program, so the command runs in a child bash that gets the functions; in
  # the background, because bash runs a trap only once a foreground command ends.
  # shellcheck disable=SC2086 # CHECK_FUNCTIONS is a list of names
  timeout -k 5 "$CHECK_TIMEOUT" bash -c "set -o pipefail; $(declare -f $CHECK_FUNCTIONS); $*" \
    > "$log" 2>&1 < /dev/null &
  CHECK_PID=$!
  wait "$CHECK_PID" || rc=$?
  CHECK_PID=
  end=$(date +%s.%N)
  took=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }')
  if [ "$rc" = 0 ]; then
    PASSED=$((PASSED + 1))
    echo "PASS $name (${took}s): $(tail -n 1 "$log")"
    [ -z "$verbose" ] || grep -E '^(PASS|FAIL) ' "$log" | sed 's/^/    /'
  else
    FAILED=$((FAILED + 1))
    [ "$rc" = 124 ] && echo "(killed after ${CHECK_TIMEOUT}s)" >> "$log"
    echo "FAIL $name (${took}s, exit $rc); its output ($log):"
    sed 's/^/    /' "$log"
  fi
}

# start NAME NEEDLE COMMAND...: starts COMMAND in the background, its stderr into the results
# folder, and waits (30 s at most) for the line with NEEDLE; sets STARTED_PID and STARTED_URL
# (the http://…/mcp on that line).
start() {
  local name=$1 needle=$2 log=$OUT/$1.log i line
  shift 2
  "$@" > "$log" 2>&1 < /dev/null &
  STARTED_PID=$!
  PIDS+=("$STARTED_PID")
  for i in $(seq 300); do
    line=$(grep -F -m 1 "$needle" "$log" || true)
    if [ -n "$line" ]; then
      STARTED_URL=$(printf '%s\n' "$line" | grep -o 'http://[^ ]*/mcp' | head -n 1)
      return 0
    fi
    kill -0 "$STARTED_PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "$INTEROP_NAME: $name did not say \"$needle\" within 30 s; its output ($log):" >&2
  sed 's/^/    /' "$log" >&2
  exit 1
}

# stop PID: SIGTERM, then SIGKILL if it is still there after 10 seconds.
stop() {
  local i
  kill "$1" 2>/dev/null || true
  for i in $(seq 100); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# The processes whose command line names the work folder (upstreams and gateways still there),
# one "PID ARGS" line each, leaving out the shells of this script.
leftovers() {
  local pid args
  for pid in $(pgrep -f -- "$WORK/" || true); do
    args=$(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null) || continue
    case $args in "" | bash\ *) continue ;; esac
    echo "$pid $args"
  done
  return 0
}

# Waits (10 s at most) until no process names the work folder; says which do otherwise.
no_leftovers() {
  local i left
  for i in $(seq 50); do
    left=$(leftovers)
    [ -z "$left" ] && { echo "none"; return 0; }
    sleep 0.2
  done
  echo "still running 10 s after the gateways stopped:"
  echo "$left"
  return 1
}

# On exit, also by a signal: the check running and every process started here, then any
# upstream left behind (by its own pid, found through the work folder on its command line).
CHECK_PID=
PIDS=()
cleanup() {
  local pid
  if [ -n "$CHECK_PID" ]; then stop "$CHECK_PID"; CHECK_PID=; fi
  for pid in "${PIDS[@]}"; do stop "$pid"; done
  PIDS=()
  if [ -n "${WORK:-}" ]; then
    for pid in $(leftovers | cut -d ' ' -f 1); do kill -KILL "$pid" 2>/dev/null || true; done
  fi
}

# results_folder DEFAULT_PREFIX [OUT]: makes the results folder (OUT, else a new temporary one)
# and the work folder in it; sets OUT and WORK, and the traps that clean up on exit.
results_folder() {
  OUT=${2:-$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")}
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  WORK=$OUT/work
  mkdir -p "$WORK/state"
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}
