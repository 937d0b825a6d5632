// Judges one row on one front (against the row: expectation) and the fronts of a row against each
// other (parity). What the backend got is read from the byte log: the requests whose
// X-Forwarded-For names the client address the front's client used.
import type { BackendRequest } from '../conformance/backend.js';
import type { AtBackend, Expected, Front, Outcome, Row } from './cases.js';
import type { Answer } from './clients.js';
import { schemeOf } from './fronts.js';

export interface FrontRun {
  readonly front: Front;
  readonly address: string;
  readonly answer: Answer;
  /** Backend requests attributed to this client. */
  readonly forwarded: readonly BackendRequest[];
}

/** What a front is expected to do with a row: the row's expectation, or the front's recorded disagreement. */
export function expectedOn(row: Row, front: Front): Expected {
  return row.differs?.[front] ?? row;
}

/** The status of a row's scripted backend answer (Row.answer), or null when it has none. */
export function scriptedStatus(row: Row): number | null {
  const m = row.answer === undefined ? null : /^HTTP\/1\.[01] ([0-9]{3})/.exec(row.answer);
  return m === null ? null : Number(m[1]);
}

function answerProblems(want: Outcome, front: Front, a: Answer, status: number | null): string[] {
  if (want === 'backend') {
    const ok = status === null ? a.status !== null && a.status >= 200 && a.status <= 299 : a.status === status;
    if (!ok || a.tag !== 'b1') return [`answer ${a.status ?? 'none'} (tag ${a.tag ?? 'none'}), expected the backend's ${status ?? '2xx'}: ${a.note}`];
    return [];
  }
  if (want === 'reset') {
    // A reset stream, not a timeout or a client that never sent the request.
    if (a.status !== null || !/^stream (error|closed \(rst)/.test(a.note)) return [`answer ${a.status ?? 'none'}, expected a reset stream: ${a.note}`];
    return [];
  }
  if (want === 'upgraded') {
    const status = front === 'h2-connect' ? 200 : 101;
    if (a.status !== status || !a.tunnel) return [`answer ${a.status ?? 'none'} (tunnel ${a.tunnel}), expected ${status} and the backend's first frame: ${a.note}`];
    return [];
  }
  if (a.status !== want || a.tag !== null) return [`answer ${a.status ?? 'none'}${a.tag ? ' from the backend' : ''}, expected roomgate's own ${want}: ${a.note}`];
  return [];
}

const lower = (s: string): string => s.toLowerCase();
const values = (r: BackendRequest, name: string): string[] => r.headers.filter(([n]) => lower(n) === name).map(([, v]) => v);

// Hop-by-hop fields (RFC 9110 7.6.1): none of the client's may reach the backend.
const HOP_BY_HOP = ['keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade', 'transfer-encoding', 'connection'];

/** Every way one forwarded request differs from what the row asks and from the invariants of every proxied request. */
function requestProblems(row: Row, want: AtBackend, front: Front, address: string, r: BackendRequest): string[] {
  const p: string[] = [];
  const method = want.method ?? (row.upgrade ? 'GET' : row.method);
  const target = want.target ?? row.target;
  const host = want.host ?? row.host ?? 'a.example';
  if (r.method !== method) p.push(`method ${r.method}, expected ${method}`);
  if (r.target !== target) p.push(`target ${JSON.stringify(r.target)}, expected ${JSON.stringify(target)}`);
  const one = (name: string, expected: string | undefined): void => {
    const got = values(r, name);
    if (expected === undefined) {
      if (got.length > 0) p.push(`${name} ${JSON.stringify(got)}, expected none`);
    } else if (got.length !== 1 || got[0] !== expected) p.push(`${name} ${JSON.stringify(got)}, expected [${JSON.stringify(expected)}]`);
  };
  one('host', host);
  one('x-forwarded-for', address);
  one('x-forwarded-proto', schemeOf(front));
  one('x-forwarded-host', host);
  one('x-forwarded-prefix', want.prefix);
  one('x-roomgate-room', want.room);
  const epochs = values(r, 'x-roomgate-epoch');
  if (want.room === undefined ? epochs.length > 0 : epochs.length !== 1 || !/^[0-9]+$/.test(epochs[0] as string)) p.push(`x-roomgate-epoch ${JSON.stringify(epochs)}, expected ${want.room === undefined ? 'none' : 'one number'}`);
  // A WebSocket of a room carries its socket id (version-2 handoffs, docs/handoff.md): one, roomgate's.
  const sockets = values(r, 'x-roomgate-socket');
  const socketWanted = row.upgrade === true && want.room !== undefined;
  if (socketWanted ? sockets.length !== 1 || !/^[A-Za-z0-9_-]{22}$/.test(sockets[0] as string) : sockets.length > 0) p.push(`x-roomgate-socket ${JSON.stringify(sockets)}, expected ${socketWanted ? 'one id' : 'none'}`);
  // Nothing else of roomgate's (any case, any underscore spelling), nor an underscore claim.
  const ours = new Set(['x-roomgate-room', 'x-roomgate-epoch', 'x-roomgate-socket']);
  for (const [n] of r.headers) {
    const norm = lower(n).replaceAll('_', '-');
    if (norm.startsWith('x-roomgate-') && !(ours.has(lower(n)) && !n.includes('_'))) p.push(`a client's ${n} reached the backend`);
    if (n.includes('_') && ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-prefix', 'forwarded', 'x-real-ip'].includes(norm)) p.push(`underscore claim ${n} reached the backend`);
  }
  for (const name of HOP_BY_HOP) {
    const got = values(r, name);
    if (got.length === 0) continue;
    if (row.upgrade && name === 'upgrade' && got.length === 1 && lower(got[0] as string) === 'websocket') continue;
    if (row.upgrade && name === 'connection' && got.length === 1 && lower(got[0] as string) === 'upgrade') continue;
    // The gateway's own framing and persistence of its backend connection.
    if (name === 'transfer-encoding' && got.length === 1 && lower(got[0] as string) === 'chunked' && r.framing === 'chunked') continue;
    // Both page paths keep their backend connections alive and say so themselves.
    if (name === 'connection' && got.length === 1 && lower(got[0] as string) === 'keep-alive') continue;
    p.push(`hop-by-hop ${name} ${JSON.stringify(got)} reached the backend`);
  }
  if (row.upgrade && (values(r, 'upgrade').length !== 1 || values(r, 'connection').length !== 1)) p.push('a handshake without Upgrade: websocket and Connection: Upgrade');
  const body = want.body ?? row.body ?? '';
  if (r.body.toString('latin1') !== body) p.push(`body of ${r.body.length} bytes ${JSON.stringify(r.body.toString('latin1').slice(0, 80))}, expected ${Buffer.byteLength(body, 'latin1')} bytes ${JSON.stringify(body.slice(0, 80))}`);
  for (const [n, v] of want.has ?? []) if (!values(r, lower(n)).includes(v)) p.push(`${n}: ${JSON.stringify(v)} missing (got ${JSON.stringify(values(r, lower(n)))})`);
  for (const n of want.lacks ?? []) if (values(r, lower(n)).length > 0) p.push(`${n} must not reach the backend`);
  return p;
}

/** The row's expectation (or the front's recorded disagreement) against what happened. */
export function expectationProblems(row: Row, run: FrontRun): string[] {
  const e = expectedOn(row, run.front);
  const p = answerProblems(e.expect, run.front, run.answer, row.status ?? scriptedStatus(row));
  for (const n of row.answerLacks ?? []) if (run.answer.fields.includes(n)) p.push(`the answer carries ${n}`);
  if (row.retryAfter !== undefined && JSON.stringify(run.answer.retryAfter ?? []) !== JSON.stringify([row.retryAfter])) p.push(`Retry-After ${JSON.stringify(run.answer.retryAfter ?? [])}, expected ${JSON.stringify([row.retryAfter])}`);
  if (row.answerBody !== undefined && !row.answerBody.test(run.answer.body ?? '')) p.push(`answer body ${JSON.stringify(run.answer.body ?? null)}, expected one like ${String(row.answerBody)}`);
  if (row.location !== undefined) {
    // The values as parity.test.ts normalised them (OWN, PUBLIC): one Location, and Refresh alike.
    const want = { location: [row.location], refresh: [`0; url=${row.location}`] };
    const got = { location: run.answer.location ?? [], refresh: run.answer.refresh ?? [] };
    if (JSON.stringify(got) !== JSON.stringify(want)) p.push(`answer fields ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
  }
  if (e.backend === 'nothing') {
    if (run.forwarded.length > 0) p.push(`reached the backend, expected nothing: ${run.forwarded.map((r) => `${r.method} ${r.target}`).join('; ')}`);
  } else if (run.forwarded.length !== 1) p.push(`the backend parsed ${run.forwarded.length} requests for it, expected 1${run.forwarded.map((r) => `: ${r.method} ${r.target}`).join('')}`);
  else p.push(...requestProblems(row, e.backend, run.front, run.address, run.forwarded[0] as BackendRequest));
  return p.map((x) => `${run.front}: ${x}`);
}

// Fields that differ between fronts by design: the client's address and scheme, the epoch of each
// gateway's own placement store, the body's framing (h2 has none of its own), h2's generated
// WebSocket key, the gateway's own Connection header toward the backend.
const FRONT_SPECIFIC = new Set(['x-forwarded-for', 'x-forwarded-proto', 'content-length', 'transfer-encoding', 'sec-websocket-key']);

/** What must be the same for a row on every front: the answer class and the request at the backend. */
export function normalised(run: FrontRun): string {
  const a = run.answer;
  const answer =
    a.status === null ? 'none' : a.tag !== null ? `backend ${a.status}` : a.tunnel ? 'tunnel' : run.front === 'h2-connect' && a.status === 200 ? 'h2 200 without a tunnel' : a.status === 101 ? '101 without a tunnel' : `roomgate ${a.status}`;
  const requests = run.forwarded.map((r) => {
    const fields = r.headers
      .map(([n, v]) => [lower(n), v] as const)
      .filter(([n, v]) => !FRONT_SPECIFIC.has(n) && !(n === 'connection' && lower(v) === 'keep-alive'))
      .map(([n, v]) => `${n}: ${n === 'x-roomgate-epoch' ? '<epoch>' : n === 'x-roomgate-socket' ? '<socket>' : v}`)
      .sort();
    return { method: r.method, target: r.target, fields, body: r.body.toString('base64') };
  });
  return JSON.stringify({ answer: answer === 'tunnel' ? 'tunnel' : answer, location: a.location ?? [], refresh: a.refresh ?? [], requests });
}

/** Fronts that follow the row (no recorded disagreement) must give the same normalised outcome. */
export function parityProblems(row: Row, runs: readonly FrontRun[]): string[] {
  const same = runs.filter((r) => row.differs?.[r.front] === undefined);
  const first = same[0];
  if (first === undefined) return [];
  const ref = normalised(first);
  return same.slice(1).flatMap((r) => {
    const n = normalised(r);
    return n === ref ? [] : [`PARITY ${r.front} differs from ${first.front}:\n  ${first.front}: ${ref}\n  ${r.front}: ${n}`];
  });
}
