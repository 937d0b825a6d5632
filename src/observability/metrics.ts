// Prometheus metrics. Each gateway owns its own registry (no module-level state), so tests can
// run two gateways in one process.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerProcessMetrics } from './process-metrics.js';

export interface Metrics {
  readonly registry: Registry;
  /** Stops what feeds the process gauges (the event-loop window): the gateway stopped. */
  stop(): void;
  readonly upgrades: Counter<'backend' | 'result'>;
  readonly liveSockets: Gauge<'backend'>;
  readonly httpRequests: Counter<'backend' | 'status'>;
  readonly badRoomKeys: Counter<'source' | 'reason'>;
  readonly proxyErrors: Counter<'backend' | 'kind'>;
  readonly backendStateChanges: Counter<'backend' | 'state' | 'via'>;
  readonly clientErrors: Counter<'code'>;
  readonly leanHandOvers: Counter<'reason'>;
  readonly h2Sessions: Counter;
  readonly h2WebSockets: Counter;
  readonly placements: Counter<'kind'>;
  readonly staticResponses: Counter<'status'>;
  readonly degraded: Gauge;
  readonly pushes: Counter<'result'>;
  readonly refusals: Counter<'code'>;
  readonly idleRoomsEvicted: Counter<'where'>;
  readonly connectionsRefused: Counter<'listener' | 'reason'>;
  readonly authThrottled: Counter<'surface'>;
  readonly pushSeconds: Histogram<'result'>;
  readonly admissionRefusals: Counter<'backend'>;
  /** Tunnels opened on each relay (proxy.relay: native or javascript). */
  readonly relayTunnels: Counter<'relay'>;
  /** 1 for the relay this gateway runs (set once the data plane is built). */
  readonly relayInfo: Gauge<'relay' | 'configured'>;
  readonly handoffs: Counter<'result'>;
  readonly handoffSeconds: Histogram<'result'>;
  readonly handoffHeld: Counter<'result'>;
  readonly handoffSockets: Counter<'result'>;
  readonly handoffHeldMessages: Counter<'result'>;
  readonly handoffHeldBytes: Gauge;
  readonly rebalanceMoves: Counter<'result'>;
  readonly backendCalls: Counter<'backend' | 'call' | 'result'>;
}

/** A version-2 handoff's held client messages: how many went where, and the bytes held now. */
function heldMetrics(registry: Registry): Pick<Metrics, 'handoffHeldMessages' | 'handoffHeldBytes'> {
  return {
    handoffHeldMessages: new Counter({
      name: 'roomgate_handoff_held_messages_total',
      help: 'Client messages a version-2 handoff held, by where they went: delivered (to the new owner, by the messages hook), resumed (written to the resumed socket\'s new upstream), lost (the new owner did not take them)',
      labelNames: ['result'],
      registers: [registry],
    }),
    handoffHeldBytes: new Gauge({
      name: 'roomgate_handoff_held_bytes',
      help: 'Bytes of client messages held now by the running version-2 handoffs of this gateway (frames as sent, headers included), until each hold ends',
      registers: [registry],
    }),
  };
}

/** One backend as the state gauges report it (read when Prometheus scrapes, never per request). */
export interface BackendGaugeReading {
  readonly id: string;
  readonly state: 'up' | 'down' | 'draining' | 'maintenance';
  /** Rooms placed on it (all gateways). */
  readonly rooms: number;
  /** Drain deadline, ms since epoch, while draining with one; else null. */
  readonly drainDeadline: number | null;
}

export const BACKEND_STATES = ['up', 'down', 'draining', 'maintenance'] as const;

export function createMetrics(
  liveSocketsByBackend: () => Iterable<[string, number]>,
  backendStates: () => Iterable<BackendGaugeReading> = () => [],
): Metrics {
  const registry = new Registry();
  // nodejs_eventloop_lag_* (event-loop delay), heap and GC figures.
  const processMetrics = registerProcessMetrics(registry);
  // In this order: the exposition lists metrics as they were registered.
  const metrics: Metrics = { registry, stop: () => processMetrics.stop(), ...trafficMetrics(registry, liveSocketsByBackend), ...serviceMetrics(registry), ...relayMetrics(registry), ...heldMetrics(registry) };
  backendGauges(registry, backendStates);
  return metrics;
}

type TrafficMetrics = Pick<
  Metrics,
  'upgrades' | 'liveSockets' | 'httpRequests' | 'refusals' | 'badRoomKeys' | 'proxyErrors' | 'backendStateChanges' | 'clientErrors' | 'leanHandOvers' | 'h2Sessions' | 'h2WebSockets'
>;

