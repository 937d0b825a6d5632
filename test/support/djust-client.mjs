// A djust-faithful browser client, as /work/shared/djust-facts.md describes djust's own (v1.1, and
// the releases with #3186's configurable socket path), for tests that must see what a real djust
// page sees behind roomgate: the clicks it loses, the pages it reloads, the closes it sees.
//
// One implementation for Node and for a browser page: plain ESM with everything it touches
// injected (WebSocket, fetch, timers, location, the random source), so a Node test passes the `ws`
// package's WebSocket and Node's fetch, and a page served by a test passes its own globals.
//
// What it does, as djust does it:
// - the socket path: `/ws/live/` fixed (release 'v1.1', every release before #3186), or (release
//   '3186') the `wsPath` option / <meta name="djust-ws-path">, same host only (absolute and
//   protocol-relative values ignored), with one fallback to `/ws/live/` when the prefixed path fails
//   before a socket ever opened on it;
// - the server speaks first (`connect` with session_id); the client then sends `mount`;
// - after ANY close it reconnects, attempt n after max(500, rand * min(1000 * 2^(n-1), 30000)) ms,
//   10 attempts, the counter reset on every open; then it gives up (djust: SSE or its error
//   overlay; here: every later event goes over HTTP). Release '3186' stops at 4401/4403;
// - `error` frames are recorded; `retry` is ignored and nothing is re-sent; pending events are
//   cleared on every close (an event whose answer never came is gone for the page);
// - while no socket is open, or one is open but its view not mounted yet (djust's sendEvent: "View
//   not mounted. Event ignored", and handleEvent falls back to HTTP), an event is a POST to the
//   page URL with `X-Djust-Event`; every answer
//   with a `version` must follow the last one (previous + 1), else: with a socket open the client
//   asks `request_html`, without one it reloads the page (here: counted, and re-mounted as a reload
//   would, from a fresh page);
// - the mount answer's html is applied on a pre-rendered page only when `has_ids` is true;
// - a heartbeat `ping` every 30 s (heartbeatMs).
// The frame vocabulary is djust's by default (`djustFrames`); `demoFrames` speaks the demo
// backend's (examples/demo-backend: `mounted`, events as `{type: "event", data}`, each page view's
// `version` as djust's, the page known by its session cookie, which the browser, not this client,
// sends with the socket and the POST), and tells its page when roomgate resumed the socket on
// another backend (`resumed`: djust's own client gets nothing then, and its session goes on;
// recorded in `resumes`).

/** djust's client: reconnect attempts in a row before it gives up. */
export const DJUST_MAX_ATTEMPTS = 10;
/** djust's fixed socket path (and #3186's default). */
export const DJUST_WS_PATH = '/ws/live/';
/** Close codes after which release '3186' does not reconnect (djust:auth-refused). */
export const DJUST_TERMINAL_CODES = [4401, 4403];

/** djust's wait before reconnect attempt n (1-based): full jitter, at least 500 ms. */
export function djustReconnectDelay(n, random = Math.random) {
  return Math.max(500, random() * Math.min(1000 * 2 ** (n - 1), 30_000));
}

/** #3186's socket path: the option, else the meta tag, else /ws/live/; only same-host paths count. */
export function djustWsPath(option, doc) {
  const meta = doc?.querySelector?.('meta[name="djust-ws-path"]')?.getAttribute('content') ?? null;
  for (const candidate of [option, meta]) {
    if (typeof candidate === 'string' && candidate.startsWith('/') && !candidate.startsWith('//')) return candidate;
  }
  return DJUST_WS_PATH;
}

/** djust's own frames. */
export const djustFrames = {
  mount: (c) => ({ type: 'mount', view: c.view, params: c.params, url: c.location.pathname, has_prerendered: c.prerendered }),
  isMount: (m) => m.type === 'mount',
  event: (c, ev) => ({ type: 'event', event: ev.name, params: ev.params, ref: ev.ref }),
  /** The refs an answer acknowledges (djust echoes the event's ref on its answer). */
  acks: (_c, m) => (typeof m.ref === 'number' ? [m.ref] : []),
  /** What tells one application of an event from another (djust: none; every answer counts). */
  appliedAs: () => undefined,
  version: (m) => (typeof m.version === 'number' ? m.version : undefined),
  httpBody: (_c, ev) => ev.params,
};

