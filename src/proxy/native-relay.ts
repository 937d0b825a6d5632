// The JavaScript side of roomgate's native relay (native/relay.cc): which relay runs
// (proxy.relay), loading the addon, and handing it open plain tunnels. The native relay moves a
// tunnel's bytes in a thread of its own and keeps the JavaScript relay's contract (half-close and
// linger, client silence, idleness, the client write timeout); it tells its tunnel, on the
// JavaScript thread, when and why it ended (NativeHost.nativeEnded).
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import type { ProbeAddon } from '../backends/probe-link.js';
import { dirname, join } from 'node:path';

export type RelaySetting = 'auto' | 'native' | 'javascript';

/** Why a native tunnel ended: a side's FIN (then both ended), a side's error, a limit, or JavaScript's close. */
export type NativeEnd = 'client-eof' | 'backend-eof' | 'client-error' | 'backend-error' | 'silent' | 'idle' | 'write-timeout' | 'closed';

type OnEvent = (id: number, reason: string, up: number, down: number, owedBackend?: Buffer, owedClient?: Buffer, pastClient?: Buffer, pastBackend?: Buffer, flags?: number) => void;

/** The addon: the relay, and the health check's connection (src/backends/probe-link.ts). */
interface Addon extends ProbeAddon {
  create(tickMs: number, onEvent: OnEvent): object;
  add(h: object, clientFd: number, backendFd: number, silenceMs: number, idleMs: number, writeTimeoutMs: number, lingerMs: number, toBackend: Buffer, toClient: Buffer, follow: boolean): number;
  close(h: object, id: number): boolean;
  release(h: object, id: number): boolean;
  counts(h: object, id: number): [number, number] | undefined;
  size(h: object): number;
  stop(h: object): void;
}

/** Which relay this gateway runs, and why (at start, in /status and in roomgate_relay_info). */
export interface RelayChoice {
  readonly configured: RelaySetting;
  readonly relay: 'native' | 'javascript';
  /** Why this relay: for `javascript` under `auto`, why the native one is not there. */
  readonly why: string;
}

/** The package's root (it holds package.json), from src/proxy or dist/src/proxy. */
function packageRoot(): string {
  let dir = import.meta.dirname;
  for (let i = 0; i < 5; i++) {
    if (existsSync(join(dir, 'package.json')) && existsSync(join(dir, 'native'))) return dir;
    dir = dirname(dir);
  }
  return join(import.meta.dirname, '..', '..');
}

/** The addon roomgate loads: ROOMGATE_RELAY_ADDON (a test build), else native/build/Release/roomgate_relay.node. */
export function addonPath(env: NodeJS.ProcessEnv = process.env): string {
  return env.ROOMGATE_RELAY_ADDON || join(packageRoot(), 'native', 'build', 'Release', 'roomgate_relay.node');
}

type Loaded = { readonly addon: Addon } | { readonly problem: string };
/** By path: a process loads an addon once (Node keeps it loaded anyway). */
const loaded = new Map<string, Loaded>();

/** Loads the addon once; the problem says why it cannot run (not built, and the build's own reason). */
function loadAddon(): Loaded {
  const path = addonPath();
  let l = loaded.get(path);
  if (l !== undefined) return l;
  if (!existsSync(path)) {
    const reasonFile = join(packageRoot(), 'native', 'build', 'NOT-BUILT');
    const reason = existsSync(reasonFile) ? readFileSync(reasonFile, 'utf8').split('\n')[0] : `nothing at ${path}`;
    l = { problem: `the native relay is not built (${reason}); build it with \`node scripts/build-native.mjs --strict\` (needs make, g++ and python3)` };
  } else {
    try {
      l = { addon: createRequire(import.meta.url)(path) as Addon };
    } catch (err) {
      l = { problem: `the native relay at ${path} does not load: ${(err as Error).message}` };
    }
  }
  loaded.set(path, l);
  return l;
}

/** A relay chosen, with the addon when it is the native one. */
export type ChosenRelay = RelayChoice & { readonly addon: Addon | null };

