// Runs a corpus case against a proxy in front of the byte-logging backend and judges it: what the
// client read (statuses, close), what the backend parsed for that client (attributed by the
// client's own loopback source address in X-Forwarded-For), and the invariants that hold for every
// case. Shared by the vitest corpora and bench/conformance (where the proxy is nginx, HAProxy or
// the http-proxy-3 reference instead of roomgate).
import type { Answer, BackendRequest, RawBackend } from './backend.js';
import { echoAnswer } from './backend.js';
import { exchange, HANDSHAKE, statuses } from './raw.js';
import type { ResponseCase } from './response-cases.js';
import { fieldValues, parseResponses, type ParsedResponse, type StreamParse } from './strict-parser.js';
import type { Expectation, ExpectedRequest, RequestCase } from './request-cases.js';

/** A distinct loopback source address per n (127.1.0.1 ... ), never 127.0.0.1. */
export function addressFor(n: number): string {
  const i = n % (250 * 250 * 120);
  return `127.${1 + Math.floor(i / 62_500)}.${1 + (Math.floor(i / 250) % 250)}.${1 + (i % 250)}`;
}

/** Hands out fresh client addresses (from addressFor(base) on) and remembers them all. */
export class ClientAddresses {
  readonly all = new Set<string>();
  private n = 0;

  constructor(private readonly base: number) {}

  next(): string {
    const a = addressFor(this.base + this.n++);
    this.all.add(a);
    return a;
  }
}

/** The client address a backend request claims: the last X-Forwarded-For element. */
export function claimedClient(r: BackendRequest): string | null {
  const last = r.xff.at(-1);
  if (last === undefined) return null;
  return last.split(',').at(-1)?.trim() ?? null;
}

export interface RequestOutcome {
  readonly address: string;
  readonly statuses: number[];
  readonly closed: boolean;
  readonly text: string;
  /** Backend requests whose X-Forwarded-For names this client. */
  readonly forwarded: BackendRequest[];
}

export interface RunOptions {
  readonly timeoutMs?: number;
  readonly gapMs?: number;
  /** Override the case's parts (split runs). */
  readonly parts?: readonly string[];
}

/** Statuses complete, close seen when due, tunnel echo read: nothing more to wait for. */
function satisfied(c: RequestCase, received: Buffer): boolean {
  const text = received.toString('latin1');
  if (statuses(text).length < c.expect.statuses.length) return false;
  if (c.expect.tunnelEcho !== undefined && !text.includes(c.expect.tunnelEcho)) return false;
  return true;
}

export function expectedClosed(e: Expectation): boolean {
  return e.closed ?? (e.statuses.at(-1) ?? 400) >= 400;
}

export async function runRequestCase(port: number, backend: RawBackend, c: RequestCase, address: string, o: RunOptions = {}): Promise<RequestOutcome> {
  const before = backend.requests.length;
  const wantClose = expectedClosed(c.expect);
  const r = await exchange(port, o.parts ?? c.parts, {
    localAddress: address,
    timeoutMs: o.timeoutMs ?? 4_000,
    gapMs: o.gapMs ?? 0,
    // A case that should stay open is done a moment after its answers; one that should close
    // waits for the close (or the timeout).
    ...(wantClose ? {} : { until: (b: Buffer) => satisfied(c, b), graceMs: 150 }),
  });
  const forwarded = backend.requests.slice(before).filter((q) => claimedClient(q) === address);
  // Requests of this client that arrived before `before` cannot exist (the address is new).
  return { address, statuses: statuses(r.text), closed: r.closed, text: r.text, forwarded };
}

function matchRequest(e: ExpectedRequest, got: BackendRequest): string[] {
  const p: string[] = [];
  if (got.method !== e.method) p.push(`method ${got.method}, expected ${e.method}`);
  if (got.target !== e.target) p.push(`target ${got.target}, expected ${e.target}`);
  const host = e.host ?? 'a.example';
  if (got.host.length !== 1 || got.host[0] !== host) p.push(`Host ${JSON.stringify(got.host)}, expected ["${host}"]`);
  const body = e.body ?? '';
  const framing = e.framing ?? (body === '' ? 'none' : 'length');
  // A forwarded body may be framed either way; an empty body may also arrive as chunked "0".
  if (got.body.toString('latin1') !== body) p.push(`body ${JSON.stringify(got.body.toString('latin1'))}, expected ${JSON.stringify(body)}`);
  if (framing === 'none' && got.framing !== 'none' && got.body.length > 0) p.push(`framing ${got.framing}, expected none`);
  for (const [n, v] of e.headers ?? []) {
    if (!got.headers.some(([gn, gv]) => gn.toLowerCase() === n.toLowerCase() && gv === v)) p.push(`header ${n}: ${JSON.stringify(v)} missing`);
  }
  for (const n of e.absent ?? []) {
    if (got.headers.some(([gn]) => gn.toLowerCase() === n.toLowerCase())) p.push(`header ${n} must not be forwarded`);
  }
  return p;
}

