#!/usr/bin/env bash
# Installs what the test suite needs, idempotently: only what is missing is
# installed, and a warm machine passes through in about a second. `npm test`
# runs it first (package.json "pretest"), so the README's test command works on
# a fresh machine by itself; `.ci/run` calls nothing else.
#
# What a first run installs (about 5 minutes, most of it chromium, podman and
# the base images' debootstrap):
#   Debian packages  nginx-light tinyproxy openssl iproute2 procps nftables
#                    util-linux iputils-ping bind9 bind9-dnsutils podman runc
#                    debootstrap tcpdump tshark chromium iputils-tracepath traceroute
#                    prometheus postgresql
#   podman           /etc/containers/containers.conf (runc, ulimits this kernel allows)
#                    and a Docker-compatible API on /run/podman/podman.sock
#   base images      localhost/debian:bookworm, localhost/outpost-node-base
#                    (docker/base/build-base-images.sh; no registry is reachable here)
#
# It needs root, or sudo without a password. Without either it stops at once
# with one line naming the packages and the command to run.
set -euo pipefail
cd "$(dirname "$0")/../.."

log() { echo "provision: $*" >&2; }

SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo"; else SUDO="none"; fi
fi

# sbin may be off a user's PATH.
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }

# Each command the suite runs, and the Debian package that brings it.
missing=()
need() { have "$1" || missing+=("$2"); }
need nginx nginx-light             # HTTP targets, TLS and client certificates
need tinyproxy tinyproxy           # proxy tests
need openssl openssl               # test PKI
need ip iproute2                   # network namespaces (TCP, ICMP, diagnostics)
need sysctl procps
need nft nftables                  # dropped and refused ports
need setpriv util-linux            # ICMP as uid 65534 without capabilities
need ping iputils-ping             # copied without file capabilities by the ICMP tests
need named bind9                   # the DNS tests' authoritative server
need dig bind9-dnsutils            # the reference the DNS answers are compared with
need podman podman                 # container tests (test/containers)
need runc runc
need debootstrap debootstrap       # the local base images
need tcpdump tcpdump               # diagnostics captures
need tshark tshark                 # reads the captures back
need tracepath iputils-tracepath
need traceroute traceroute
need chromium chromium             # BROWSER and PLAYWRIGHT checks
need prometheus prometheus         # scrapes /metrics; promtool checks metrics and the example rules
# The server's PostgreSQL store and replicas (test/support/postgres.ts starts a cluster as an
# unprivileged user); the server binaries live in /usr/lib/postgresql/<version>/bin, off PATH.
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || missing+=(postgresql)
need psql postgresql-client

as_root() {
  if [ "$SUDO" = none ]; then return 1; fi
  $SUDO "$@"
}

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$SUDO" = none ]; then
    log "the tests need root or passwordless sudo to install: sudo apt-get install -y --no-install-recommends ${missing[*]}"
    exit 1
  fi
  log "installing ${missing[*]} (first run only; a few minutes)"
  # tshark's package asks whether non-root users may capture: answer no, without a prompt.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | as_root debconf-set-selections
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The rest changes the machine (podman's settings and service, the base images): it needs root.
if [ "$SUDO" = none ]; then
  log "the container tests need root or passwordless sudo to configure podman; run: sudo $0"
  exit 1
fi

# Podman: runc (crun fails on this kernel's hybrid cgroups) and ulimits that may not be raised
# here. Written only when missing or different.
containers_conf='[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
[engine]
runtime = "runc"'
if [ "$(cat /etc/containers/containers.conf 2>/dev/null)" != "$containers_conf" ]; then
  log "writing /etc/containers/containers.conf"
  as_root mkdir -p /etc/containers
  printf '%s\n' "$containers_conf" | as_root tee /etc/containers/containers.conf >/dev/null
fi

# A Docker-compatible API for testcontainers, unless a healthy one already answers.
podman_socket=/run/podman/podman.sock
# A service left by an earlier run whose working directory was removed answers but cannot start
# containers ("write child: broken pipe"): stop it, so a healthy one is started below.
for pid in $(pgrep -f "podman system service" || true); do
  if readlink "/proc/$pid/cwd" 2>/dev/null | grep -q '(deleted)'; then
    log "restarting a podman service whose working directory is gone"
    as_root kill "$pid" || true
    sleep 1
  fi
done
podman_answers() { as_root podman --remote --url "unix://$podman_socket" version >/dev/null 2>&1; }
if ! podman_answers; then
  log "starting podman system service on $podman_socket"
  as_root mkdir -p "$(dirname "$podman_socket")"
  # From /: conmon inherits the service's working directory and fails if it has gone (a removed clone).
  as_root sh -c "cd / && nohup podman system service --time=0 unix://$podman_socket >/var/tmp/podman-service.log 2>&1 &"
  # Retried to a deadline: a busy machine takes longer than a quiet one to bring the service up.
  deadline=$((SECONDS + 60))
  until podman_answers; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "podman system service did not answer within 60 s; its log: $(tail -5 /var/tmp/podman-service.log 2>/dev/null | tr '\n' ' ')"
      exit 1
    fi
    sleep 0.2
  done
fi

# No container registry is reachable: local stand-ins for debian:bookworm-slim and
# node:24-bookworm-slim (skipped when present). The images' Node.js comes from the npm
# registry: root (under sudo) uses this user's registry.
as_root env NPM_CONFIG_REGISTRY="$(npm config get registry 2>/dev/null || echo https://registry.npmjs.org/)" docker/base/build-base-images.sh
