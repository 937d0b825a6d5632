// One backend fetch of the page cache and the clients waiting on it: the first request for a key
// (or a refresh of a stale answer, in the background or not) starts it, later requests for the
// same key join it (coalescing, bounded by cache.maxWaiters). When the answer's head arrives it is
// judged once: stored (every client gets it, streamed as it arrives, and clients may still join
// while the body streams), shared but not stored (storable but too big: the clients already
// waiting get it), or for the first client only (anything the backend did not declare storable:
// the others go to the backend themselves). A failure, or a 5xx, with a stale copy still within its
// stale-if-error window gives every client that copy instead.
import { REFUSALS, type Refusal } from '../http/refusals.js';
import type CachePolicy from 'http-cache-semantics';
import type { Exchange } from '../forward/forwarder.js';
import { ownerFields, type Owner } from '../http/ownership.js';
import { locationTarget, rewriteAnswerFields, type LocationTarget } from '../http/location.js';
import { startRequest } from '../forward/request-count.js';
import type { Backend } from '../runtime/pool.js';
import { fetchFromBackend, type Fetch, type FetchedHead } from './backend-fetch.js';
import type { CacheClient } from './cache-client.js';
import type { CacheOutcome } from './cache-metrics.js';
import type { FillContext, FillHandle, FillSpec } from './fill-context.js';
import { headerRecord } from './request-rules.js';
import { HeadScanner, injectable, injectedFields, pairsOf } from '../http/pin-inject.js';
import { unstorable, variantOf, varyNames, type StoredAnswer } from './stored-answers.js';

/** A page held until the pin's scanner decides: the scanner and the backend's head. */
interface PinScan {
  readonly scanner: HeadScanner;
  readonly head: FetchedHead;
}

/** A client of a fill, and how its answer is described. */
interface Waiter {
  readonly client: CacheClient;
  /** Cache-Status fwd= of this client's request (uri-miss, vary-miss, stale, request). */
  readonly fwd: string;
  /** It joined another's fetch. */
  readonly collapsed: boolean;
  /** Waiting for 'drain' before the fill reads on (answers not being stored). */
  draining: boolean;
}

// The one reason an answer is not stored for which the clients already waiting may still share
// it: the backend said it may be stored and shared, it is only too big for this cache. Any other
// answer may be one client's (it may depend on anything of the request, its address included),
// so each waiting client asks the backend itself, as Varnish's waiting list does.
const SHAREABLE = new Set(['too-large']);
// Reasons after which requests for the key stop waiting on each other for a while (the answer
// will not be stored next time either); a failing backend's 5xx is not one of them.
const REMEMBERED = new Set(['set-cookie', 'not-storable', 'no-cache', 'vary-star', 'no-freshness', 'too-large', 'field-twice']);

export class Fill implements FillHandle, Exchange {
  private readonly waiters: Waiter[] = [];
  private fetch: Fetch | null = null;
  private head: FetchedHead | null = null;
  /** The answer is being stored: its body is kept, and clients may still join. */
  private storing = false;
  private chunks: Buffer[] = [];
  private bytes = 0;
  private policy: CachePolicy | null = null;
  private record: Record<string, string> = {};
  private cacheStatus = '';
  private finished = false;
  private draining = 0;
  private noStore = false;
  /** The backend's status, once its head arrived. */
  private backendStatus: number | null = null;
  /** Releases the backend's in-flight count and counts the fetch under its status; at the fetch's end. */
  private backendDone: ((status: number | null) => void) | null = null;
  /** proxy.rewriteLocation's rewrite for the backend of this attempt, or null. */
  private location: LocationTarget | null = null;
  /** room.pinInject: an HTML page whose head waits for the pin's scanner, or null. */
  private scan: PinScan | null = null;

  constructor(
    private readonly cx: FillContext,
    readonly spec: FillSpec,
  ) {}

  /** Clients waiting now. */
  get size(): number {
    return this.waiters.length;
  }

  /** Whether a client arriving now can still be given this fill's answer from its start. */
  get joinable(): boolean {
    return !this.finished && (this.head === null || this.storing);
  }

  /** Purged while under way: the answer still goes to the clients waiting, it is not stored. */
  doNotStore(): void {
    this.noStore = true;
  }