/**
 * proxy.relay as it can run here. `native` without the addon throws (the gateway does not start).
 * With the native relay, the health checks use the addon's probe too (src/compose/runtime.ts).
 */
export function chooseRelay(configured: RelaySetting): ChosenRelay {
  if (configured === 'javascript') return { configured, relay: 'javascript', why: 'proxy.relay is javascript', addon: null };
  const l = loadAddon();
  if ('addon' in l) return { configured, relay: 'native', why: configured === 'auto' ? 'proxy.relay is auto and the native relay is built' : 'proxy.relay is native', addon: l.addon };
  if (configured === 'native') throw new Error(`proxy.relay: native, but ${l.problem}; or set proxy.relay: auto to run the JavaScript relay without it`);
  return { configured, relay: 'javascript', why: l.problem, addon: null };
}

/**
 * A followed tunnel handed back (release()): both directions stopped between two messages. The
 * descriptors are JavaScript's again; `owed*` are bytes the relay had not written yet (before the
 * boundary: they go out first), `past*` what each side sent after its boundary (for JavaScript to
 * relay, or to hold). The flags say what the relay's followers knew: a stream that cannot be
 * followed (`broken`) or that carried a close frame.
 */
export interface Released {
  readonly owedBackend: Buffer | null;
  readonly owedClient: Buffer | null;
  readonly pastClient: Buffer | null;
  readonly pastBackend: Buffer | null;
  readonly client: { readonly broken: boolean; readonly closeSeen: boolean };
  readonly backend: { readonly broken: boolean; readonly closeSeen: boolean };
}

/** A tunnel the native relay carries: told once, on the JavaScript thread, when it ended or came back. */
export interface NativeHost {
  nativeEnded(reason: NativeEnd, up: number, down: number): void;
  nativeReleased(r: Released): void;
}

/** What a tunnel hands over: its two sockets, the bytes each side is owed, its limits. */
export interface Handover {
  readonly client: Socket;
  readonly backend: Socket;
  /** Bytes the backend is owed first (early client bytes read with the handshake). */
  readonly toBackend: Buffer | null;
  /** Bytes the client is owed first (the 101 head, frames that came behind it). */
  readonly toClient: Buffer;
  /**
   * A tunnel a handoff may hold: its messages are followed both ways, the backend socket is lent
   * (kept, read-stopped) rather than given up, and release() hands the tunnel back.
   */
  readonly follow: boolean;
  readonly silenceMs: number;
  readonly idleMs: number;
  readonly writeTimeoutMs: number;
  readonly lingerMs: number;
}

type HandleSocket = Socket & { _handle?: { fd?: number; reading?: boolean; readStop?: () => number } | null; encrypted?: boolean };

/**
 * A socket the relay handed back reads again: its handle restarts as Node's own flow control
 * restarts it (the stream may still count a read as pending, so resume() alone would not).
 */
export function readAgain(socket: Socket): void {
  const h = (socket as HandleSocket)._handle as { reading?: boolean; readStart?: () => number } | null | undefined;
  if (h && h.reading !== true && typeof h.readStart === 'function') {
    h.reading = true;
    h.readStart();
  }
}

/** One native thread relaying any number of tunnels for one gateway. */
export class NativeRelay {
  private readonly h: object;
  private readonly hosts = new Map<number, NativeHost>();
  private stopped = false;

  /** `tickMs`: how often the relay looks at its tunnels' limits (their precision). */
  constructor(
    private readonly addon: Addon,
    tickMs: number,
  ) {
    this.h = addon.create(tickMs, (id, reason, up, down, owedBackend, owedClient, pastClient, pastBackend, flags = 0) => {
      if (reason !== 'released') return this.ended(id, reason as NativeEnd, up, down);
      const host = this.hosts.get(id);
      if (host === undefined) return;
      this.hosts.delete(id);
      host.nativeReleased({
        owedBackend: owedBackend ?? null,
        owedClient: owedClient ?? null,
        pastClient: pastClient ?? null,
        pastBackend: pastBackend ?? null,
        client: { broken: (flags & 1) !== 0, closeSeen: (flags & 2) !== 0 },
        backend: { broken: (flags & 4) !== 0, closeSeen: (flags & 8) !== 0 },
      });
    });
  }