/**
 * The demo backend's frames: the room in the mount, each event's data carrying the client's id and
 * the event's ref ({c, k}), the page view's `version` as djust's (the mount's starts it again; the
 * room's move number, `move` in a patch and `moves` in a mount, says which application a patch is),
 * and a patch acknowledging the event whose data it carries (whoever's socket it reached through).
 */
export const demoFrames = {
  mount: (c) => ({ type: 'mount', room: c.params.room, url: c.location.pathname }),
  isMount: (m) => m.type === 'mounted',
  event: (c, ev) => ({ type: 'event', data: { c: c.id, k: ev.ref, ...ev.params } }),
  acks: (c, m) => (m.type === 'patch' && m.data && m.data.c === c.id && typeof m.data.k === 'number' ? [m.data.k] : []),
  /** The move number: the same event seen under two numbers was applied twice. */
  appliedAs: (m) => (typeof m.move === 'number' ? m.move : undefined),
  version: (m) => (typeof m.version === 'number' ? m.version : undefined),
  httpBody: (c, ev) => ({ c: c.id, k: ev.ref, ...ev.params }),
  /** The demo's word to its page that its socket now reaches another backend (a resume): that backend. */
  resumedOn: (m) => (m.type === 'resumed' && typeof m.backend === 'string' ? m.backend : undefined),
};

const OPEN = 1;

export class DjustClient {
  /**
   * @param {import('./djust-client.d.mts').DjustClientOptions} o
   */
  constructor(o) {
    this.o = o;
    this.id = o.id ?? `c${Math.floor((o.random ?? Math.random)() * 1e9).toString(36)}`;
    this.frames = o.frames ?? djustFrames;
    this.release = o.release ?? 'v1.1';
    this.timers = o.timers ?? globalThis;
    this.random = o.random ?? Math.random;
    this.now = o.now ?? (() => Date.now());
    this.location = o.location;
    this.view = o.view ?? '';
    this.params = o.params ?? {};
    this.prerendered = o.prerendered ?? true;
    this.heartbeatMs = o.heartbeatMs ?? 30_000;
    // What a test reads.
    this.events = [];
    this.closes = [];
    this.mounts = [];
    this.reloads = [];
    this.resumes = [];
    this.errors = [];
    this.resyncs = 0;
    this.mountsRefused = 0;
    this.gaveUp = false;
    this.stopped = false;
    // djust's state.
    this.ws = null;
    this.sessionId = null;
    this.attempts = 0;
    this.version = null;
    this.viewMounted = false;
    this.mountSent = false;
    this.pending = new Map();
    this.everOpened = false;
    this.fellBack = false;
    this.timer = null;
    this.heartbeat = null;
    this.nextRef = 1;
    this.onChange = null;
  }

  /** The page load: the first connection. */
  start() {
    this.connect();
    return this;
  }

  /** Whether a socket is open and its view mounted. */
  get mounted() {
    return this.viewMounted && this.ws !== null && this.ws.readyState === OPEN;
  }

  /** The socket path this attempt uses. */
  path() {
    if (this.release === 'v1.1' || this.fellBack) return DJUST_WS_PATH;
    return djustWsPath(this.o.wsPath, this.o.document);
  }

  connect() {
    if (this.stopped) return;
    const scheme = this.location.protocol === 'https:' ? 'wss:' : 'ws:';
    const path = this.path();
    const ws = new this.o.WebSocket(`${scheme}//${this.location.host}${path}`);
    this.ws = ws;
    this.mountSent = false;
    ws.onopen = () => {
      if (this.ws !== ws) return;
      // djust's onopen: the attempt counter starts again.
      this.attempts = 0;
      this.everOpened = true;
      this.startHeartbeat();
    };
    ws.onmessage = (e) => this.onMessage(ws, e.data);
    ws.onerror = () => {
      /* onclose follows */
    };
    ws.onclose = (e) => this.onClose(ws, path, e.code, e.reason);
  }

