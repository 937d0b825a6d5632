// Cross-room push (docs/push.md): a message for a room is POSTed to the backend that holds it, as
// the placement says. Never places a room: a room with no placement is not live; a room whose
// backend cannot take it now (down, drained past its deadline, in maintenance) is not delivered
// elsewhere, the caller is told to retry. The backend gets the room's ownership fields, a message
// id and the sender, so it can refuse a message for a room it no longer holds.
import { randomUUID } from 'node:crypto';
import type { BackendTls } from '../backends/backend-tls.js';
import { backendPost, maybeSent } from './backend-call.js';
import type { CallClaims } from '../http/call-proof.js';
import { ownerFields } from '../http/ownership.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { PlacementRecord } from '../placement/store.js';
import type { BackendCalls } from './backend-calls.js';
import type { Placer } from './placer.js';
import type { PushLog } from './push-log.js';
import type { Backend, BackendPool } from './pool.js';

export interface PushOptions {
  readonly placer: Placer;
  readonly pool: BackendPool;
  readonly backendTls: BackendTls;
  /** Backend path messages are POSTed to. */
  readonly path: string;
  /** Signs every call for its backend (src/http/call-proof.ts) and records it. */
  readonly calls: BackendCalls;
  readonly timeoutMs: number;
  /** Retry-After (s) of a 503. */
  readonly retryAfterS: number;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** Rooms with live sockets (any gateway), whose key starts with `prefix` when given; at most `cap` + 1 (to see there are more). */
  readonly liveRooms: (prefix: string | undefined, cap: number) => Promise<string[]>;
  /** A fan-out reaches at most this many rooms (else it is refused: narrow it with a prefix). */
  readonly maxFanoutRooms: number;
  /** push.requireLive: a single-room push needs live sockets of the room, as `isLive` says. */
  readonly requireLive: boolean;
  /** Whether the room has live sockets through any gateway (presence). */
  readonly isLive: (room: string) => Promise<boolean>;
  /** Where each call is noted for the status page. */
  readonly log: PushLog;
}

export type PushOutcome =
  /**
   * The backend took it (2xx). `movedFrom`: the room moved between the call and the delivery; the
   * first backend refused it (or could not be reached) and this one, the room's new owner, took it.
   */
  | {
      readonly kind: 'delivered';
      readonly id: string;
      readonly backend: string;
      readonly epoch: number;
      readonly movedFrom?: { readonly backend: string; readonly epoch: number };
      /** How many sockets the backend handed it to, when its answer said (X-Roomgate-Sockets). */
      readonly sockets?: number;
    }
  /** No placement: the room is not live anywhere. */
  | { readonly kind: 'not-live' }
  /**
   * The room's backend cannot take it now (down, drained, maintenance, refused the connection).
   * `sent`: the message may have reached it all the same (the connection broke after it was made).
   */
  | { readonly kind: 'unavailable'; readonly backend: string | null; readonly retryAfterS: number; readonly why: string; readonly sent: boolean }
  /** The backend answered something else than 2xx. */
  | { readonly kind: 'refused'; readonly id: string; readonly backend: string; readonly status: number }
  /** No answer in time. */
  | { readonly kind: 'timeout'; readonly id: string; readonly backend: string }
  /**
   * The room moved while the message was on its way and the new owner did not take it either (or
   * it moved again): not delivered; the caller decides whether to send it again.
   */
  | { readonly kind: 'moved'; readonly id: string; readonly backend: string | null; readonly epoch: number | null };

/**
 * The receiver's optional word on a 2xx answer: how many sockets it handed the message to
 * (docs/push.md). A count is digits only, at most 9 of them; anything else (absent, repeated,
 * signed, fractional, too long) is no count.
 */
export const SOCKETS_FIELD = 'x-roomgate-sockets';
const COUNT = /^[0-9]{1,9}$/;

/** The count a backend's answer gives, or undefined. */
export function socketCount(value: string | string[] | undefined): number | undefined {
  return typeof value === 'string' && COUNT.test(value) ? Number(value) : undefined;
}

/** The fields of a receiver's answer kept on the outcome: its count, when it said one. */
function withCount(sockets: number | undefined): { sockets?: number } {
  return sockets === undefined ? {} : { sockets };
}

// Connection errors after which nothing reached the backend.

/** What became of a fan-out at one backend. */
export interface FanoutPart {
  readonly rooms: number;
  readonly result: 'delivered' | 'refused' | 'timeout' | 'unavailable';
  /** The backend's status when it answered. */
  readonly status?: number;
  /** How many sockets the backend handed it to, when its 2xx answer said (X-Roomgate-Sockets). */
  readonly sockets?: number;
}

export type FanoutOutcome =
  | { readonly kind: 'sent'; readonly id: string; readonly rooms: number; readonly backends: Readonly<Record<string, FanoutPart>>; readonly unplaced: number }
  /** More live rooms than push.maxFanoutRooms. */
  | { readonly kind: 'too-many'; readonly max: number };

