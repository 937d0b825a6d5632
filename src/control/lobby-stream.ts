// The lobby as Server-Sent Events (GET /_roomgate/api/lobby/stream). One store subscription serves
// every client: 'lobby' events (from every gateway, through Redis pub/sub with several) name rooms
// whose presence or metadata changed; they are gathered for one interval, read once, and pushed to
// each client as one `rooms` event, filtered by the client's own lobby query.
//
// Only listed rooms are ever named (src/shared-data/listing.ts), without backend ids: a changed room
// that is not listed is left out of every frame, and gets `gone` only if the stream had shown it
// (it was listed, and then its metadata unlisted or deleted it), so a private key never appears.
//
// Frames, in order:
//   retry: 2000
//   event: snapshot     data: {rooms, total, nextOffset, online}   (the client's first lobby page)
//   event: rooms        data: {rooms: [LobbyRoom | {room, gone: true}], online}
//   event: unavailable  data: {error: {code: "store_unavailable", message}}
//   : ping              (a comment every 15 s, keeps proxies from timing the stream out)
// After `unavailable`, the next frame for that client is a fresh `snapshot` (the changes made
// meanwhile are lost with the store's events). A change set too large to read room by room is
// also sent as a fresh `snapshot`. A client replaces its whole list on every `snapshot`.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../observability/logger.js';
import { isListed, publicOnline, publicPage, publicRoom, type Listing, type PublicRoom } from '../shared-data/listing.js';
import type { LobbyPage, LobbyQuery, LobbyRoom, Online, SharedDataEvent, SharedDataStore } from '../shared-data/store.js';
import { Errors, errorMessage } from '../http/errors.js';
import { openEventStream } from './sse.js';

export interface LobbyStreamOptions {
  readonly store: SharedDataStore;
  /** Which rooms may be named (api.listRooms; the metadata's own listing is read with each room). */
  readonly listing: Listing;
  /** Changes are pushed at most this often (and at most this long after they happen). */
  readonly intervalMs: number;
  /** A `: ping` comment this often. */
  readonly pingMs: number;
  /** The `retry:` field (EventSource reconnection delay). */
  readonly retryMs: number;
  /** More changed rooms than this in one interval: every client gets a fresh snapshot instead. */
  readonly resyncThreshold: number;
  /** A client that does not read and has this much queued is disconnected. */
  readonly maxBufferedBytes: number;
  readonly logger: Logger;
}

/** A room in a `rooms` event: its current state, or gone from this client's view. */
export type RoomChange = PublicRoom | { readonly room: string; readonly gone: true };

/** Rooms remembered as shown (to send their `gone`); past it the oldest are forgotten. */
const MAX_SHOWN = 100_000;

interface Client {
  readonly res: ServerResponse;
  readonly query: LobbyQuery;
  /**
   * Sequence number taken when the client's latest snapshot read began; 0 after a failure, while
   * it waits for a retried snapshot (it then gets no `rooms` events: the snapshot covers them).
   */
  snapSeq: number;
  /** Its snapshot was written; frames go out directly. */
  ready: boolean;
  /** Frames produced while its snapshot was being read, sent right after it. */
  queued: string[];
  unavailableSent: boolean;
  /** The online counts last sent, to skip `rooms` events that would say nothing new. */
  lastOnline: string;
}

export class LobbyStream {
  private readonly clients = new Set<Client>();
  private readonly pending = new Set<string>();
  /** Listed rooms this stream has named (in a snapshot or a `rooms` event), oldest first. */
  private readonly shown = new Set<string>();
  private unsubscribe: (() => void) | null = null;
  private flushTimer: NodeJS.Timeout | null = null;
  private pingTimer: NodeJS.Timeout | null = null;
  private resyncTimer: NodeJS.Timeout | null = null;
  private flushing = false;
  private lastFlushStart = 0;
  private seq = 0;
  private closed = false;

  constructor(private readonly o: LobbyStreamOptions) {}