/** Every way the outcome differs from an expectation (invariants not included). */
function expectationProblems(e: Expectation, o: RequestOutcome): string[] {
  const p: string[] = [];
  if (o.statuses.join(',') !== e.statuses.join(',')) p.push(`client got [${o.statuses.join(', ')}], expected [${e.statuses.join(', ')}]: ${JSON.stringify(o.text.slice(0, 600))}`);
  const wantClose = expectedClosed(e);
  if (o.closed !== wantClose) p.push(wantClose ? 'connection left open, expected closed' : 'connection closed, expected open');
  if (e.lastBody !== undefined && !o.text.endsWith(e.lastBody)) p.push(`last body is not ${JSON.stringify(e.lastBody)}`);
  if (e.responseHeader && !e.responseHeader.test(o.text)) p.push(`response lacks ${e.responseHeader}`);
  if (e.tunnelEcho !== undefined && !o.text.includes(e.tunnelEcho)) p.push('tunnel bytes not echoed back');
  // Requests of one client may reach the backend over several pooled connections: pair them
  // by method and target, not by arrival order.
  const left = [...o.forwarded];
  const missing: ExpectedRequest[] = [];
  for (const want of e.forwarded) {
    const i = left.findIndex((r) => r.method === want.method && r.target === want.target);
    const j = i === -1 ? (left.length > 0 && missing.length === 0 && e.forwarded.length === 1 ? 0 : -1) : i;
    if (j === -1) {
      missing.push(want);
      continue;
    }
    const [got] = left.splice(j, 1) as [BackendRequest];
    for (const m of matchRequest(want, got)) p.push(`${want.method} ${want.target}: ${m}`);
  }
  for (const m of missing) p.push(`backend never parsed ${m.method} ${m.target}`);
  // The client's own X-Forwarded-For on it: the proxy itself read past the invalid part.
  const hidden = left.filter((r) => r.target.includes('/smuggled'));
  if (hidden.length > 0) p.push(`RESYNC: the proxy forwarded ${hidden.map((r) => `${r.method} ${r.target}`).join('; ')}, hidden behind the invalid part`);
  const extra = left.filter((r) => !r.target.includes('/smuggled'));
  if (extra.length > 0) p.push(`backend parsed unexpected ${extra.map((r) => `${r.method} ${r.target}`).join('; ')}`);
  return p;
}

export interface Verdict {
  /** Empty: the case holds. */
  readonly problems: string[];
  /** The case's declared Node variant ("lenient: ..." or "stricter: ..."), when that is what happened. */
  readonly variant: string | null;
}

/** Judges an outcome: the case's expectation (or its declared leniency) and the invariants. */
export function judgeRequest(c: RequestCase, o: RequestOutcome): Verdict {
  const inv = invariantProblems(o);
  const p = expectationProblems(c.expect, o);
  const v = c.nodeVariant;
  if (p.length > 0 && v && expectationProblems(v, o).length === 0) return { problems: inv, variant: `${v.kind}: ${v.note}` };
  return { problems: [...p, ...inv], variant: null };
}

/** Exactly one X-Forwarded-For, equal to the client's address, on every request of this client. */
export function invariantProblems(o: RequestOutcome): string[] {
  return o.forwarded.filter((r) => r.xff.length !== 1 || r.xff[0] !== o.address).map((r) => `XFF ${JSON.stringify(r.xff)} on ${r.method} ${r.target}, expected ["${o.address}"]`);
}

/** A /healthz probe of the test itself (from 127.0.0.1, which no corpus or fuzz client uses), proxied by a proxy that does not answer it. */
export function isHealthProbe(r: BackendRequest): boolean {
  return r.method === 'GET' && r.target === '/healthz' && r.xff.length === 1 && r.xff[0] === '127.0.0.1';
}

