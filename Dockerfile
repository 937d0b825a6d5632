# syntax=docker/dockerfile:1
# roomgate image: the gateway, and the demo backend with another command.
#
#   docker build -t roomgate:local .
#   docker run --rm -p 8080:8080 roomgate:local              # demo: 3 demo backends inside, open :8080/game/lobby/
#   docker run --rm -p 8080:8080 -v "$PWD/roomgate.yaml:/etc/roomgate/roomgate.yaml:ro" \
#     -e ROOMGATE_COOKIE_SECRETS=... -e REDIS_URL=redis://redis:6379 roomgate:local
#   docker run --rm --entrypoint node roomgate:local \
#     dist/examples/demo-backend/server.js --host 0.0.0.0 --port 8000 --id b1   # a demo backend
#
# Signals: no init process. Node is PID 1 (exec-form ENTRYPOINT, no shell in between), and roomgate
# handles SIGTERM/SIGINT itself (readiness false, listener closed, live sockets get
# shutdown.graceMs). `docker run --init` (tini) is not needed, but harmless.

# ---- build: TypeScript with the dev dependencies ------------------------------------------------
FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY examples ./examples
COPY config ./config
# /out gets exactly what the npm package ships (package.json "files": dist/src, dist/examples,
# config), so the image and the package never disagree about which files roomgate needs.
RUN npx tsc -p tsconfig.json \
 && npm pack --pack-destination /tmp \
 && mkdir /out \
 && tar -xzf /tmp/roomgate-*.tgz -C /out --strip-components=1

# ---- native: the addon (native/: the relay, the health check's connection), built with node-gyp --
# Its own stage: the compiler stays out of the runtime image. --strict: the image must run the
# native relay (proxy.relay: auto picks it up); a failed build fails the image build here.
FROM node:24-bookworm-slim AS native
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY native/relay.cc native/probe.cc native/probe.h native/binding.gyp ./native/
COPY scripts/build-native.mjs ./scripts/
COPY package.json ./
RUN node scripts/build-native.mjs --strict --force

# ---- runtime: production dependencies + dist only -----------------------------------------------
# bookworm-slim rather than alpine: glibc's resolver behaves as expected with Kubernetes search
# domains and ndots (the Redis host, backend host names). The one native module is the relay,
# compiled in the native stage (Node-API: it runs on this Node).
FROM node:24-bookworm-slim AS runtime
# NODE_OPTIONS: the V8 flags roomgate runs with (src/node-flags.ts; why in docs/performance.md),
# for the gateway and every worker it forks.
ENV NODE_ENV=production \
    NODE_OPTIONS=--max-semi-space-size=4 \
    ROOMGATE_CONFIG=/etc/roomgate/roomgate.yaml
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund \
 && npm cache clean --force
COPY --from=build /out/ ./
COPY --from=native /src/native/build/Release/roomgate_relay.node ./native/build/Release/roomgate_relay.node
# The default config file: every key at its default (no backends: `start` runs demo backends).
# Mount your own over it (-v ./roomgate.yaml:/etc/roomgate/roomgate.yaml:ro, a ConfigMap in
# Kubernetes); environment variables (ROOMGATE_*, REDIS_URL) override the file.
COPY --from=build /out/config/roomgate.example.yaml /etc/roomgate/roomgate.yaml

# The node image's unprivileged user (uid 1000); the app files stay root-owned and read-only to it.
USER node
EXPOSE 8080
# /healthz is answered by roomgate itself. A config file that moves listen.port must set
# ROOMGATE_PORT too (or override the healthcheck). With TLS on the port (tls.certs or
# ROOMGATE_TLS_CERTS) plain HTTP is refused, so the check asks over https then, trusting the
# container's own certificate without verifying it (it checks liveness, not identity).
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["node", "-e", "const p=process.env.ROOMGATE_PORT||8080,ok=r=>process.exit(r.statusCode===200?0:1),get=(m,next)=>require(m).get({host:'127.0.0.1',port:p,path:'/healthz',rejectUnauthorized:false,timeout:2000},ok).on('timeout',function(){this.destroy(new Error('timeout'))}).on('error',next);get('http',()=>get('https',()=>process.exit(1)))"]
ENTRYPOINT ["node", "dist/src/main.js"]
CMD ["start"]