  get size(): number {
    return this.clients.size;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** Takes over the response: headers, then frames until close() or the client goes away. */
  open(req: IncomingMessage, res: ServerResponse, query: LobbyQuery): void {
    openEventStream(req, res);
    res.write(`retry: ${this.o.retryMs}\n\n`);
    const client: Client = { res, query, snapSeq: 0, ready: false, queued: [], unavailableSent: false, lastOnline: '' };
    this.clients.add(client);
    res.on('close', () => this.drop(client));
    this.start();
    this.o.logger.debug({ clients: this.clients.size }, 'lobby stream opened');
    void this.snapshot([client]);
  }

  /** Ends every stream and stops every timer. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const c of [...this.clients]) {
      this.clients.delete(c);
      c.res.end();
    }
    this.stop();
  }

  private start(): void {
    if (!this.unsubscribe) this.unsubscribe = this.o.store.subscribe((ev) => this.onEvent(ev));
    if (!this.pingTimer) {
      this.pingTimer = setInterval(() => {
        for (const c of this.clients) this.write(c, ': ping\n\n');
      }, this.o.pingMs);
      this.pingTimer.unref();
    }
  }

  /** No client left (or closed): no subscription, no timers. */
  private stop(): void {
    this.unsubscribe?.();
    this.unsubscribe = null;
    for (const t of [this.flushTimer, this.pingTimer, this.resyncTimer]) if (t) clearTimeout(t);
    this.flushTimer = this.pingTimer = this.resyncTimer = null;
    this.pending.clear();
    this.shown.clear();
  }

  private drop(c: Client): void {
    if (!this.clients.delete(c)) return;
    this.o.logger.debug({ clients: this.clients.size }, 'lobby stream closed');
    if (this.clients.size === 0) this.stop();
  }

  private onEvent(ev: SharedDataEvent): void {
    if (this.closed || this.clients.size === 0) return;
    if (ev.type === 'available') {
      if (!ev.available) this.markUnavailable([...this.clients]);
      else void this.snapshot(this.waiting());
      return;
    }
    if (ev.type !== 'lobby') return;
    for (const r of ev.rooms) this.pending.add(r);
    this.scheduleFlush();
  }

  /** At most one `rooms` event per interval: changes wait for the interval, then go out together. */
  private scheduleFlush(): void {
    if (this.flushTimer || this.flushing || this.pending.size === 0) return;
    // After a quiet period the first change waits a whole interval, so a burst becomes one event;
    // otherwise it waits for the rest of the interval since the last flush began.
    const sinceLast = Date.now() - this.lastFlushStart;
    const delay = sinceLast >= this.o.intervalMs ? this.o.intervalMs : this.o.intervalMs - sinceLast;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      void this.flush();
    }, delay);
    this.flushTimer.unref();
  }

  private async flush(): Promise<void> {
    if (this.closed || this.pending.size === 0) return;
    this.flushing = true;
    this.lastFlushStart = Date.now();
    const seq = ++this.seq;
    const rooms = [...this.pending];
    this.pending.clear();
    try {
      if (rooms.length > this.o.resyncThreshold) {
        // Too many to read one by one: fresh snapshots, one lobby read per distinct query.
        await this.snapshot([...this.clients].filter((c) => c.snapSeq !== 0));
        return;
      }
      let states: (LobbyRoom | null)[];
      let online: Online;
      try {
        if (!this.o.store.available) throw new Error('store unavailable');
        [states, online] = await Promise.all([Promise.all(rooms.map((r) => this.o.store.room(r))), this.o.store.online()]);
      } catch (err) {
        this.o.logger.debug({ err: errorMessage(err) }, 'lobby stream: store read failed');
        this.markUnavailable([...this.clients]);
        return;
      }
      if (this.closed) return;
      const named = this.publicStates(rooms, states);
      const pub = publicOnline(online);
      const onlineJson = JSON.stringify(pub);
      for (const c of this.clients) {
        // A client whose snapshot read began after this flush's changes happened already has them.
        // One waiting for a retried snapshot (snapSeq 0) gets everything from that snapshot.
        if (c.snapSeq === 0 || c.snapSeq > seq) continue;
        const changes: RoomChange[] = [];
        for (const [room, r] of named) {
          const ch = viewOf(c.query, room, r);
          if (ch) changes.push(ch);
        }
        if (changes.length === 0 && onlineJson === c.lastOnline) continue;
        const frame = `event: rooms\ndata: ${JSON.stringify({ rooms: changes, online: pub })}\n\n`;
        if (c.ready) {
          c.lastOnline = onlineJson;
          this.write(c, frame);
        } else c.queued.push(frame);
      }
    } finally {
      this.flushing = false;
      this.scheduleFlush();
    }
  }

  /**
   * The changed rooms the clients may hear of: each listed one with its state, and each shown
   * before that is no longer listed (or gone) as null. Any other room is not named at all.
   */
  private publicStates(rooms: readonly string[], states: readonly (LobbyRoom | null)[]): Map<string, LobbyRoom | null> {
    const named = new Map<string, LobbyRoom | null>();
    rooms.forEach((room, i) => {
      const r = states[i] ?? null;
      if (r !== null && isListed(this.o.listing, room, r.listed)) {
        named.set(room, r);
        this.remember(room);
      } else if (this.shown.delete(room)) named.set(room, null);
    });
    return named;
  }

  private remember(room: string): void {
    this.shown.delete(room);
    this.shown.add(room);
    if (this.shown.size > MAX_SHOWN) this.shown.delete(this.shown.values().next().value as string);
  }

  /** Reads and sends a snapshot to each client (one lobby read per distinct query). */
  private async snapshot(clients: Client[]): Promise<void> {
    if (clients.length === 0 || this.closed) return;
    const seq = ++this.seq;
    const groups = new Map<string, Client[]>();
    for (const c of clients) {
      c.snapSeq = seq;
      c.ready = false;
      const key = JSON.stringify(c.query);
      const g = groups.get(key);
      if (g) g.push(c);
      else groups.set(key, [c]);
    }
    let online: Online;
    let pages: LobbyPage[];
    try {
      if (!this.o.store.available) throw new Error('store unavailable');
      [online, pages] = await Promise.all([this.o.store.online(), Promise.all([...groups.values()].map((g) => this.o.store.lobby((g[0] as Client).query)))]);
    } catch (err) {
      this.o.logger.debug({ err: errorMessage(err) }, 'lobby stream: snapshot read failed');
      // Only those whose latest snapshot attempt this was (a newer one may have started).
      this.markUnavailable(clients.filter((c) => c.snapSeq === seq));
      return;
    }
    if (this.closed) return;
    const pub = publicOnline(online);
    const onlineJson = JSON.stringify(pub);
    let i = 0;
    for (const g of groups.values()) {
      const page = pages[i++] as LobbyPage;
      for (const r of page.rooms) this.remember(r.room);
      const frame = `event: snapshot\ndata: ${JSON.stringify({ ...publicPage(page), online: pub })}\n\n`;
      for (const c of g) {
        if (c.snapSeq !== seq || !this.clients.has(c)) continue;
        c.ready = true;
        c.unavailableSent = false;
        c.lastOnline = onlineJson;
        this.write(c, frame);
        for (const q of c.queued) this.write(c, q);
        c.queued = [];
      }
    }
  }

  /** The store failed: tell each client once, and try snapshots again until it answers. */
  private markUnavailable(clients: Client[]): void {
    const frame = `event: unavailable\ndata: ${JSON.stringify(Errors.storeUnavailable().body())}\n\n`;
    for (const c of clients) {
      c.ready = false;
      c.snapSeq = 0;
      c.queued = [];
      if (!c.unavailableSent) {
        c.unavailableSent = true;
        this.write(c, frame);
      }
    }
    this.pending.clear();
    this.scheduleResync();
  }

  /** While some client waits for a snapshot, retry every max(2 s, interval); 'available' events also trigger it. */
  private scheduleResync(): void {
    if (this.resyncTimer || this.closed || this.clients.size === 0) return;
    this.resyncTimer = setTimeout(
      () => {
        this.resyncTimer = null;
        const waiting = this.waiting();
        if (waiting.length === 0) return;
        if (!this.o.store.available) return this.scheduleResync();
        void this.snapshot(waiting);
      },
      Math.max(2_000, this.o.intervalMs),
    );
    this.resyncTimer.unref();
  }

  /** Clients that were told `unavailable` and wait for a snapshot. */
  private waiting(): Client[] {
    return [...this.clients].filter((c) => !c.ready && c.snapSeq === 0);
  }

  private write(c: Client, frame: string): void {
    if (c.res.writableEnded || c.res.destroyed) return;
    if (c.res.writableLength > this.o.maxBufferedBytes) {
      // A client that does not read: drop it rather than buffer without bound.
      this.o.logger.debug({ buffered: c.res.writableLength }, 'lobby stream: slow client dropped');
      this.drop(c);
      c.res.destroy();
      return;
    }
    c.res.write(frame);
  }
}

/** A changed room (listed, or null: gone or no longer listed) as one client's query sees it; undefined when its key is outside the view. */
export function viewOf(q: LobbyQuery, room: string, r: LobbyRoom | null): RoomChange | undefined {
  if (q.prefix !== undefined && !room.startsWith(q.prefix)) return undefined;
  if (!r || !matches(q, r)) return { room, gone: true };
  return publicRoom(r);
}

function matches(q: LobbyQuery, r: LobbyRoom): boolean {
  // The lobby lists live rooms only (a room known by its pinned metadata alone is not in it).
  if (!(r.sockets > 0)) return false;
  if (q.backend !== undefined && r.backend !== q.backend) return false;
  if (q.minSockets !== undefined && r.sockets < q.minSockets) return false;
  if (q.status !== undefined && (r.meta === null || r.meta['status'] !== q.status)) return false;
  return true;
}