  /** The sweep period for these limits: a quarter of the shortest, between 10 ms and 1 s. */
  static tickFor(...limitsMs: number[]): number {
    const set = limitsMs.filter((ms) => ms > 0);
    return set.length === 0 ? 1_000 : Math.max(10, Math.min(1_000, Math.floor(Math.min(...set) / 4)));
  }

  /**
   * Whether this pair can move to the native relay: plain TCP on both sides (TLS stays with
   * Node's TLS, an h2 stream with its session), with descriptors, nothing queued for writing.
   */
  takes(client: Socket, backend: Socket): boolean {
    if (this.stopped) return false;
    const c = client as HandleSocket;
    const b = backend as HandleSocket;
    if (c.encrypted === true || b.encrypted === true) return false;
    if (typeof c._handle?.fd !== 'number' || c._handle.fd < 0 || typeof c._handle.readStop !== 'function') return false;
    if (typeof b._handle?.fd !== 'number' || b._handle.fd < 0) return false;
    return client.writableLength === 0 && backend.writableLength === 0 && !client.destroyed && !backend.destroyed;
  }

  /**
   * Hands the pair over. The client socket stays open in JavaScript but reads nothing more (its
   * descriptor is the relay's to use until nativeEnded; the listener still counts the
   * connection); whatever it had read and nobody consumed goes to the backend after `toBackend`.
   * The backend socket is given up (the relay works on a duplicate of its descriptor; the caller
   * destroys it), or with `follow` lent like the client's (the caller keeps it, read-stopped by
   * returning false from its read callback). Returns the tunnel's id.
   */
  adopt(host: NativeHost, o: Handover): number {
    const c = o.client as HandleSocket;
    const handle = c._handle as { fd: number; reading?: boolean; readStop: () => number };
    const early: Buffer[] = o.toBackend !== null && o.toBackend.length > 0 ? [o.toBackend] : [];
    for (let chunk = o.client.read() as Buffer | null; chunk !== null; chunk = o.client.read() as Buffer | null) early.push(chunk);
    // As Node's own pause of a socket at its high-water mark: the handle stops reading until
    // JavaScript reads it again (a release), or for good.
    handle.reading = false;
    handle.readStop();
    const bh = (o.backend as HandleSocket)._handle as { fd: number; reading?: boolean; readStop: () => number };
    if (o.follow) {
      // Lent too: it must not read what the relay is to relay.
      bh.reading = false;
      bh.readStop();
    }
    const id = this.addon.add(this.h, handle.fd, bh.fd, o.silenceMs, o.idleMs, o.writeTimeoutMs, o.lingerMs, early.length === 1 ? (early[0] as Buffer) : Buffer.concat(early), o.toClient, o.follow);
    this.hosts.set(id, host);
    return id;
  }

  /** Ends a tunnel; its host hears `closed` once the relay let go of the client's descriptor. */
  close(id: number): void {
    if (!this.stopped && !this.addon.close(this.h, id)) this.ended(id, 'closed', 0, 0);
  }

  /**
   * Asks for a followed tunnel back: its host hears nativeReleased once both directions reached a
   * message boundary (or nativeEnded, when it ends first). False: not on the relay, or not followed.
   */
  release(id: number): boolean {
    return !this.stopped && this.addon.release(this.h, id);
  }

  counts(id: number): { up: number; down: number } | undefined {
    const c = this.stopped ? undefined : this.addon.counts(this.h, id);
    return c && { up: c[0], down: c[1] };
  }

  /** Tunnels on the relay now. */
  get size(): number {
    return this.hosts.size;
  }

  /** Ends every tunnel (each host hears `closed`) and the thread. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.addon.stop(this.h);
    const hosts = [...this.hosts.values()];
    this.hosts.clear();
    for (const host of hosts) host.nativeEnded('closed', 0, 0);
  }

  private ended(id: number, reason: NativeEnd, up: number, down: number): void {
    const host = this.hosts.get(id);
    if (host === undefined) return;
    this.hosts.delete(id);
    host.nativeEnded(reason, up, down);
  }
}
