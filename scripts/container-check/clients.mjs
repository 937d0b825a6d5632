// What a browser does, from the host: page GETs over http/https/h2 and /ws/live/ sockets over
// ws/wss (the `ws` package). The TLS topology's certificate is self-signed, so TLS clients here do
// not verify it (they check that TLS and h2 answer, not the certificate's issuer).
import http from 'node:http';
import https from 'node:https';
import http2 from 'node:http2';
import WebSocket from 'ws';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** GET; {status, body, cert} or {error}. Never rejects. */
export function get(url, { timeoutMs = 5_000 } = {}) {
  return new Promise((resolve) => {
    const mod = url.startsWith('https:') ? https : http;
    const req = mod.get(url, { rejectUnauthorized: false, timeout: timeoutMs, agent: false }, (res) => {
      const cert = res.socket.getPeerCertificate?.();
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode, body, cert }));
      res.on('error', (err) => resolve({ error: String(err) }));
    });
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', (err) => resolve({ error: String(err.message ?? err) }));
  });
}

export async function getJson(url) {
  const r = await get(url);
  if (r.error || r.status !== 200) return { ...r, json: undefined };
  try {
    return { ...r, json: JSON.parse(r.body) };
  } catch {
    return { ...r, json: undefined };
  }
}

/** The demo backend names itself on every page it renders. */
export function servedBy(body) {
  return /Served by backend <strong>([^<]+)<\/strong>/.exec(body ?? '')?.[1];
}

/** A room page: {status, backend} (backend undefined when the page does not name one). */
export async function roomPage(base, room) {
  const r = await get(`${base}/game/${room}/`);
  return { status: r.status, error: r.error, backend: servedBy(r.body) };
}

/** GET over HTTP/2 (TLS, ALPN h2): {alpn, status, body} or {error}. */
export function getH2(origin, path, timeoutMs = 5_000) {
  return new Promise((resolve) => {
    const session = http2.connect(origin, { rejectUnauthorized: false });
    const timer = setTimeout(() => {
      session.destroy();
      resolve({ error: `timeout after ${timeoutMs} ms` });
    }, timeoutMs);
    const done = (v) => {
      clearTimeout(timer);
      session.close();
      resolve(v);
    };
    session.on('error', (err) => done({ error: String(err.message ?? err) }));
    session.on('connect', () => {
      const req = session.request({ ':path': path });
      let status;
      let body = '';
      req.setEncoding('utf8');
      req.on('response', (h) => (status = h[':status']));
      req.on('data', (d) => (body += d));
      req.on('end', () => done({ alpn: session.alpnProtocol, status, body }));
      req.on('error', (err) => done({ error: String(err.message ?? err) }));
    });
  });
}

/** A /ws/live/ socket that mounts a room; `backend` is the one that answered. */
export class LiveSocket {
  constructor(url) {
    this.messages = [];
    this.ws = new WebSocket(url, { handshakeTimeout: 10_000, rejectUnauthorized: false });
    this.ws.on('message', (d) => {
      try {
        this.messages.push(JSON.parse(String(d)));
      } catch {
        this.messages.push({ raw: String(d) });
      }
    });
    this.opened = new Promise((resolve, reject) => {
      this.ws.once('open', resolve);
      this.ws.once('error', reject);
      this.ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    });
    this.opened.catch(() => undefined);
  }

  async next(type, timeoutMs = 10_000) {
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      const m = this.messages.find((x) => x.type === type);
      if (m) return m;
      await sleep(50);
    }
    throw new Error(`no "${type}" message in ${timeoutMs} ms`);
  }

  /** Opens, waits for the backend's connect frame, mounts the room: the backend's id. */
  async join(room) {
    await this.opened;
    const hello = await this.next('connect');
    this.ws.send(JSON.stringify({ type: 'mount', url: `/game/${room}/`, room }));
    const mounted = await this.next('mounted');
    if (mounted.backend !== hello.backend) throw new Error('connect and mount came from different backends');
    return String(mounted.backend);
  }

  close() {
    this.ws.terminate();
  }
}

/**
 * Joins a room through a socket: {backend, socket} or {error}. A 503 refusal (Retry-After: a
 * gateway whose health round has not yet seen the room's backend up) is retried for up to 5 s, as
 * a client honouring Retry-After would; `retried` counts those.
 */
export async function joinRoom(url, room) {
  const until = Date.now() + 5_000;
  for (let retried = 0; ; retried++) {
    const socket = new LiveSocket(url);
    try {
      return { backend: await socket.join(room), socket, retried };
    } catch (err) {
      socket.close();
      const message = String(err.message ?? err);
      if (message !== 'HTTP 503' || Date.now() > until) return { error: retried ? `${message} (after ${retried} retries)` : message };
      await sleep(1_000);
    }
  }
}

/** Polls fn until it returns a truthy value or time runs out (undefined then). */
export async function poll(timeoutMs, fn, everyMs = 500) {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const v = await fn();
    if (v) return v;
    await sleep(everyMs);
  }
  return undefined;
}
