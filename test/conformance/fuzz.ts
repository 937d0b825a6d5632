// The differential fuzzer: mutations of both corpora thrown at a proxy in front of the
// byte-logging backend, many clients at once, each from its own loopback source address. Every
// case is a pure function of (seed, case number), so a failure prints the line that replays it.
//
// Invariants, checked per batch once the backend has settled:
//  (a) every request the backend parses names, in its one X-Forwarded-For, the client that sent
//      it, and its target comes from that client's own bytes. A request with no X-Forwarded-For,
//      two, or a foreign one, or a target from another client's stream, was smuggled.
//  (b) no client reads bytes meant for another: every X-Echo-For (the backend's echo of the
//      request's X-Forwarded-For) and every X-Owner marker of a scripted answer in a client's
//      stream names that client.
//  (c) the proxy never exits and answers /healthz after every batch.
// Differential, reported but not failing: the referee (strict-parser.ts) refused a client's bytes
// and the proxy still forwarded more requests than the referee read (a leniency, by reason).
import { canonicalTarget } from '../../src/http/target.js';
import type { Answer, BackendRequest, RawBackend } from './backend.js';
import { accept101 } from './backend.js';
import { exchange } from './raw.js';
import { REQUEST_CASES, SPLIT_CASE } from './request-cases.js';
import { PIN_RESPONSE_CASES, RESPONSE_CASES } from './response-cases.js';
import { addressFor, claimedClient, isHealthProbe, responseRequest, scriptedByClient } from './runner.js';
import { parseRequests } from './strict-parser.js';

// ---------------------------------------------------------------------------------------------
// PRNG: sfc32 seeded through splitmix32 (no Math.random anywhere).

function splitmix32(a: number): () => number {
  return () => {
    a = (a + 0x9e3779b9) | 0;
    let t = a ^ (a >>> 16);
    t = Math.imul(t, 0x21f0aaad);
    t ^= t >>> 15;
    t = Math.imul(t, 0x735a2d97);
    return (t ^ (t >>> 15)) >>> 0;
  };
}

export class Prng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number, stream = 0) {
    const sm = splitmix32((seed ^ Math.imul(stream + 1, 0x85ebca6b)) | 0);
    this.a = sm();
    this.b = sm();
    this.c = sm();
    this.d = sm();
    for (let i = 0; i < 12; i++) this.next();
  }

  /** A uniform 32-bit unsigned integer. */
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** 0 <= n < max. */
  int(max: number): number {
    return max <= 0 ? 0 : this.next() % max;
  }

  chance(p: number): boolean {
    return this.next() / 4_294_967_296 < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
}

// ---------------------------------------------------------------------------------------------
// Cases

export interface FuzzCase {
  readonly index: number;
  readonly address: string;
  /** "request" mutates what the client sends; "response" what the backend answers. */
  readonly kind: 'request' | 'response';
  readonly seedName: string;
  readonly mutations: readonly string[];
  /** The client's writes (latin1). */
  readonly parts: readonly string[];
  /** The backend's scripted answer (response cases). */
  readonly answer: string | null;
  readonly closeAfterAnswer: boolean;
  readonly gapMs: number;
}

const SPECIALS = ['\r', '\n', '\r\n', ' ', '\t', '\x00', '\x0b', '\x0c', '\x7f', '\xff', ',', ':', ';', '"', '0', 'chunked', '\r\n\r\n'];
const INJECT_LINES = [
  'Transfer-Encoding: chunked',
  'Transfer-Encoding: identity',
  'Content-Length: 0',
  'Content-Length: 5',
  'Connection: content-length',
  'Connection: close',
  'Connection: Upgrade',
  'Upgrade: websocket',
  'Expect: 100-continue',
  'Host: b.example',
  'X-Forwarded-For: 6.6.6.6',
];
const NUMBERS = ['0', '1', '00', '-1', '+1', '0x1', '1 1', '1,1', '99999999999999999999', 'ffffffffffffffff', '7fffffff', ' 5', '5 ', ''];

type Mutator = (s: string, r: Prng) => [string, string];