  onMessage(ws, data) {
    if (this.ws !== ws) return;
    let m;
    try {
      m = JSON.parse(typeof data === 'string' ? data : String(data));
    } catch {
      return;
    }
    if (m === null || typeof m !== 'object') return;
    if (m.type === 'connect') {
      this.sessionId = m.session_id ?? null;
      this.mountSent = true;
      ws.send(JSON.stringify(this.frames.mount(this)));
      return;
    }
    if (this.frames.isMount(m)) return this.onMount(m);
    const resumedOn = this.frames.resumedOn?.(m);
    if (resumedOn !== undefined) {
      // No greeting, no mount: the view and its versions go on (djust continues the same session).
      this.resumes.push({ at: this.now(), backend: resumedOn });
      return this.changed();
    }
    if (m.type === 'error') {
      // djust logs it and dispatches djust:error; `retry` is ignored, nothing is sent again.
      this.errors.push({ at: this.now(), error: m.error ?? m.message ?? null, retry: m.retry === true });
      if (!this.viewMounted && this.mountSent) this.mountsRefused++;
      return;
    }
    if (m.type === 'pong') return;
    this.onAnswer(m, 'ws');
  }

  onMount(m) {
    this.viewMounted = true;
    const v = this.frames.version(m);
    // The mount starts the version sequence again.
    this.version = v ?? null;
    // On a pre-rendered page the mount's html is applied only with has_ids; else the old DOM stays.
    const applied = !this.prerendered || m.has_ids === true;
    this.mounts.push({ at: this.now(), version: this.version, applied, sessionId: this.sessionId, frame: m });
    this.changed();
  }

  /** An answer (socket frame or HTTP body): its acknowledgements and its version. */
  onAnswer(m, via) {
    for (const ref of this.frames.acks(this, m)) this.ack(ref, via, this.frames.appliedAs(m));
    const v = this.frames.version(m);
    if (v === undefined) return this.changed();
    if (this.version === null) this.version = v;
    else if (v !== this.version + 1) this.mismatch(v, via);
    else this.version = v;
    this.changed();
  }

  ack(ref, via, applied) {
    const ev = this.events[ref - 1];
    if (ev === undefined) return;
    this.pending.delete(ref);
    if (applied === undefined || !ev.applied.includes(applied)) ev.answers++;
    if (applied !== undefined && !ev.applied.includes(applied)) ev.applied.push(applied);
    if (ev.ackedAt === null) {
      ev.ackedAt = this.now();
      ev.ackedVia = via;
    }
  }

  /** djust: a version that does not follow: request_html with a socket open, else a page reload. */
  mismatch(got, via) {
    const expected = this.version + 1;
    if (this.ws !== null && this.ws.readyState === OPEN) {
      this.resyncs++;
      this.ws.send(JSON.stringify({ type: 'request_html' }));
      this.version = got;
      return;
    }
    this.reloads.push({ at: this.now(), expected, got, via });
    this.reload();
  }

  /** A page reload, emulated: a fresh page (no version, no pending, attempts 0) that connects again. */
  reload() {
    this.clearTimers();
    const ws = this.ws;
    this.ws = null;
    if (ws !== null) ws.close();
    this.version = null;
    this.viewMounted = false;
    this.pending.clear();
    this.attempts = 0;
    this.gaveUp = false;
    this.connect();
  }

