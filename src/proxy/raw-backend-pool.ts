// Keep-alive connections to plain-HTTP backends for the byte-level page path: raw net sockets,
// kept per backend (newest first, as the node:http agent does with scheduling 'lifo'), closed
// after backendIdleTimeoutMs idle, at most maxIdle per backend. A pooled socket that reads a byte
// or ends is destroyed: an idle connection has nothing to say, so a backend that speaks on it is
// broken or hostile, and its bytes must never become the answer to the next request.
import { connect, type Socket } from 'node:net';
import { backendHosts } from '../backends/host-addresses.js';

/** Who reads a connection's events now: the request using it, or nobody (idle in the pool). */
export interface RawBackendUser {
  onData(chunk: Buffer): void;
  /** The backend ended its side or the socket closed or failed (err null: a clean end). */
  onGone(err: NodeJS.ErrnoException | null): void;
}

export class RawBackendConn {
  user: RawBackendUser | null = null;
  /** Requests this connection has carried (0 while the first is on its way). */
  uses = 0;
  readonly socket: Socket;
  private gone = false;

  constructor(
    /** Backend id and address: a reload that moves a backend never reuses the old address. */
    readonly poolKey: string,
    host: string,
    port: number,
    private readonly pool: RawBackendPool,
  ) {
    this.socket = connect({ host, port, noDelay: true, lookup: backendHosts.lookup });
    // One set of listeners for the connection's life; each event goes to its current user.
    this.socket.on('data', (chunk: Buffer) => {
      if (this.user !== null) this.user.onData(chunk);
      else this.socket.destroy();
    });
    this.socket.on('end', () => this.lost(null));
    this.socket.on('error', (err: NodeJS.ErrnoException) => this.lost(err));
    this.socket.on('close', () => this.lost(null));
    // Off the idle list at once: 'close' comes only in a later phase of the event loop, and a
    // request read in between must not take a connection that is already destroyed.
    this.socket.on('timeout', () => {
      this.pool.forget(this);
      this.socket.destroy();
    });
  }

  get connecting(): boolean {
    return this.socket.connecting;
  }

  private lost(err: NodeJS.ErrnoException | null): void {
    // The first of 'end', 'error' and 'close' decides; the others follow from it.
    if (this.gone) return;
    this.gone = true;
    this.pool.forget(this);
    const user = this.user;
    if (user !== null) user.onGone(err);
    if (!this.socket.destroyed) this.socket.destroy();
  }
}

export class RawBackendPool {
  private readonly idle = new Map<string, RawBackendConn[]>();

  constructor(
    private readonly maxIdle: number,
    private readonly idleTimeoutMs: number,
  ) {}

  /**
   * An idle connection to this backend, or a new one (still connecting); always a new one when
   * `fresh` (the retry of a request whose reused connection was closed under it).
   */
  acquire(backendId: string, host: string, port: number, user: RawBackendUser, fresh = false): RawBackendConn {
    const key = `${backendId} ${host}:${port}`;
    const conn = (fresh ? undefined : this.idleOne(key)) ?? new RawBackendConn(key, host, port, this);
    conn.user = user;
    conn.uses++;
    conn.socket.setTimeout(0);
    return conn;
  }

  /** The newest idle connection still open (one destroyed but not yet closed is dropped). */
  private idleOne(key: string): RawBackendConn | undefined {
    const list = this.idle.get(key);
    if (list === undefined) return undefined;
    for (let conn = list.pop(); conn !== undefined; conn = list.pop()) if (!conn.socket.destroyed) return conn;
    return undefined;
  }

  /**
   * Back into the pool after a complete exchange (the caller checked it may be reused), for
   * idleTimeoutMs or the backend's own shorter limit (hintMs).
   */
  release(conn: RawBackendConn, hintMs: number | null = null): void {
    conn.user = null;
    const list = this.idle.get(conn.poolKey) ?? [];
    if (list.length >= this.maxIdle || conn.socket.destroyed) {
      conn.socket.destroy();
      return;
    }
    list.push(conn);
    this.idle.set(conn.poolKey, list);
    conn.socket.setTimeout(hintMs === null ? this.idleTimeoutMs : Math.min(hintMs, this.idleTimeoutMs));
  }

  /** Off the idle list (it closed, or was taken). */
  forget(conn: RawBackendConn): void {
    const list = this.idle.get(conn.poolKey);
    if (list === undefined) return;
    const i = list.indexOf(conn);
    if (i !== -1) list.splice(i, 1);
  }

  close(): void {
    for (const list of this.idle.values()) for (const c of list) c.socket.destroy();
    this.idle.clear();
  }
}
