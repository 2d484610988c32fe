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
}