  add(client: CacheClient, fwd: string, collapsed: boolean): void {
    const w: Waiter = { client, fwd, collapsed, draining: false };
    this.waiters.push(w);
    // Joining while the body streams: the head and the body so far first.
    if (this.head !== null && this.storing) {
      if (!this.variantMatches(w)) return this.pass(w, 'vary-miss');
      this.startClient(w);
      for (const c of this.chunks) client.w.write(c);
    }
  }

  /** Asks the room's backend (src/forward/forwarder.ts: placement, passive health, retries). */
  start(): void {
    this.cx.forwarder.route(this);
  }

  // The forwarding core's Exchange: a fill goes on for the clients still waiting and for the
  // store, so it is never "gone"; it has no room key source of its own.
  readonly path = 'cache-fill';
  /** Never set: a fill's failures are not tried again after a reset (src/forward/forwarder.ts). */
  freshConnection = false;
  readonly source = null;
  get room(): string | null {
    return this.spec.room;
  }
  gone(): boolean {
    return false;
  }
  refuse(refusal: Refusal, counted: boolean): void {
    this.failAll(refusal, cacheDetail(refusal), counted);
  }

  send(backend: Backend, owner: Owner | null, attempt: number): void {
    const { cx, spec } = this;
    const done = startRequest(cx.pool, cx.metrics, backend.id);
    this.backendDone = done;
    const origin = spec.origin;
    this.location = origin === null ? null : locationTarget(backend.config, origin.scheme, origin.host);
    // The room and the epoch of this attempt's placement, as every proxied request carries them.
    const headers = [...spec.headers, ...ownerFields(owner)];
    // A refresh asks whether the stored answer still holds (304) with its validators.
    if (spec.stale !== undefined) {
      const h = spec.stale.policy.revalidationHeaders(spec.policyRequest);
      for (const name of ['if-none-match', 'if-modified-since']) {
        const v = h[name];
        if (typeof v === 'string') headers.push(name, v);
      }
    }
    this.fetch = fetchFromBackend(backend, spec.path, headers, cx.fetch, {
      connected: () => cx.forwarder.connected(backend),
      // The in-flight count holds until the body is over (finish()), as on the page paths.
      head: (h) => this.onHead(h),
      data: (chunk) => this.onData(chunk),
      end: () => this.onEnd(),
      failed: (err, afterHead) => {
        if (afterHead) {
          cx.forwarder.lost(this, backend, err.code === 'EBADANSWER' ? 'bad-response' : err);
          return this.cutAll();
        }
        // The request that started the fetch is counted once, under the backend, with the status
        // roomgate answered it (as the page paths count their own 502/504).
        this.backendDone = null;
        if (err.code === 'EBADANSWER') return cx.forwarder.badAnswer(this, backend, err.message, done);
        cx.forwarder.failed(this, { backend, attempt, err, done });
      },
    });
  }

  private onHead(h: FetchedHead): void {
    const { cx, spec } = this;
    this.backendStatus = h.status;
    // Before anything reads the fields: what is stored, relayed, or merged by a 304 is the answer
    // as the page paths relay it (the same rule, src/http/location.ts).
    if (this.location !== null) rewriteAnswerFields(h.headers, this.location);
    const now = cx.now();
    const stale = spec.stale;
    const record = headerRecord(h.headers);
    // The stored answer still holds: it is served (and kept) with its fields brought up to date.
    if (h.status === 304 && stale !== undefined) {
      this.fetch?.abort();
      const { policy, modified, matches } = stale.policy.revalidatedPolicy(spec.policyRequest, { status: 304, headers: record });
      if (!matches) {
        // A 304 for another version (its ETag or Last-Modified is not the copy's): the copy is
        // not confirmed, and this answer has no body. The copy goes; each client asks again itself.
        cx.forget(spec);
        cx.cm.fills.inc({ result: 'failed' });
        for (const w of [...this.waiters]) this.pass(w, 'stale');
        return this.finish();
      }
      if (!modified) {
        const updated = cx.refreshed(spec, stale, policy, h.headers, now);
        cx.cm.fills.inc({ result: 'revalidated' });
        return this.serveAll(updated, `fwd=stale; fwd-status=304`, 'miss');
      }
    }
    if (h.status >= 500 && stale !== undefined && now < stale.sieUntil) {
      this.fetch?.abort();
      cx.cm.fills.inc({ result: 'stale-if-error' });
      return this.staleForAll(stale, h.status);
    }
    // room.pinInject: an HTML page of a room is judged, stored and relayed as it will be sent, the
    // room's pin in it (the key has the room), once the scanner has decided.
    const tags = cx.pinTags;
    if (tags !== null && spec.room !== null && injectable(h.status, pairsOf(h.headers))) {
      this.scan = { scanner: new HeadScanner(tags(spec.room)), head: h };
      return;
    }
    this.accept(h, record, now);
  }