/** What became of client requests and sockets: upgrades, proxied requests, refusals, backend errors, the fronts. */
function trafficMetrics(registry: Registry, liveSocketsByBackend: () => Iterable<[string, number]>): TrafficMetrics {
  return {
    upgrades: new Counter({
      name: 'roomgate_upgrades_total',
      help: 'WebSocket upgrade attempts by backend and result (101, backend status, or error kind)',
      labelNames: ['backend', 'result'],
      registers: [registry],
    }),
    liveSockets: new Gauge({
      name: 'roomgate_live_sockets',
      help: 'Upgraded sockets currently piped, by backend',
      labelNames: ['backend'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [backend, n] of liveSocketsByBackend()) this.set({ backend }, n);
      },
    }),
    httpRequests: new Counter({
      name: 'roomgate_http_requests_total',
      help: 'Proxied HTTP requests by backend and response status (including roomgate-made 502/503/504)',
      labelNames: ['backend', 'status'],
      registers: [registry],
    }),
    refusals: new Counter({
      name: 'roomgate_refusals_total',
      help: "Answers roomgate made itself in place of a backend's (src/http/refusals.ts), by code: no-backend, backend-unavailable, method-not-allowed, ...",
      labelNames: ['code'],
      registers: [registry],
    }),
    badRoomKeys: new Counter({
      name: 'roomgate_bad_room_keys_total',
      help: 'Room keys present but refused (invalid, malformed, forged, expired), by source and reason',
      labelNames: ['source', 'reason'],
      registers: [registry],
    }),
    proxyErrors: new Counter({
      name: 'roomgate_proxy_errors_total',
      help: 'Errors talking to backends, by backend and kind (refused, timeout, reset, ...)',
      labelNames: ['backend', 'kind'],
      registers: [registry],
    }),
    backendStateChanges: new Counter({
      name: 'roomgate_backend_state_changes_total',
      help: 'Backend health changes by backend, new state (up, down) and what saw it (active checks, passive: a refused connection)',
      labelNames: ['backend', 'state', 'via'],
      registers: [registry],
    }),
    clientErrors: new Counter({
      name: 'roomgate_client_errors_total',
      help: 'Client requests refused before routing (malformed, oversized headers, timeouts), by status code',
      labelNames: ['code'],
      registers: [registry],
    }),
    leanHandOvers: new Counter({
      name: 'roomgate_page_handovers_total',
      help: 'Client connections the byte-level page path handed to node:http, by the first request it does not take (method, body, upgrade, target, own-path, ...)',
      labelNames: ['reason'],
      registers: [registry],
    }),
    h2Sessions: new Counter({
      name: 'roomgate_h2_connections_total',
      help: 'Client connections that negotiated HTTP/2 on the TLS port (the others speak HTTP/1.1)',
      registers: [registry],
    }),
    h2WebSockets: new Counter({
      name: 'roomgate_h2_websockets_total',
      help: 'WebSockets opened as HTTP/2 streams (RFC 8441 extended CONNECT); the others are HTTP/1.1 upgrades',
      registers: [registry],
    }),
  };
}

/** Which relay carries open tunnels (proxy.relay), and how many each took. */
function relayMetrics(registry: Registry): Pick<Metrics, 'relayTunnels' | 'relayInfo'> {
  return {
    relayTunnels: new Counter({
      name: 'roomgate_relay_tunnels_total',
      help: "WebSocket tunnels opened, by the relay that carries their bytes: native (proxy.relay's addon: plain tunnels no handoff can hold) or javascript",
      labelNames: ['relay'],
      registers: [registry],
    }),
    relayInfo: new Gauge({
      name: 'roomgate_relay_info',
      help: 'The relay this gateway runs (1), and proxy.relay as configured: with auto, javascript means the native relay is not built (the start log says why)',
      labelNames: ['relay', 'configured'],
      registers: [registry],
    }),
  };
}

type ServiceMetrics = Pick<
  Metrics,
  'placements' | 'staticResponses' | 'pushes' | 'pushSeconds' | 'handoffs' | 'handoffSeconds' | 'handoffHeld' | 'handoffSockets' | 'rebalanceMoves' | 'backendCalls' | 'admissionRefusals' | 'idleRoomsEvicted' | 'connectionsRefused' | 'authThrottled' | 'degraded'
>;