const at = (s: string, r: Prng): number => r.int(s.length + 1);
const lineStarts = (s: string): number[] => {
  const out: number[] = [];
  for (let i = s.indexOf('\r\n'); i !== -1; i = s.indexOf('\r\n', i + 2)) out.push(i + 2);
  return out;
};

const MUTATORS: readonly Mutator[] = [
  (s, r) => {
    const i = r.int(s.length);
    const c = s.charCodeAt(i) ^ (1 << r.int(8));
    return [s.slice(0, i) + String.fromCharCode(c) + s.slice(i + 1), `flip@${i}`];
  },
  (s, r) => {
    const i = r.int(s.length);
    return [s.slice(0, i) + String.fromCharCode(r.int(256)) + s.slice(i + 1), `set@${i}`];
  },
  (s, r) => {
    const i = at(s, r);
    const x = r.pick(SPECIALS);
    return [s.slice(0, i) + x + s.slice(i), `insert${JSON.stringify(x)}@${i}`];
  },
  (s, r) => {
    const i = r.int(s.length);
    const n = 1 + r.int(4);
    return [s.slice(0, i) + s.slice(i + n), `delete${n}@${i}`];
  },
  (s, r) => {
    const i = r.int(s.length);
    const n = 1 + r.int(24);
    return [s.slice(0, i + n) + s.slice(i, i + n) + s.slice(i + n), `dup${n}@${i}`];
  },
  (s, r) => {
    // Duplicate a whole header line.
    const starts = lineStarts(s);
    if (starts.length < 2) return [s, 'noop'];
    const a = r.pick(starts.slice(0, -1));
    const e = s.indexOf('\r\n', a);
    if (e <= a) return [s, 'noop'];
    const line = s.slice(a, e + 2);
    return [s.slice(0, a) + line + s.slice(a), `dupline@${a}`];
  },
  (s, r) => {
    // Inject a header line that matters for framing or routing.
    const starts = lineStarts(s);
    const a = starts.length > 0 ? r.pick(starts) : 0;
    const line = r.pick(INJECT_LINES);
    return [`${s.slice(0, a)}${line}\r\n${s.slice(a)}`, `inject${JSON.stringify(line)}@${a}`];
  },
  (s, r) => {
    // Change the case of a run of letters. Letter by letter, keeping a letter whose other case is
    // not one latin1 byte ('ÿ' upper is U+0178, 'µ' upper U+039C): the client writes latin1, where
    // such a letter would go out as another byte than the referee reads from the case.
    const i = r.int(s.length);
    const n = 1 + r.int(16);
    const part = s.slice(i, i + n);
    const up = r.chance(0.5);
    const changed = [...part]
      .map((ch) => {
        const other = up ? ch.toUpperCase() : ch.toLowerCase();
        return other.length === 1 && other.charCodeAt(0) <= 0xff ? other : ch;
      })
      .join('');
    return [s.slice(0, i) + changed + s.slice(i + n), `case${n}@${i}`];
  },
  (s, r) => {
    // A number in Content-Length or a chunk size line.
    const spots: [number, number][] = [];
    for (const m of s.matchAll(/content-length:[ \t]*([^\r\n]*)/gi)) spots.push([(m.index ?? 0) + m[0].length - (m[1] ?? '').length, (m[1] ?? '').length]);
    for (const m of s.matchAll(/\r\n([0-9a-fA-F]+)(?=[;\r ])/g)) spots.push([(m.index ?? 0) + 2, (m[1] ?? '').length]);
    if (spots.length === 0) return [s, 'noop'];
    const [i, n] = r.pick(spots);
    const v = r.chance(0.3) ? String(Number.parseInt(s.slice(i, i + n), 16) + r.int(5) - 2) : r.pick(NUMBERS);
    return [s.slice(0, i) + v + s.slice(i + n), `number${JSON.stringify(v)}@${i}`];
  },
  (s, r) => {
    // CR, LF or CRLF dropped or doubled at a line end.
    const ends = [...s.matchAll(/\r\n/g)].map((m) => m.index ?? 0);
    if (ends.length === 0) return [s, 'noop'];
    const i = r.pick(ends);
    const v = r.pick(['', '\n', '\r', '\r\n\r\n', '\r\r\n', '\n\r\n']);
    return [s.slice(0, i) + v + s.slice(i + 2), `eol${JSON.stringify(v)}@${i}`];
  },
];

