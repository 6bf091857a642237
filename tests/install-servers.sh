#!/usr/bin/env bash
# Installs the servers the tests start on loopback themselves (each test
# makes its own PostgreSQL cluster, Redis, HAProxy and OCI registry), and the
# tools they use (htpasswd for registry auth, openssl for signatures, headless
# Chromium and its driver for the console's browser tests), from
# Debian's packages, when they are missing.
set -euo pipefail
missing=()
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v haproxy >/dev/null 2>&1 || missing+=(haproxy)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v htpasswd >/dev/null 2>&1 || missing+=(apache2-utils)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
# Chromium only recommends a font; its pages' text needs one.
[ -d /usr/share/fonts/truetype/liberation ] || missing+=(fonts-liberation)
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing ${missing[*]} (Debian packages) for the tests"
if [ "$(id -u)" -ne 0 ]; then
    echo "run as root, or install them first: apt-get install ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}"
}
