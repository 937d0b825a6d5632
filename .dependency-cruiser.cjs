// The layer rule (docs/architecture.md), checked by test/architecture/layers.test.ts in npm test:
//   composition (main, gateway, compose, cluster) -> edge (server, proxy, cache, static | api, pages, control)
//   -> runtime -> core and stores (placement, shared-data, backends, room, redis)
//   -> kit and ground (http, config, observability)
// Nothing imports upward; the data plane (server, proxy, cache, static) and the control plane (api,
// pages, control) never import each other; demo code is reached only from the CLI (main.ts and
// src/cli), and src/cli only from main.ts.
const LOWER = '^src/(placement|shared-data|backends|room|redis|http|config|observability|lifecycle)/';
const EDGE = '^src/(server|proxy|cache|static|api|pages|control)/';
const DATA_PLANE = '^src/(server|proxy|cache|static)/';
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
