#!/usr/bin/env bash
# Installs the programs the test suite starts for real, where it can, and says what is missing
# where it cannot. Part of the README's test command: `bash test/setup.sh && npm ci && npm run test:lines`.
#
#   promtool     (Debian: prometheus)    checks the metrics exposition and the chart's alert rules
#   prometheus   (Debian: prometheus)    the server the dashboard's queries are evaluated on
#   redis-server (Debian: redis-server)  the shared store of several replicas, spawned per test file
#                                        on a free port (or set REDIS_URL, or run Docker for testcontainers)
#   nginx        (Debian: nginx-light)   a real proxy in front of the app for forward-auth
#   caddy        (Debian: caddy)         the Caddy forward-auth recipe, run in front of the app
#   libfaketime  (Debian: faketime)      steps a live process's wall clock
#   wrk          (Debian: wrk)           load generator of `npm run bench` (optional for the tests)
#   redis-cli    (Debian: redis-tools)   joins spawned nodes into a Redis Cluster (redis-cli --cluster create)
#   openssl      (Debian: openssl)       makes the CA and certificate of the Redis TLS test
#   python3, go, javac (Debian: python3, golang-go, default-jdk-headless)
#                                        run the Python, Go and Java clients of docs/clients.md
set -euo pipefail

# command-or-file to look for → Debian package
declare -a WANT=(
  "promtool:prometheus"
  "prometheus:prometheus"
  "redis-server:redis-server"
  "nginx:nginx-light"
  "caddy:caddy"
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1:faketime"
  "wrk:wrk"
  "redis-cli:redis-tools"
  "openssl:openssl"
  "/usr/bin/python3:python3"
  "go:golang-go"
  "javac:default-jdk-headless"
)

present() {
  case "$1" in
    /*) [ -e "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] ;;
  esac
}

missing=()
for entry in "${WANT[@]}"; do
  what=${entry%%:*}
  pkg=${entry##*:}
  present "$what" || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "test/setup.sh: promtool, prometheus, redis-server, nginx, caddy, libfaketime, wrk, redis-cli, openssl, python3, go and a JDK are installed"
  exit 0
fi

sudo=""
# Passwordless sudo only: a prompt would hang CI, and a refusal is reported below like no sudo.
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; fi
if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$sudo" ]; }; then
  echo "test/setup.sh: installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  # No recommends: the packages' own services are not wanted, the tests start their own servers.
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi

if [ "${missing[*]}" = "wrk" ]; then
  echo "test/setup.sh: wrk is missing (only npm run bench uses it, falling back to autocannon); the tests have all they need" >&2
  exit 0
fi

cat >&2 <<EOF
test/setup.sh: missing: ${missing[*]}
Install them with your package manager (Debian/Ubuntu: apt-get install ${missing[*]}),
or for Redis alone set REDIS_URL=redis://host:port, or run a Docker engine (testcontainers).
EOF
exit 1
