// One GET of the page cache to a backend (a fill, or a refresh with validators), with node:http's
// client: the connect and response timeouts of the page paths, the same checks on the answer's
// head (src/http/response-rules.ts), hop-by-hop fields dropped. The body is handed on chunk by
// chunk, decoded from its framing; the caller stores it and streams it to the waiting clients.
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { tlsOptions, type BackendTls } from '../backends/backend-tls.js';
import { endToEndFields, withoutLength } from '../http/hop-by-hop.js';
import { MAX_RESPONSE_HEADERS, responseHeadProblem } from '../http/response-rules.js';
import type { BackendAgents } from '../forward/backend-agents.js';
import type { Backend } from '../runtime/pool.js';

export interface FetchedHead {
  readonly status: number;
  readonly reason: string;
  /** End-to-end fields, [name, value, ...], without Content-Length (in `length`). */
  readonly headers: string[];
  /** The body's length when the answer states it (Content-Length), else null. */
  readonly length: number | null;
}

export interface FetchEvents {
  /** The backend connection is up (a new one). */
  connected(): void;
  head(head: FetchedHead): void;
  data(chunk: Buffer): void;
  end(): void;
  /** Before the head: nothing was relayed (err.code says what; 'EBADANSWER' = an answer that cannot be used). After: the body broke off. */
  failed(err: NodeJS.ErrnoException, afterHead: boolean): void;
}

export interface FetchOptions {
  readonly agents: BackendAgents;
  readonly backendTls: BackendTls;
  readonly connectTimeoutMs: number;
  readonly responseTimeoutMs: number;
}

export interface Fetch {
  /** Stops reading the body (back-pressure), and resumes it. */
  pause(): void;
  resume(): void;
  /** Gives up: no further events. */
  abort(): void;
}

export function fetchFromBackend(backend: Backend, path: string, headers: string[], o: FetchOptions, ev: FetchEvents): Fetch {
  let settled = false;
  let upstream: IncomingMessage | null = null;
  const fail = (err: NodeJS.ErrnoException): void => {
    if (settled) return;
    settled = true;
    ev.failed(err, upstream !== null);
  };
  const req = (backend.config.tls ? https : http).request({
    host: backend.config.host,
    port: backend.config.port,
    method: 'GET',
    path,
    headers,
    agent: o.agents.for(backend),
    timeout: o.responseTimeoutMs,
    ...(backend.config.tls ? tlsOptions(o.backendTls, backend.config.host) : {}),
  });
  // One more than accepted, so that the check sees a head that is too long (Node drops the rest).
  req.maxHeadersCount = MAX_RESPONSE_HEADERS + 1;
  let connectTimer: NodeJS.Timeout | null = null;
  req.on('socket', (s: Socket) => {
    if (!s.connecting) return;
    connectTimer = setTimeout(() => req.destroy(Object.assign(new Error('connect timeout'), { code: 'ECONNTIMEOUT' })), o.connectTimeoutMs);
    s.once(s instanceof TLSSocket ? 'secureConnect' : 'connect', () => {
      if (connectTimer) clearTimeout(connectTimer);
      ev.connected();
    });
  });
  req.on('timeout', () => req.destroy(Object.assign(new Error('response timeout'), { code: 'ERESPONSETIMEOUT' })));
  req.on('upgrade', (_res: IncomingMessage, s: Socket) => {
    s.destroy();
    fail(Object.assign(new Error('a 101 to a request without Upgrade'), { code: 'EBADANSWER' }));
  });
  req.on('response', (res: IncomingMessage) => {
    if (connectTimer) clearTimeout(connectTimer);
    req.setTimeout(0);
    const problem = responseHeadProblem(res);
    if (problem !== null) {
      res.socket.destroy();
      return fail(Object.assign(new Error(problem), { code: 'EBADANSWER' }));
    }
    upstream = res;
    const cl = res.headers['content-length'];
    const length = cl !== undefined && /^[0-9]{1,15}$/.test(cl) ? Number(cl) : null;
    // The length travels apart: each writer frames the body itself (Content-Length or chunked).
    const fields = withoutLength(endToEndFields(res.rawHeaders));
    ev.head({ status: res.statusCode ?? 502, reason: res.statusMessage ?? '', headers: fields, length });
    if (settled) return;
    res.on('data', (chunk: Buffer) => {
      if (!settled) ev.data(chunk);
    });
    res.on('end', () => {
      if (settled) return;
      settled = true;
      ev.end();
    });
    res.on('aborted', () => fail(Object.assign(new Error('backend closed mid-answer'), { code: 'ECONNRESET' })));
    res.on('error', (err: NodeJS.ErrnoException) => fail(err));
  });
  req.on('error', (err: NodeJS.ErrnoException) => {
    if (connectTimer) clearTimeout(connectTimer);
    // After a complete answer (e.g. bytes after it): the answer stands, the connection is dropped.
    if (upstream?.complete === true) return;
    fail(err);
  });
  req.end();
  return {
    pause: () => upstream?.pause(),
    resume: () => upstream?.resume(),
    abort: () => {
      settled = true;
      req.destroy();
    },
  };
}
