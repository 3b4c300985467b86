#!/usr/bin/env bash
# Builds the two local base images the container tests build Outpost's images on,
# for machines that cannot pull from a registry (see test/containers/README.md):
#
#   localhost/debian:bookworm     debootstrap --variant=minbase, slimmed like the
#                                 official debian:bookworm-slim (no docs, man pages,
#                                 locales or apt lists); stands in for debian:bookworm-slim
#   localhost/outpost-node-base   that plus this machine's node and npm, laid out like
#                                 the official node:20-bookworm-slim (/usr/local/bin/node,
#                                 /usr/local/lib/node_modules/npm); stands in for it
#
# Idempotent and cached: the Debian image is built once (debootstrap takes ~30 s);
# the Node image is rebuilt only when `node --version` or `npm --version` changed.
# Needs root, podman and debootstrap. Usage: docker/base/build-base-images.sh
set -euo pipefail

DEBIAN_IMAGE="${OUTPOST_DEBIAN_IMAGE:-localhost/debian:bookworm}"
NODE_BASE_IMAGE="${OUTPOST_NODE_BASE_IMAGE:-localhost/outpost-node-base}"
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
HERE="$(cd "$(dirname "$0")" && pwd)"

log() { echo "build-base-images: $*" >&2; }

work="$(mktemp -d /var/tmp/outpost-base.XXXXXX)"
trap 'rm -rf "$work"' EXIT

if podman image exists "$DEBIAN_IMAGE"; then
  log "$DEBIAN_IMAGE exists"
else
  log "debootstrap $SUITE into $work/rootfs (about 30 s)"
  rootfs="$work/rootfs"
  debootstrap --variant=minbase "$SUITE" "$rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1 || {
    tail -20 "$work/debootstrap.log" >&2
    exit 1
  }
  # What debian:bookworm-slim does: keep docs, man pages and locales out of every later apt-get install too.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
CFG
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
CFG
  cat >"$rootfs/etc/apt/sources.list" <<LIST
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
LIST
  find "$rootfs/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete 2>/dev/null || true
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
  rm -rf "$rootfs"/usr/share/{man,info,groff,lintian,linda}/* "$rootfs"/usr/share/locale/* \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/root/.cache
  : >"$rootfs/etc/machine-id"
  log "importing $DEBIAN_IMAGE"
  tar --numeric-owner --xattrs -C "$rootfs" -c . |
    podman import --quiet --change 'CMD ["bash"]' \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$DEBIAN_IMAGE" >/dev/null
fi

node_bin="$(readlink -f "$(command -v node)")"
node_version="$(node --version)"
npm_dir="$(readlink -f "$(dirname "$node_bin")/../lib/node_modules/npm")"
npm_version="$(npm --version 2>/dev/null)"
wanted="node $node_version npm $npm_version"
have="$(podman image inspect --format '{{ index .Labels "io.outpost.base" }}' "$NODE_BASE_IMAGE" 2>/dev/null || true)"
if [ "$have" = "$wanted" ]; then
  log "$NODE_BASE_IMAGE exists ($wanted)"
else
  log "building $NODE_BASE_IMAGE ($wanted) from $node_bin and $npm_dir"
  mkdir -p "$work/context"
  cp "$node_bin" "$work/context/node"
  cp -a "$npm_dir" "$work/context/npm"
  podman build --quiet --format docker --network none \
    --build-arg "DEBIAN_IMAGE=$DEBIAN_IMAGE" --label "io.outpost.base=$wanted" \
    -f "$HERE/Containerfile.node" -t "$NODE_BASE_IMAGE" "$work/context" >/dev/null
fi