/** Requests no client of this run can claim: no X-Forwarded-For, or one naming nobody we know. */
/** roomgate's own hello (asked of every backend at start while its calls are signed): no client's request. */
function isHandoffHello(r: BackendRequest): boolean {
  return r.method === 'POST' && r.target === '/_roomgate/handoff/hello';
}

export function unclaimed(backend: RawBackend, clients: ReadonlySet<string>, from = 0): BackendRequest[] {
  return backend.requests.slice(from).filter((r) => {
    const c = claimedClient(r);
    return !isHealthProbe(r) && !isHandoffHello(r) && (c === null || !clients.has(c));
  });
}

/** A short cell for the side-by-side table: what the client got and what the backend parsed. */
export function summarize(o: RequestOutcome, problems: readonly string[]): string {
  const st = o.statuses.length === 0 ? (o.closed ? 'closed' : 'no answer') : o.statuses.join(' ');
  const fwd = o.forwarded.length > 0 ? `, fwd ${o.forwarded.length}` : '';
  const marks: string[] = [];
  if (problems.some((x) => x.includes('SMUGGLED'))) marks.push('SMUGGLED');
  if (problems.some((x) => x.startsWith('RESYNC'))) marks.push('RESYNC');
  if (problems.some((x) => x.startsWith('XFF'))) marks.push('XFF');
  if (problems.some((x) => x.includes('unexpected'))) marks.push('EXTRA');
  return `${st}${fwd}${marks.length ? ` **${marks.join(' ')}**` : ''}`;
}

// ---------------------------------------------------------------------------------------------
// The response corpus

export interface ResponseOutcome {
  readonly statuses: number[];
  readonly closed: boolean;
  readonly text: string;
  /** The referee's reading of the client's stream. */
  readonly parsed: StreamParse<ParsedResponse>;
  /** Problems of the follow-up request from a second client (empty: it got its own answer). */
  readonly followUp: string[];
}

export function responseRequest(c: ResponseCase): string {
  if (c.request === 'upgrade') return HANDSHAKE('/ws/live/').replace('game.example', 'a.example') + SMUGGLED_REQUEST;
  return `${c.request ?? 'GET'} /r HTTP/1.1\r\nHost: a.example\r\n\r\n`;
}

/** A request a client slips behind its handshake: it must never reach a backend as a request. */
export const SMUGGLED_REQUEST = 'GET /smuggled HTTP/1.1\r\nHost: a.example\r\n\r\n';

/** One GET from a second client: it must get exactly its own echo (nothing left over from another answer). */
export async function followUp(port: number, address: string): Promise<string[]> {
  const r = await exchange(port, ['GET /follow HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n'], { localAddress: address, timeoutMs: 4_000 });
  const parsed = parseResponses(r.bytes, ['GET'], r.closed);
  const p: string[] = [];
  if (parsed.error || parsed.messages.length !== 1 || parsed.messages[0]?.status !== 200) p.push(`follow-up got ${JSON.stringify(r.text.slice(0, 300))}`);
  else if (fieldValues(parsed.messages[0], 'x-echo-for').join() !== address) p.push(`follow-up got someone else's answer: ${JSON.stringify(r.text.slice(0, 300))}`);
  return p;
}

export async function runResponseCase(port: number, c: ResponseCase, address: string, followAddress: string): Promise<ResponseOutcome> {
  const method = c.request === 'HEAD' ? 'HEAD' : 'GET';
  const waitClose = c.expect.closed === true || c.expect.cut === true;
  const r = await exchange(port, [responseRequest(c)], {
    localAddress: address,
    timeoutMs: 4_000,
    ...(waitClose ? {} : { until: (b: Buffer) => statuses(b.toString('latin1')).length >= c.expect.statuses.length, graceMs: 200 }),
  });
  const parsed = parseResponses(r.bytes, [method], r.closed);
  return { statuses: statuses(r.text), closed: r.closed, text: r.text, parsed, followUp: await followUp(port, followAddress) };
}

