// The layer rule (docs/architecture.md), checked by test/architecture/layers.test.ts in npm test:
//   composition (main, gateway, compose, cluster) -> fronts (server) -> the request pipeline (pipeline)
//   -> edge (proxy, cache, static | api, pages, control) -> the forwarding core (forward) -> runtime
//   -> core and stores (placement, shared-data, backends, room, redis)
//   -> kit and ground (http, config, observability)
// Nothing imports upward; the data plane (server, proxy, cache, static) and the control plane (api,
// pages, control) never import each other; demo code is reached only from the CLI (main.ts and
// src/cli), and src/cli only from main.ts. The backend kit (src/backend-kit, roomgate/backend)
// stands apart: it runs in an app, imports only the proof format, and the gateway never imports it.
const LOWER = '^src/(placement|shared-data|backends|room|redis|http|config|observability|lifecycle)/';
const EDGE = '^src/(server|pipeline|proxy|cache|static|forward|api|pages|control)/';
const DATA_PLANE = '^src/(server|pipeline|proxy|cache|static|forward)/';
const CONTROL_PLANE = '^src/(api|pages|control)/';
const COMPOSITION = '^src/(main|gateway)\\.ts$|^src/(compose|cluster)/';

module.exports = {
  forbidden: [
    { name: 'no-cycles', severity: 'error', from: { path: '^src/' }, to: { circular: true } },
    {
      name: 'core-not-upward',
      comment: 'core, stores, kit and ground never import the runtime, the edge or composition',
      severity: 'error',
      from: { path: LOWER },
      to: { path: ['^src/runtime/', EDGE, COMPOSITION, '^src/demo/'] },
    },
    {
      name: 'ground-not-upward',
      comment: 'http, config and observability are the ground floor: they import no other layer of roomgate',
      severity: 'error',
      from: { path: '^src/(http|config|observability|lifecycle)/' },
      to: { path: '^src/(placement|shared-data|backends|room|redis)/' },
    },
    {
      name: 'runtime-not-upward',
      severity: 'error',
      from: { path: '^src/runtime/' },
      to: { path: [EDGE, COMPOSITION, '^src/demo/'] },
    },
    {
      name: 'data-plane-not-control-plane',
      severity: 'error',
      from: { path: DATA_PLANE },
      to: { path: CONTROL_PLANE },
    },
    {
      name: 'control-plane-not-data-plane',
      severity: 'error',
      from: { path: CONTROL_PLANE },
      to: { path: DATA_PLANE },
    },
    {
      name: 'edge-not-composition',
      severity: 'error',
      from: { path: EDGE },
      to: { path: [COMPOSITION, '^src/demo/'] },
    },
    {
      name: 'demo-only-from-the-cli',
      comment: 'demo backends and the demo cluster are started by the CLI, never by production modules',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(main\\.ts|demo/|cli/)' },
      to: { path: '^src/demo/' },
    },
    {
      name: 'nothing-imports-a-front',
      comment:
        'the fronts (each turns one wire form into requests: byte-level HTTP/1.1, node:http, h2, h2 WebSockets, the redirect port) are wired by the composition only; rules and forwarding never reach into one',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(gateway\\.ts|compose/|cluster/|server/)' },
      to: { path: '^src/server/(public-server|lean-connection|h2-front|h2-websocket|redirect-server)\\.ts$' },
    },
    {
      name: 'fronts-reach-the-app-through-the-pipeline',
      comment:
        'a front turns its wire form into checked requests and hands each to the request pipeline (src/pipeline), which alone decides where it goes: no front reaches a path, the forwarding core, the cache, the static files or the control plane itself',
      severity: 'error',
      from: { path: '^src/server/(public-server|lean-connection|h2-front|h2-websocket)\\.ts$' },
      to: { path: '^src/(proxy|forward|cache|static|control|api|pages)/' },
    },
    {
      name: 'paths-below-the-pipeline',
      comment: 'the paths (proxy, cache, static) and the forwarding core are what the pipeline calls; they never import it',
      severity: 'error',
      from: { path: '^src/(proxy|cache|static|forward)/' },
      to: { path: '^src/pipeline/' },
    },
    {
      name: 'forward-below-the-paths',
      comment:
        'the forwarding core (one attempt: placement, passive health, retries, accounting) is used by the paths that carry requests (proxy, cache) and knows none of them: it imports the runtime and below only',
      severity: 'error',
      from: { path: '^src/forward/' },
      to: { path: '^src/(server|proxy|cache|static|pipeline)/' },
    },
    {
      name: 'cache-uses-the-forwarding-core-only',
      comment: 'the page cache reaches backends through the forwarding core (src/forward), never through a page path or a front',
      severity: 'error',
      from: { path: '^src/cache/' },
      to: { path: '^src/(proxy|server|pipeline)/' },
    },
    {
      name: 'backend-kit-stands-alone',
      comment:
        'the backend kit (src/backend-kit, the npm package\'s roomgate/backend) runs inside an app, not in the gateway: it imports nothing of roomgate but the proof format (src/http/call-proof.ts, shared with the signer), and nothing of the gateway imports it',
      severity: 'error',
      from: { path: '^src/backend-kit/' },
      to: { path: '^src/', pathNot: ['^src/backend-kit/', '^src/http/call-proof\\.ts$'] },
    },
    {
      name: 'nothing-of-the-gateway-imports-the-backend-kit',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/backend-kit/' },
      to: { path: '^src/backend-kit/' },
    },
    {
      name: 'cli-only-from-main',
      comment: 'the commands (src/cli) are the entry point main.ts runs; nothing else imports them',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/(main\\.ts|cli/)' },
      to: { path: '^src/cli/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '^(dist|node_modules|test|bench|examples)/' },
  },
};