/** What roomgate does besides relaying: placements, static files, pushes, the limits it enforces, the placement store's health. */
function serviceMetrics(registry: Registry): ServiceMetrics {
  return {
    placements: new Counter({
      name: 'roomgate_placements_total',
      help: 'Placements written: new rooms, moves of idle rooms, forced moves of live rooms (maintenance, removal, drain deadline)',
      labelNames: ['kind'],
      registers: [registry],
    }),
    staticResponses: new Counter({
      name: 'roomgate_static_responses_total',
      help: 'Responses from static mounts (files served by roomgate itself), by status',
      labelNames: ['status'],
      registers: [registry],
    }),
    pushes: new Counter({
      name: 'roomgate_pushes_total',
      help: 'Cross-room pushes by result: delivered, not-live (no placement), unavailable (its backend cannot take it now), refused (the backend answered non-2xx), timeout',
      labelNames: ['result'],
      registers: [registry],
    }),
    pushSeconds: new Histogram({
      name: 'roomgate_push_seconds',
      help: 'Time to deliver a push (placement lookup and the backend POST), by result',
      labelNames: ['result'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    handoffs: new Counter({
      name: 'roomgate_handoffs_total',
      help: 'Room handoffs by result: moved (with its state), moved-empty (the old owner held none), rolled-back (failed before the move, the room stayed), owner-lost (the old owner died mid-export: placed empty), refused (not started)',
      labelNames: ['result'],
      registers: [registry],
    }),
    handoffSeconds: new Histogram({
      name: 'roomgate_handoff_seconds',
      help: 'Time a room handoff took (hello, export, import, move, release), by result',
      labelNames: ['result'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    }),
    handoffHeld: new Counter({
      name: 'roomgate_handoff_held_total',
      help: "Sockets whose client messages a version-2 handoff held, by how the hold ended: delivered (to the new owner, by the messages hook), resumed (written to the socket's new upstream on the new owner), flushed (a rollback wrote them on to the old owner), over-limit (closed past handoff.heldBytesPerSocket or heldBytesPerRoom, its messages still delivered), hold-timeout (no message boundary in time: cut), lost (the new owner did not take them)",
      labelNames: ['result'],
      registers: [registry],
    }),
    handoffSockets: new Counter({
      name: 'roomgate_handoff_sockets_total',
      help: 'Client sockets a version-2 handoff held, by what became of them: resumed (kept open, spliced to the new owner), resume-failed (the resume was tried and failed: the client reconnects), reconnected (no resume: the client reconnects)',
      labelNames: ['result'],
      registers: [registry],
    }),
    rebalanceMoves: new Counter({
      name: 'roomgate_rebalance_moves_total',
      help: 'Room handoffs started by rebalancing (handoff.rebalance), by result as in roomgate_handoffs_total',
      labelNames: ['result'],
      registers: [registry],
    }),
    backendCalls: new Counter({
      name: 'roomgate_backend_calls_total',
      help: "Signed calls roomgate made to a backend's own endpoints (pushes and the handoff hooks), by backend, call (push, push-fanout, handoff-hello, -export, -import, -release, -resume) and result (the answer's status class 2xx/4xx/5xx, timeout, unreachable, too-large): a call a backend did not expect shows here and in /events",
      labelNames: ['backend', 'call', 'result'],
      registers: [registry],
    }),
    admissionRefusals: new Counter({
      name: 'roomgate_admission_refusals_total',
      help: 'WebSocket upgrades refused (503 + Retry-After) because the backend was at its admission limits (admission.maxInflightUpgrades, admission.upgradesPerSecond)',
      labelNames: ['backend'],
      registers: [registry],
    }),
    idleRoomsEvicted: new Counter({
      name: 'roomgate_idle_rooms_evicted_total',
      help: 'Placements of rooms without a live socket dropped by placement.maxIdleRooms before their idleTtlMs: cache (this process), store (memory or Redis)',
      labelNames: ['where'],
      registers: [registry],
    }),
    connectionsRefused: new Counter({
      name: 'roomgate_connections_refused_total',
      help: 'Connections closed at once on accept by a connection limit (listen.maxConnections, listen.maxConnectionsPerAddress), by listener and reason',
      labelNames: ['listener', 'reason'],
      registers: [registry],
    }),
    authThrottled: new Counter({
      name: 'roomgate_auth_throttled_total',
      help: 'Requests answered 429 because their client address failed too many token checks (admin, api, push)',
      labelNames: ['surface'],
      registers: [registry],
    }),
    degraded: new Gauge({
      name: 'roomgate_placement_degraded',
      help: '1 while the placement store (Redis) is unreachable and routing runs from the cache and the ring',
      registers: [registry],
      // --workers: 1 when any worker is degraded (the primary sums the rest).
      aggregator: 'max',
    }),
  };
}

/**
 * The backends' state, rooms and drain deadline, read from the pool when Prometheus scrapes. With
 * --workers the primary takes the max over the workers: the states and rooms come from the shared
 * store (one figure for all), and a backend down in any worker's view is reported down.
 */
function backendGauges(registry: Registry, read: () => Iterable<BackendGaugeReading>): void {
  new Gauge({
    name: 'roomgate_backend_state',
    help: 'The state of each backend as this gateway sees it: 1 for its current state (up, down, draining, maintenance), 0 for the others',
    labelNames: ['backend', 'state'],
    registers: [registry],
    aggregator: 'max',
    collect() {
      this.reset();
      for (const b of read()) for (const s of BACKEND_STATES) this.set({ backend: b.id, state: s }, b.state === s ? 1 : 0);
    },
  });
  new Gauge({
    name: 'roomgate_backend_rooms',
    help: 'Rooms placed on each backend (all gateways sharing the placement store)',
    labelNames: ['backend'],
    registers: [registry],
    aggregator: 'max',
    collect() {
      this.reset();
      for (const b of read()) this.set({ backend: b.id }, b.rooms);
    },
  });
  new Gauge({
    name: 'roomgate_backend_drain_deadline_seconds',
    help: 'Drain deadline of each backend draining with one (Unix time, seconds); absent for the others',
    labelNames: ['backend'],
    registers: [registry],
    aggregator: 'max',
    collect() {
      this.reset();
      for (const b of read()) if (b.drainDeadline !== null) this.set({ backend: b.id }, b.drainDeadline / 1000);
    },
  });
}