  onClose(ws, path, code, reason) {
    if (this.ws !== ws) return;
    this.ws = null;
    const wasMounted = this.viewMounted;
    this.closes.push({ at: this.now(), code, reason: String(reason ?? ''), mounted: wasMounted, path });
    if (!wasMounted && this.mountSent && code >= 4000) this.mountsRefused++;
    this.viewMounted = false;
    this.mountSent = false;
    // djust clears its pending events on every close: their answers will never be waited for.
    this.pending.clear();
    this.stopHeartbeat();
    this.changed();
    if (this.stopped) return;
    if (this.release === '3186' && DJUST_TERMINAL_CODES.includes(code)) {
      this.gaveUp = true;
      return;
    }
    // #3186: a prefixed path that failed before any socket opened on it: /ws/live/ once.
    if (this.release === '3186' && !this.everOpened && !this.fellBack && path !== DJUST_WS_PATH) this.fellBack = true;
    if (this.attempts >= DJUST_MAX_ATTEMPTS) {
      this.gaveUp = true;
      return;
    }
    this.attempts++;
    const delay = djustReconnectDelay(this.attempts, this.random);
    this.timer = this.timers.setTimeout(() => {
      this.timer = null;
      this.connect();
    }, delay);
  }

  /**
   * A user's event (a click): over the socket when one is open and its view mounted, else a POST
   * to the page URL (djust's sendEvent refuses an open socket whose view is not mounted yet, and its
   * handleEvent then takes the HTTP fallback). Returns its record; the HTTP path's answer fills it
   * in later.
   */
  sendEvent(name, params = {}) {
    const ev = { ref: this.nextRef++, name, params, sentAt: this.now(), via: 'ws', ackedAt: null, ackedVia: null, answers: 0, applied: [], httpStatus: null, failed: null };
    this.events.push(ev);
    if (this.ws !== null && this.ws.readyState === OPEN && this.viewMounted) {
      this.pending.set(ev.ref, ev);
      this.ws.send(JSON.stringify(this.frames.event(this, ev)));
      return ev;
    }
    ev.via = 'http';
    ev.done = this.postEvent(ev);
    return ev;
  }

  async postEvent(ev) {
    try {
      const res = await this.o.fetch(this.location.href, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-CSRFToken': this.o.csrfToken ?? '', 'X-Djust-Event': ev.name },
        body: JSON.stringify(this.frames.httpBody(this, ev)),
      });
      ev.httpStatus = res.status;
      if (!res.ok) {
        // djust: "HTTP fallback failed", logged; the event is gone.
        ev.failed = `HTTP ${res.status}`;
        await res.text().catch(() => '');
        return;
      }
      const data = await res.json();
      if (this.stopped) return;
      // The answer acknowledges the event it answers (once, whatever else it carries).
      if (!this.frames.acks(this, data).includes(ev.ref)) this.ack(ev.ref, 'http', this.frames.appliedAs(data));
      this.onAnswer(data, 'http');
    } catch (err) {
      ev.failed = String(err?.message ?? err);
    }
  }

  startHeartbeat() {
    this.stopHeartbeat();
    if (this.heartbeatMs <= 0) return;
    this.heartbeat = this.timers.setInterval(() => {
      if (this.ws !== null && this.ws.readyState === OPEN) this.ws.send(JSON.stringify({ type: 'ping' }));
    }, this.heartbeatMs);
  }

  stopHeartbeat() {
    if (this.heartbeat !== null) this.timers.clearInterval(this.heartbeat);
    this.heartbeat = null;
  }

  clearTimers() {
    if (this.timer !== null) this.timers.clearTimeout(this.timer);
    this.timer = null;
    this.stopHeartbeat();
  }

  changed() {
    if (this.onChange !== null) this.onChange(this);
  }

  /** Events the page never got an answer for (sent over a socket closed before it, or a failed POST). */
  unacknowledged() {
    return this.events.filter((e) => e.ackedAt === null);
  }

  /** Events answered more than once (applied twice, as far as the page can tell). */
  doubled() {
    return this.events.filter((e) => e.answers > 1);
  }

  stop() {
    this.stopped = true;
    this.clearTimers();
    const ws = this.ws;
    this.ws = null;
    if (ws !== null) {
      if (typeof ws.terminate === 'function') ws.terminate();
      else ws.close();
    }
  }
}