export function responseProblems(c: ResponseCase, o: ResponseOutcome): string[] {
  const e = c.expect;
  const p: string[] = [];
  const statusesOk = o.statuses.join(',') === e.statuses.join(',') || (e.cut === true && o.statuses.length === 0);
  if (!statusesOk) p.push(`client got [${o.statuses.join(', ')}]${o.closed ? ' and a close' : ''}, expected [${e.statuses.join(', ')}]: ${JSON.stringify(o.text.slice(0, 400))}`);
  if (e.closed !== undefined && o.closed !== e.closed) p.push(e.closed ? 'connection left open, expected closed' : 'connection closed, expected open');
  const finals = o.parsed.messages.filter((m) => m.status >= 200 || m.status === 101);
  if (e.cut) {
    if (!o.closed) p.push('a cut body left the client connection open');
    if (finals.length > 0) p.push(`a cut body reached the client as a complete response: ${JSON.stringify(o.text.slice(0, 300))}`);
  } else if (o.parsed.error) p.push(`the client's stream breaks the referee's rules: ${o.parsed.error.reason}`);
  if (e.body !== undefined) {
    const last = finals.at(-1);
    if (!last) p.push(`no complete final response: ${JSON.stringify(o.text.slice(0, 300))}`);
    else if (last.body.toString('latin1') !== e.body) p.push(`body ${JSON.stringify(last.body.toString('latin1'))}, expected ${JSON.stringify(e.body)}`);
  }
  const like = (e as { bodyLike?: RegExp }).bodyLike;
  if (like !== undefined) {
    const last = finals.at(-1)?.body.toString('latin1');
    if (last === undefined || !like.test(last)) p.push(`body ${JSON.stringify(last ?? o.text.slice(0, 300))}, expected one like ${String(like)}`);
  }
  for (const s of e.contains ?? []) if (!o.text.includes(s)) p.push(`client stream lacks ${JSON.stringify(s)}`);
  for (const s of e.lacks ?? []) if (o.text.includes(s)) p.push(`client stream contains ${JSON.stringify(s)}`);
  p.push(...o.followUp);
  return p;
}

/** After a refused handshake: the backend connection that got it parsed nothing else. */
export function handshakeConnProblems(backend: RawBackend, address: string): string[] {
  const handshake = backend.requests.find((r) => claimedClient(r) === address);
  const conn = backend.conns.find((k) => k.id === handshake?.conn);
  if (!conn || !handshake) return ['the handshake never reached the backend'];
  // A proxy's keep-alive connection may have carried other requests before the handshake.
  const after = conn.requests.slice(conn.requests.indexOf(handshake) + 1);
  // With the client's own X-Forwarded-For the proxy parsed the bytes itself (the connection went
  // on as HTTP); with none they reached the backend raw. Requests of others (a follow-up, a health
  // probe) may ride a connection the proxy kept after a refusal: that alone is no leak.
  const own = after.filter((r) => r.xff.length === 1 && r.xff[0] === address);
  const raw = after.filter((r) => !own.includes(r) && (claimedClient(r) === null || r.target.includes('/smuggled')));
  const p: string[] = [];
  if (raw.length > 0) p.push(`SMUGGLED: the handshake's backend connection parsed ${raw.map((r) => `${r.method} ${r.target}`).join('; ')} from the client's raw bytes`);
  if (own.length > 0) p.push(`FWD-BEHIND: the request behind the refused handshake was forwarded: ${own.map((r) => `${r.method} ${r.target}`).join('; ')}`);
  return p;
}

/** A backend answerer that plays each client's scripted answer (by its address), else `fallback`. */
export function scriptedByClient(scripts: ReadonlyMap<string, Answer>, fallback: (req: BackendRequest) => Answer = echoAnswer): (req: BackendRequest) => Answer {
  return (req) => scripts.get(claimedClient(req) ?? '') ?? fallback(req);
}

/** A short cell for a response case: what the client got, and markers for broken invariants. */
export function summarizeResponse(o: ResponseOutcome, problems: readonly string[]): string {
  const st = o.statuses.length === 0 ? (o.closed ? 'closed' : 'no answer') : `${o.statuses.join(' ')}${o.closed ? ' close' : ''}`;
  const marks: string[] = [];
  if (problems.some((x) => x.includes('SMUGGLED'))) marks.push('SMUGGLED');
  if (problems.some((x) => x.startsWith('FWD-BEHIND'))) marks.push('FWD-BEHIND');
  if (problems.some((x) => x.includes("someone else's answer"))) marks.push('CROSSED');
  if (problems.some((x) => x.includes('complete response'))) marks.push('CUT-LOOKS-COMPLETE');
  if (problems.some((x) => x.startsWith('client stream contains'))) marks.push('BODY-LEAK');
  return `${st}${marks.length ? ` **${marks.join(' ')}**` : ''}`;
}