function mutate(s: string, r: Prng, n: number): [string, string[]] {
  const names: string[] = [];
  for (let k = 0; k < n && s.length > 0; k++) {
    const [next, name] = r.pick(MUTATORS)(s, r);
    s = next;
    names.push(name);
  }
  return [s, names];
}

function split(s: string, r: Prng): string[] {
  const n = r.chance(0.5) ? 1 : 1 + r.int(4);
  if (n === 1 || s.length < 2) return [s];
  const cuts = [...new Set(Array.from({ length: n - 1 }, () => 1 + r.int(s.length - 1)))].sort((a, b) => a - b);
  const out: string[] = [];
  let prev = 0;
  for (const c of cuts) {
    out.push(s.slice(prev, c));
    prev = c;
  }
  out.push(s.slice(prev));
  return out;
}

const REQUEST_SEEDS = [...REQUEST_CASES, SPLIT_CASE];

/** A marker in scripted answers: which client the answer belongs to, with a check so a mutated one cannot pass for another. */
export function ownerMarker(address: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < address.length; i++) h = Math.imul(h ^ address.charCodeAt(i), 0x01000193);
  return `${address}-${(h >>> 0).toString(16).padStart(8, '0')}`;
}

/** Case `index` of run `seed`: the same bytes every time. */
export function generateCase(seed: number, index: number, addressBase = 100_000): FuzzCase {
  const r = new Prng(seed, index);
  const address = addressFor(addressBase + index);
  const gapMs = r.int(3);
  if (r.chance(0.2)) {
    const rc = r.pick(ANSWER_SEEDS);
    const bytes = typeof rc.answer.bytes === 'string' ? rc.answer.bytes : rc.answer.bytes.toString('latin1');
    const eol = bytes.indexOf('\r\n');
    const marked = eol === -1 ? bytes : `${bytes.slice(0, eol + 2)}X-Owner: ${ownerMarker(address)}\r\n${bytes.slice(eol + 2)}`;
    const [answer, mutations] = mutate(marked, r, r.int(4));
    return { index, address, kind: 'response', seedName: rc.name, mutations, parts: split(responseRequest(rc), r), answer, closeAfterAnswer: rc.answer.close === true || r.chance(0.1), gapMs };
  }
  const first = r.pick(REQUEST_SEEDS);
  let s = first.parts.join('');
  let seedName = first.name;
  if (r.chance(0.15)) {
    const second = r.pick(REQUEST_SEEDS);
    s += second.parts.join('');
    seedName += `+${second.name}`;
  }
  const [bytes, mutations] = mutate(s, r, r.int(5));
  return { index, address, kind: 'request', seedName, mutations, parts: split(bytes, r), answer: null, closeAfterAnswer: false, gapMs };
}