  /** The answer as it will be stored and sent: judged, then its head to every client waiting. */
  private accept(h: FetchedHead, record: Record<string, string>, now: number): void {
    const { cx, spec } = this;
    this.head = h;
    this.record = record;
    this.policy = new cx.Policy(spec.policyRequest, { status: h.status, headers: record }, { shared: true });
    const why = unstorable(this.policy, h.status, h.headers, record, cx.config, h.length);
    this.storing = why === null;
    const stored = this.storing ? '; stored' : `; detail=${why ?? ''}`;
    this.cacheStatus = `fwd-status=${h.status}${stored}`;
    if (why !== null) {
      cx.cm.fills.inc({ result: 'not-stored' });
      if (REMEMBERED.has(why)) cx.rememberUncacheable(spec.key, now);
      if (!this.storing) cx.leave(this);
    }
    const share = why === null || SHAREABLE.has(why);
    for (const w of [...this.waiters]) {
      if (w.collapsed && !share) this.pass(w, 'uncacheable');
      else if (w.collapsed && !this.variantMatches(w)) this.pass(w, 'vary-miss');
      else this.startClient(w);
    }
    if (this.waiters.length === 0 && !this.storing) {
      // Nobody to give it to (a background refresh of an answer that is no longer storable).
      this.fetch?.abort();
      this.finish();
    }
  }

  private onData(chunk: Buffer): void {
    const scan = this.scan;
    if (scan === null) return this.deliver(chunk);
    const out = scan.scanner.feed(chunk);
    if (out !== null) this.decided(out);
  }

  /** The pin's scanner decided (or the body ended first): the answer with the tags or without, then the bytes kept. */
  private decided(kept: readonly Buffer[]): void {
    const { scanner, head } = this.scan as PinScan;
    this.scan = null;
    // Tags in: the page is no longer the backend's bytes, so its validators go (docs/per-tab-rooms.md).
    const h = scanner.injected ? { ...head, headers: injectedFields(head.headers, null), length: head.length === null ? null : head.length + scanner.added } : head;
    this.accept(h, headerRecord(h.headers), this.cx.now());
    for (const piece of kept) if (!this.finished) this.deliver(piece);
  }

  private deliver(chunk: Buffer): void {
    if (this.finished || this.abandoned()) return;
    if (this.storing) {
      this.bytes += chunk.length;
      if (this.bytes > this.cx.config.maxObjectBytes) {
        // Too big after all (no Content-Length said so): relayed, not stored.
        this.storing = false;
        this.chunks = [];
        this.cx.cm.fills.inc({ result: 'not-stored' });
        this.cx.rememberUncacheable(this.spec.key, this.cx.now());
        this.cx.leave(this);
      } else this.chunks.push(chunk);
    }
    for (const w of this.waiters) {
      const ok = w.client.w.write(chunk);
      // Not stored: the backend is read no faster than the slowest client takes it.
      if (!ok && !this.storing && !w.draining && !w.client.w.gone) {
        w.draining = true;
        if (this.draining++ === 0) this.fetch?.pause();
        w.client.w.onDrain(() => {
          w.draining = false;
          if (--this.draining === 0 && !this.finished && !this.abandoned()) this.fetch?.resume();
        });
      }
    }
  }

  private onEnd(): void {
    if (this.scan !== null) this.decided(this.scan.scanner.flush());
    if (this.finished) return;
    const { cx, spec } = this;
    const h = this.head;
    if (this.storing && !this.noStore && h !== null && this.policy !== null) {
      cx.store(spec, h, this.record, this.policy, Buffer.concat(this.chunks, this.bytes));
      cx.cm.fills.inc({ result: 'stored' });
    }
    for (const w of this.waiters) {
      w.client.w.end();
      w.client.settle(this.outcome(w), h?.status ?? null);
    }
    this.finish();
  }