/** The backend said no (non-2xx), or nothing reached it: the message is surely not in the room's state. */
function notDelivered(out: PushOutcome): boolean {
  return out.kind === 'refused' || (out.kind === 'unavailable' && !out.sent);
}

/** What became of one POST to a backend. */
interface Sent {
  readonly result: FanoutPart['result'];
  readonly status?: number;
  readonly why?: string;
  readonly sent?: boolean;
  readonly sockets?: number;
}

export class PushDelivery {
  constructor(private readonly o: PushOptions) {}

  async deliver(room: string, body: Buffer, sender: string, nowMs: number): Promise<PushOutcome> {
    const t0 = performance.now();
    const out = await this.attempt(room, body, sender, nowMs);
    const ms = performance.now() - t0;
    this.o.metrics.pushes.inc({ result: out.kind });
    this.o.metrics.pushSeconds.observe({ result: out.kind }, ms / 1000);
    const backend = 'backend' in out && out.backend !== null ? out.backend : '';
    const sockets = out.kind === 'delivered' ? (out.sockets ?? null) : null;
    this.o.log.add({ at: new Date(nowMs).toISOString(), call: 'room', target: room, result: out.kind, backend, sender, ms: Math.round(ms), sockets });
    return out;
  }

  /**
   * One message to every live room (whose key starts with `prefix`): one POST per backend, with
   * the rooms it holds and each one's epoch. Rooms whose backend cannot take it now are counted
   * as unplaced; nothing is placed.
   */
  async fanOut(prefix: string | undefined, message: string, sender: string, nowMs: number): Promise<FanoutOutcome> {
    const t0 = performance.now();
    const out = await this.fanOutOnce(prefix, message, sender, nowMs);
    const backends = out.kind === 'sent' ? Object.keys(out.backends).length : 0;
    // The sum of the counts the backends gave; none when no backend gave one.
    const counts = out.kind === 'sent' ? Object.values(out.backends).flatMap((b) => (b.sockets === undefined ? [] : [b.sockets])) : [];
    this.o.log.add({
      at: new Date(nowMs).toISOString(),
      call: 'fanout',
      target: `${prefix ?? ''}*`,
      result: out.kind,
      backend: out.kind === 'sent' ? `${backends} backend${backends === 1 ? '' : 's'}, ${out.rooms - out.unplaced} rooms` : '',
      sender,
      ms: Math.round(performance.now() - t0),
      sockets: counts.length === 0 ? null : counts.reduce((a, b) => a + b, 0),
    });
    return out;
  }

  private async fanOutOnce(prefix: string | undefined, message: string, sender: string, nowMs: number): Promise<FanoutOutcome> {
    const { o } = this;
    const rooms = await o.liveRooms(prefix, o.maxFanoutRooms);
    if (rooms.length > o.maxFanoutRooms) return { kind: 'too-many', max: o.maxFanoutRooms };
    const byBackend = new Map<string, { room: string; epoch: number }[]>();
    let unplaced = 0;
    for (const room of rooms) {
      const { decision, placement } = await o.placer.explain(room, nowMs, false);
      if (placement === null || !('route' in decision) || decision.route !== placement.backend || !o.pool.get(placement.backend)) {
        unplaced++;
        continue;
      }
      let list = byBackend.get(placement.backend);
      if (!list) byBackend.set(placement.backend, (list = []));
      list.push({ room, epoch: placement.epoch });
    }
    const id = randomUUID();
    const backends: Record<string, FanoutPart> = {};
    await Promise.all(
      [...byBackend].map(async ([backendId, list]) => {
        const body = Buffer.from(`{"rooms":${JSON.stringify(list)},"message":${message}}`);
        const call = { purpose: 'push-fanout', destination: backendId, id, room: '', epoch: '', sender, body } as const;
        const out = await this.send(o.pool.get(backendId) as Backend, call, ['X-Roomgate-Fanout', '1', 'X-Roomgate-Message-Id', id, 'X-Roomgate-Sender', sender, ...o.calls.sign(call)]);
        o.metrics.pushes.inc({ result: out.result });
        backends[backendId] = { rooms: list.length, ...out };
      }),
    );
    return { kind: 'sent', id, rooms: rooms.length, backends, unplaced };
  }

  private async attempt(room: string, body: Buffer, sender: string, nowMs: number): Promise<PushOutcome> {
    const id = randomUUID();
    const first = await this.target(room, nowMs, false);
    if (first.kind !== 'target') return first.outcome;
    const out = await this.post(first.backend, room, first.epoch, id, body, sender);
    // Delivered, or maybe delivered (a timeout, a connection broken after it was made): never sent
    // twice. At most once per call.
    if (!notDelivered(out)) return out;
    // It surely did not reach the room's state. If the room moved since it was resolved (its
    // backend died and a client re-placed it through another gateway, or the first backend no
    // longer holds it), re-resolve once from the store and deliver to the new owner.
    const second = await this.target(room, Date.now(), true);
    const p = second.placement;
    if (p === null || (p.epoch === first.epoch && p.backend === first.backend.id)) return out;
    if (second.kind !== 'target') return { kind: 'moved', id, backend: p.backend, epoch: p.epoch };
    const again = await this.post(second.backend, room, second.epoch, id, body, sender);
    if (again.kind === 'delivered') return { ...again, movedFrom: { backend: first.backend.id, epoch: first.epoch } };
    if (!notDelivered(again)) return again;
    return { kind: 'moved', id, backend: second.backend.id, epoch: second.epoch };
  }