/** A case as text: what to paste into a bug report, and how to replay it. */
export function describeCase(seed: number, c: FuzzCase): string {
  return [
    `case ${c.index} of seed ${seed} (${c.kind}, seed case "${c.seedName}", mutations: ${c.mutations.join(' ') || 'none'})`,
    `  client ${c.address} writes ${JSON.stringify(c.parts)}${c.gapMs ? ` with ${c.gapMs} ms between writes` : ''}`,
    ...(c.answer !== null ? [`  backend answers ${JSON.stringify(c.answer)}${c.closeAfterAnswer ? ' and closes' : ''}`] : []),
    `  replay: npm run fuzz -- --seed ${seed} --case ${c.index}`,
  ].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Running

/** The backend answers mutated: the response corpus, its HTML pages for room.pinInject included. */
const ANSWER_SEEDS = [...RESPONSE_CASES, ...PIN_RESPONSE_CASES];

/**
 * Merged over FUZZ_GATEWAY_CONFIG (`npm run fuzz -- --pin-inject`): room.pinInject on, and every
 * path's first segment a room (the answer cases' GET /r is room "r"), so the HTML answers are scanned and injected.
 */
export const FUZZ_PIN_INJECT = { room: { pinInject: true, pagePaths: ['/{room}'] } };

/** roomgate's config for fuzzing: short timeouts so broken streams end quickly, no upgrade limits. */
export const FUZZ_GATEWAY_CONFIG = {
  health: { path: null },
  proxy: { websocketPaths: ['/ws/live/'], responseTimeoutMs: 2_000 },
  listen: { headersTimeoutMs: 1_000, requestTimeoutMs: 2_000, keepAliveTimeoutMs: 1_000 },
  admission: { maxInflightUpgrades: 0, upgradesPerSecond: 0 },
};

export interface FuzzTarget {
  readonly port: number;
  /** null when the proxy runs and answers /healthz; else why not. */
  alive(): Promise<string | null>;
}

export interface FuzzOptions {
  readonly seed: number;
  readonly cases: number;
  /** First case number (default 0); with cases: 1, replays one case. */
  readonly from?: number;
  /** Clients at once (default 24). */
  readonly concurrency?: number;
  /** Cases between invariant checks (default 400). */
  readonly batch?: number;
  /** Keep this many failures (default 10); the run stops there unless keepGoing. */
  readonly maxFailures?: number;
  /** Run every case even past maxFailures (counts still grow): side-by-side runs. */
  readonly keepGoing?: boolean;
  readonly onBatch?: (done: number, failures: number) => void;
  /** Each case as it finishes, with what its client read (replays print it). */
  readonly onCase?: (c: FuzzCase, received: string) => void;
}

/** smuggled: a request no client claims or from another client's bytes; xff: not exactly one X-Forwarded-For equal to the client; crossed: a client read another's answer; died. */
export type FailureKind = 'smuggled' | 'xff' | 'crossed' | 'died';

export interface FuzzFailure {
  readonly caseIndex: number | null;
  readonly invariant: 'a' | 'b' | 'c';
  readonly kind: FailureKind;
  readonly detail: string;
  /** describeCase() of the case, when one is to blame. */
  readonly replay: string;
}

export interface FuzzReport {
  readonly cases: number;
  readonly ms: number;
  readonly backendRequests: number;
  readonly failures: FuzzFailure[];
  /** Every failure counted by kind (past maxFailures too). */
  readonly counts: Record<FailureKind, number>;
  /** Referee refusal reason -> how often the proxy forwarded such bytes anyway, and one case. */
  readonly leniencies: Map<string, { count: number; example: number }>;
}

/** Whether a forwarded target can have come from the client's bytes (absolute-form and room prefixes are rewritten). */
function targetFrom(target: string, stream: string): boolean {
  if (stream.includes(target)) return true;
  if (target.startsWith('/') && (stream.includes(target.slice(1)) || target === '/')) return true;
  // The gateway forwards the canonical form of a target (src/http/target.ts: escapes decoded, dot
  // segments resolved, slashes merged), perhaps with its per-tab prefix stripped: the target came
  // from the client when one of the client's own targets comes to it that way.
  // The scheme in any case (RFC 3986 3.1), as the gateway reads it.
  for (const m of stream.matchAll(/(?:https?:\/\/[^/\s?]*)?(\/[^\s]*)/gi)) {
    const c = canonicalTarget(m[1] as string);
    if (!c.ok) continue;
    if (c.url === target || c.url.replace(/^\/r\/[^/?]+(?=\/)/, '') === target) return true;
  }
  return false;
}

const ECHO_FOR = /X-Echo-For: ([^\r\n]*)/g;
const OWNER = /X-Owner: (127\.[0-9]+\.[0-9]+\.[0-9]+-[0-9a-f]{8})/g;

function crossedProblems(c: FuzzCase, received: string): string[] {
  const p: string[] = [];
  // The echo's last element is the client the proxy saw (earlier ones are the client's own claims,
  // which some proxies keep).
  for (const m of received.matchAll(ECHO_FOR)) {
    const last = (m[1] as string).split(/,| \| /).at(-1)?.trim();
    if (last !== c.address) p.push(`the client read an answer to X-Forwarded-For ${JSON.stringify(m[1])}`);
  }
  for (const m of received.matchAll(OWNER)) {
    const marker = m[1] as string;
    const addr = marker.slice(0, marker.lastIndexOf('-'));
    if (marker === ownerMarker(addr) && addr !== c.address) p.push(`the client read the scripted answer meant for ${addr}`);
  }
  return p;
}

/** How many final answers a well-behaved proxy gives to a valid stream (null: the stream is not one). */
function expectedAnswers(c: FuzzCase): number | null {
  if (c.kind === 'response') return 1;
  const parsed = parseRequests(Buffer.from(c.parts.join(''), 'latin1'));
  if (parsed.error) return null;
  // After an upgrade the rest is the tunnel's: the answers up to the 101 are all there is to wait for.
  if (parsed.messages.at(-1)?.upgrade) return parsed.messages.length;
  if (parsed.incomplete) return null;
  return parsed.messages.length;
}

/** Final answers in a client's stream (a 101 is final too). */
const finals = (text: string): number => [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].filter((m) => Number(m[1]) >= 200 || m[1] === '101').length;

/** Plays one case: the client writes its bytes from its address and reads until done. */
export async function runCase(port: number, c: FuzzCase): Promise<{ received: string }> {
  const want = expectedAnswers(c);
  const r = await exchange(port, c.parts, {
    localAddress: c.address,
    gapMs: c.gapMs,
    timeoutMs: 3_000,
    ...(want !== null && want > 0 ? { until: (b: Buffer) => finals(b.toString('latin1')) >= want, graceMs: 30 } : {}),
  });
  return { received: r.text };
}

/** Waits until the backend's request count holds still for `quietMs` (at most `maxMs`). */
async function settle(backend: RawBackend, quietMs = 150, maxMs = 3_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  let last = -1;
  while (Date.now() < deadline) {
    const n = backend.requests.length;
    if (n === last) return;
    last = n;
    await new Promise((r) => setTimeout(r, quietMs));
  }
}

/**
 * Runs cases [from, from + cases) of `seed` against `target`, which proxies to `backend`
 * (its answers are replaced for the run: echo, or a case's scripted bytes by client address).
 * Clients run continuously; every `batch` finished cases the backend's requests so far are
 * attributed and checked, and the proxy's health is asked.
 */
export async function runFuzz(target: FuzzTarget, backend: RawBackend, o: FuzzOptions): Promise<FuzzReport> {
  const started = Date.now();
  const from = o.from ?? 0;
  const total = o.cases;
  const concurrency = o.concurrency ?? 24;
  const batchSize = o.batch ?? 400;
  const maxFailures = o.maxFailures ?? 10;
  const failures: FuzzFailure[] = [];
  const leniencies = new Map<string, { count: number; example: number }>();
  let backendRequests = 0;

  // Cases by address, from generation until their backend requests have surely arrived.
  const live = new Map<string, FuzzCase>();
  const scripts = new Map<string, Answer>();
  const forwardedTo = new Map<string, number>();
  const lastOnConn = new Map<number, FuzzCase>();
  backend.answer = scriptedByClient(scripts);
  backend.upgrade = scriptedByClient(scripts, accept101);
  backend.forget();

  const counts: Record<FailureKind, number> = { smuggled: 0, xff: 0, crossed: 0, died: 0 };
  const fail = (c: FuzzCase | null, kind: FailureKind, detail: string): void => {
    counts[kind]++;
    const invariant = kind === 'crossed' ? 'b' : kind === 'died' ? 'c' : 'a';
    if (failures.length < maxFailures) failures.push({ caseIndex: c?.index ?? null, invariant, kind, detail, replay: c ? describeCase(o.seed, c) : '' });
  };
  const stop = (): boolean => dead !== null || (!o.keepGoing && failures.length >= maxFailures);

  // (a) every backend request belongs to the client its X-Forwarded-For names, from its bytes.
  const attribute = (): void => {
    for (const r of backend.requests) {
      if (isHealthProbe(r)) continue;
      backendRequests++;
      const owner = live.get(claimedClient(r) ?? '');
      if (!owner) {
        // Which case sent it: the live cases whose bytes hold that target (the fewer, the surer);
        // else the case whose request came before it on the same backend connection.
        const senders = [...live.values()].filter((c) => targetFrom(r.target, c.parts.join('')));
        const blame = senders.length === 1 ? (senders[0] as FuzzCase) : (lastOnConn.get(r.conn) ?? null);
        const who =
          senders.length > 0
            ? `; cases whose bytes hold that target: ${senders.slice(0, 5).map((c) => c.index).join(', ')}${senders.length > 5 ? ` and ${senders.length - 5} more` : ''}`
            : blame
              ? `, after case ${blame.index}'s request on the same backend connection`
              : '';
        fail(blame, 'smuggled', `SMUGGLED: the backend parsed ${r.method} ${JSON.stringify(r.target)} with X-Forwarded-For ${JSON.stringify(r.xff)}${who}`);
        continue;
      }
      lastOnConn.set(r.conn, owner);
      if (r.xff.length !== 1 || r.xff[0] !== owner.address) fail(owner, 'xff', `X-Forwarded-For ${JSON.stringify(r.xff)} on ${r.method} ${r.target}, expected ["${owner.address}"]`);
      if (!targetFrom(r.target, owner.parts.join(''))) fail(owner, 'smuggled', `SMUGGLED: ${r.method} ${JSON.stringify(r.target)} is not in the client's bytes`);
      forwardedTo.set(owner.address, (forwardedTo.get(owner.address) ?? 0) + 1);
    }
    backend.forget();
  };

  // A finished case is retired one checkpoint later (its late requests have arrived by then):
  // the differential is counted, its address forgotten.
  let finished: FuzzCase[] = [];
  let retiring: FuzzCase[] = [];
  const retire = (cases: readonly FuzzCase[]): void => {
    for (const c of cases) {
      if (c.kind === 'request') {
        const ref = parseRequests(Buffer.from(c.parts.join(''), 'latin1'));
        if (ref.error && (forwardedTo.get(c.address) ?? 0) > ref.messages.length) {
          const l = leniencies.get(ref.error.reason) ?? { count: 0, example: c.index };
          l.count++;
          leniencies.set(ref.error.reason, l);
        }
      }
      live.delete(c.address);
      scripts.delete(c.address);
      forwardedTo.delete(c.address);
    }
  };

  let dead: string | null = null;
  const checkpoint = async (): Promise<void> => {
    attribute();
    retire(retiring);
    retiring = finished;
    finished = [];
    dead = await target.alive();
    if (dead) fail(null, 'died', `after ${done} cases: ${dead}`);
    o.onBatch?.(done, failures.length);
  };

  let next = from;
  let done = 0;
  let checking: Promise<void> = Promise.resolve();
  await Promise.all(
    Array.from({ length: Math.min(concurrency, total) }, async () => {
      while (next < from + total && !stop()) {
        const c = generateCase(o.seed, next++);
        live.set(c.address, c);
        if (c.answer !== null) scripts.set(c.address, { bytes: c.answer, close: c.closeAfterAnswer });
        const { received } = await runCase(target.port, c);
        o.onCase?.(c, received);
        // (b) no client reads another's bytes.
        for (const p of crossedProblems(c, received)) fail(c, 'crossed', p);
        finished.push(c);
        if (++done % batchSize === 0) {
          checking = checking.then(checkpoint);
          await checking;
        }
      }
    }),
  );
  await checking;
  await settle(backend);
  attribute();
  retire([...retiring, ...finished]);
  if (dead === null) {
    dead = await target.alive();
    if (dead) fail(null, 'died', `at the end: ${dead}`);
  }
  backend.forget();
  return { cases: done, ms: Date.now() - started, backendRequests, failures, counts, leniencies };
}