  /**
   * An answer not being stored whose clients have all gone: the backend request is given up
   * (as the page path gives it up when its client leaves). True when it was.
   */
  private abandoned(): boolean {
    if (this.storing || this.waiters.length === 0 || !this.waiters.every((w) => w.client.w.gone)) return false;
    this.fetch?.abort();
    for (const w of this.waiters) w.client.settle(this.outcome(w), null);
    this.finish();
    return true;
  }

  private startClient(w: Waiter): void {
    const h = this.head as FetchedHead;
    if (!w.collapsed) w.client.relayedOwnFetch = true;
    const status = `roomgate; fwd=${w.fwd}; ${this.cacheStatus}${w.collapsed ? '; collapsed' : ''}`;
    w.client.w.start(h.status, h.reason, [...h.headers, ...w.client.extra(status)], h.length);
  }

  private variantMatches(w: Waiter): boolean {
    const names = varyNames(this.record);
    return variantOf(names, w.client.fields) === variantOf(names, this.spec.fields);
  }

  /** This client goes to the backend itself (through its page path), not through this fill. */
  private pass(w: Waiter, detail: string): void {
    this.waiters.splice(this.waiters.indexOf(w), 1);
    w.client.pass(`roomgate; fwd=bypass; detail=${detail}`);
  }

  private outcome(w: Waiter): CacheOutcome {
    return w.collapsed ? 'coalesced' : 'miss';
  }

  private serveAll(a: StoredAnswer, cacheStatus: string, outcome: CacheOutcome): void {
    for (const w of this.waiters) {
      w.client.stored(a, this.cx.ageOf(a), `roomgate; ${cacheStatus}${w.collapsed ? '; collapsed' : ''}`, w.collapsed ? 'coalesced' : outcome);
    }
    this.finish();
  }

  private staleForAll(stale: StoredAnswer, status: number): void {
    // Until a refresh succeeds, requests served this copy within grace are told the backend fails.
    stale.failedStatus = status;
    const past = Math.max(1, Math.ceil((this.cx.now() - stale.freshUntil) / 1000));
    this.serveAll(stale, `fwd=stale; fwd-status=${status}; ttl=-${past}; detail=stale-if-error`, 'stale-if-error');
  }

  /** No answer from the backend: a stale copy within its stale-if-error window, else roomgate's own. */
  /** `counted`: the fetch was counted under its backend with this status (the first client's answer). */
  private failAll(refusal: Refusal, detail: string, counted = false): void {
    const status = REFUSALS[refusal.code].status;
    const stale = this.spec.stale;
    if (stale !== undefined && this.cx.now() < stale.sieUntil) {
      this.cx.cm.fills.inc({ result: 'stale-if-error' });
      return this.staleForAll(stale, status);
    }
    this.cx.cm.fills.inc({ result: 'failed' });
    for (const w of this.waiters) {
      if (counted && !w.collapsed) w.client.relayedOwnFetch = true;
      w.client.own(refusal, `roomgate; fwd=${w.fwd}; fwd-status=${status}; detail=${detail}${w.collapsed ? '; collapsed' : ''}`, this.outcome(w));
    }
    this.finish();
  }

  private cutAll(): void {
    for (const w of this.waiters) {
      w.client.w.cut();
      w.client.settle(this.outcome(w), null);
    }
    this.finish();
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.backendDone?.(this.head?.status ?? this.backendStatus);
    this.backendDone = null;
    this.waiters.length = 0;
    this.chunks = [];
    this.cx.leave(this);
    this.cx.finished(this);
  }
}

/** The Cache-Status detail of a fill roomgate answered itself. */
function cacheDetail(refusal: Refusal): string {
  switch (refusal.code) {
    case 'no-room-key':
      return 'no-room';
    case 'no-backend':
    case 'room-moving':
      return 'no-backend';
    case 'bad-backend-answer':
      return 'bad-answer';
    case 'backend-unavailable':
    case 'backend-timeout':
      return refusal.detail ?? refusal.code;
    default:
      return 'routing';
  }
}