  /**
   * Where a push for the room goes now, without placing it: its placed backend when routing would
   * send the room's requests there, else the outcome to answer. `fresh`: read the placement from
   * the store, not this gateway's cache.
   */
  private async target(
    room: string,
    nowMs: number,
    fresh: boolean,
  ): Promise<
    | { readonly kind: 'target'; readonly backend: Backend; readonly epoch: number; readonly placement: PlacementRecord }
    | { readonly kind: 'answer'; readonly outcome: PushOutcome; readonly placement: PlacementRecord | null }
  > {
    // write=false: what routing would do now, without placing anything.
    const { decision, placement } = fresh ? await this.o.placer.explainFresh(room, nowMs) : await this.o.placer.explain(room, nowMs, false);
    if (placement === null) return { kind: 'answer', outcome: { kind: 'not-live' }, placement };
    if (this.o.requireLive) {
      const live = await this.o.isLive(room).catch(() => null);
      if (live === null) return { kind: 'answer', outcome: this.unavailable(placement.backend, 'presence cannot be read', false), placement };
      if (!live) return { kind: 'answer', outcome: { kind: 'not-live' }, placement };
    }
    const backend = this.o.pool.get(placement.backend);
    // The room lives where its placement says, or nowhere for a push: a decision to route it
    // elsewhere (its backend down or drained) would be a move, which only a client's request makes.
    if (!backend || !('route' in decision) || decision.route !== placement.backend) {
      const why = 'reject' in decision ? decision.reason : backend ? `backend ${backend.id} is ${backend.state(nowMs)}` : `backend ${placement.backend} is gone`;
      return { kind: 'answer', outcome: this.unavailable(placement.backend, why, false), placement };
    }
    return { kind: 'target', backend, epoch: placement.epoch, placement };
  }

  private unavailable(backend: string | null, why: string, sent: boolean): PushOutcome {
    return { kind: 'unavailable', backend, retryAfterS: this.o.retryAfterS, why, sent };
  }

  private async post(backend: Backend, room: string, epoch: number, id: string, body: Buffer, sender: string): Promise<PushOutcome> {
    const call = { purpose: 'push', destination: backend.id, id, room, epoch: String(epoch), sender, body } as const;
    const out = await this.send(backend, call, [...ownerFields({ room, epoch }), 'X-Roomgate-Message-Id', id, 'X-Roomgate-Sender', sender, ...this.o.calls.sign(call)]);
    switch (out.result) {
      case 'delivered':
        return { kind: 'delivered', id, backend: backend.id, epoch, ...withCount(out.sockets) };
      case 'refused':
        return { kind: 'refused', id, backend: backend.id, status: out.status ?? 0 };
      case 'timeout':
        return { kind: 'timeout', id, backend: backend.id };
      case 'unavailable':
        return this.unavailable(backend.id, out.why ?? 'unavailable', out.sent ?? true);
    }
  }

  /** One POST of the call's body to the backend's push path with these extra fields, recorded. */
  private send(backend: Backend, call: CallClaims, extra: readonly string[]): Promise<Sent> {
    const { o } = this;
    const { body } = call;
    const startedMs = Date.now();
    return new Promise((resolve) => {
      let settled = false;
      const done = (out: Sent): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const result = out.status ?? (out.result === 'timeout' ? 'timeout' : 'unreachable');
        o.calls.record({ backend: backend.id, call: call.purpose, id: call.id, room: call.room, result, startedMs });
        resolve(out);
      };
      // One connection per message: pushes are rare next to pages (src/runtime/backend-call.ts).
      const req = backendPost(backend, o.path, 'application/json', body.length, extra, o.backendTls);
      // One deadline for the connect and the answer.
      const timer = setTimeout(() => {
        req.destroy();
        done({ result: 'timeout' });
      }, o.timeoutMs);
      req.on('response', (res) => {
        res.resume();
        const status = res.statusCode ?? 0;
        done(status >= 200 && status < 300 ? { result: 'delivered', status, ...withCount(socketCount(res.headers[SOCKETS_FIELD])) } : { result: 'refused', status });
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        o.logger.warn({ backend: backend.id, err: err.code ?? err.message }, 'push: delivery failed');
        done({ result: 'unavailable', why: err.code ?? err.message, sent: maybeSent(err) });
      });
      req.end(body);
    });
  }
}
