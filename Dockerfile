# Outpost — the full image: URL, API, TCP, DNS and ICMP checks, plus runtime
# 2026-04 (the packages scripted checks import) installed from its lockfile and
# Debian's chromium for BROWSER checks.
#
#   docker build -t outpost .
#
# playwright-core never downloads a browser: BROWSER checks launch /usr/bin/chromium.
# docs/deployment.md explains every choice below.
# The stages `build`, `deps` and `runtime-2026-04` are word for word the same in
# Dockerfile, Dockerfile.uptime, Dockerfile.dev and docker/migration/Dockerfile,
# so that one layer cache serves all four (test/containers/dockerfiles.test.ts checks it).

# An official Node.js LTS image; tests pass a locally built one.
ARG BASE_IMAGE=node:24-bookworm-slim

# ---- build: compile TypeScript ----
FROM ${BASE_IMAGE} AS build
# A PEM file npm trusts, e.g. a corporate TLS-inspection CA: a path mounted into
# the build (podman build -v) or a file put in docker/build-ca/ (docs/deployment.md:
# "Behind a TLS-inspecting proxy").
ARG NODE_EXTRA_CA_CERTS
COPY docker/build-ca/ /usr/local/share/outpost-build-ca/
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --ignore-scripts --no-audit --no-fund --loglevel=warn
COPY tsconfig.json ./
COPY src ./src
RUN npm run build && rm -f dist/.tsbuildinfo

# ---- deps: production node_modules only ----
FROM ${BASE_IMAGE} AS deps
ARG NODE_EXTRA_CA_CERTS
COPY docker/build-ca/ /usr/local/share/outpost-build-ca/
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=warn

# ---- runtime-2026-04: a runtime's packages, exactly as locked ----
FROM ${BASE_IMAGE} AS runtime-2026-04
ARG NODE_EXTRA_CA_CERTS
COPY docker/build-ca/ /usr/local/share/outpost-build-ca/
ENV PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
WORKDIR /runtimes/2026-04
COPY runtimes/2026-04/runtime.json runtimes/2026-04/package.json runtimes/2026-04/package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=warn

# ---- the image ----
FROM ${BASE_IMAGE}
# Chromium for BROWSER checks (headless, started by the script runner with
# --no-sandbox and the flags in src/checks/scripted/harness/harness.cjs) and fonts-liberation
# so pages render text. Its own layer, first in the stage and word for word the
# same in Dockerfile, Dockerfile.dev and docker/migration/Dockerfile, so the
# three images share it and a change to the tools below does not reinstall it.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends chromium fonts-liberation; \
    rm -rf /var/lib/apt/lists/*
# iputils ping for ICMP checks, stripped of its file capability (it runs on ICMP
# datagram sockets, see net.ipv4.ping_group_range); tracepath, traceroute and
# tcpdump (allowed to capture only where the container keeps NET_RAW) for
# diagnostics; iproute2 for `ip route`; tini as PID 1. A non-root user, uid 10001.
RUN set -eux; \
    apt-get update; \
    apt-get install -y --no-install-recommends iputils-ping iputils-tracepath traceroute tcpdump iproute2 tini; \
    rm -rf /var/lib/apt/lists/*; \
    if [ -n "$(getcap /usr/bin/ping)" ]; then setcap -r /usr/bin/ping; fi; \
    chmod 0755 /usr/bin/ping; \
    setcap cap_net_raw+ep /usr/bin/tcpdump; \
    groupadd --gid 10001 outpost; \
    useradd --uid 10001 --gid 10001 --home-dir /var/lib/outpost --no-create-home --shell /usr/sbin/nologin outpost; \
    install -d -o 10001 -g 10001 -m 0750 /var/lib/outpost
WORKDIR /app
COPY --from=deps /src/node_modules ./node_modules
COPY package.json ./
COPY docs/examples ./examples
COPY --from=runtime-2026-04 /runtimes/2026-04 ./runtimes/2026-04
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="Outpost" \
      org.opencontainers.image.description="Private-location agent for synthetic monitoring (full: uptime checks and runtime 2026-04)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      io.outpost.image.variant="full" \
      io.outpost.runtimes="2026-04"
ENV NODE_ENV=production \
    NODE_OPTIONS="--max-semi-space-size=4" \
    STATE_DIR=/var/lib/outpost \
    TINI_SUBREAPER=1
VOLUME ["/var/lib/outpost"]
WORKDIR /var/lib/outpost
USER 10001:10001
EXPOSE 8081
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.AGENT_HEALTH_PORT||8081)+'/-/liveness',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/main.js"]
CMD ["agent"]
# The compiled agent last, to an absolute path (owned by root, as every COPY is):
# a change to the code alone rebuilds only this layer, not the runtimes copied above.
COPY --from=build /src/dist /app/dist
