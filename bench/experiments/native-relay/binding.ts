/**
 * The JavaScript side of the native relay prototype (relay.cc): builds it with make against the
 * running Node's headers, loads it, and hands it established socket pairs.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { join } from 'node:path';

/** relay.cc's directory, whether this runs from bench/experiments/native-relay or its copy under dist/. */
export const ADDON_DIR = [import.meta.dirname, join(import.meta.dirname, '../../../../bench/experiments/native-relay')].find((d) => existsSync(join(d, 'relay.cc'))) ?? import.meta.dirname;
export const ADDON_PATH = join(ADDON_DIR, 'build/relay.node');

/**
 * Builds build/relay.node (make does nothing when it is newer than relay.cc). Throws, saying what
 * is missing, when make or g++ is not installed or the compile fails.
 */
export function buildAddon(): string {
  for (const tool of ['make', process.env.CXX ?? 'g++']) {
    if (spawnSync(tool, ['--version'], { stdio: 'ignore' }).status !== 0) {
      throw new Error(`${tool} is not installed: the native relay is built from source with make and a C++17 compiler (apt-get install make g++)`);
    }
  }
  const r = spawnSync('make', ['-s', '-C', ADDON_DIR, `NODE=${process.execPath}`], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`building the native relay failed:\n${r.stdout}${r.stderr}`);
  return ADDON_PATH;
}

interface Addon {
  create(tickMs: number, onEvent: (kind: string, id: number, side: string, up: number, down: number) => void): object;
  add(h: object, clientFd: number, backendFd: number, silenceMs: number, toBackend: Buffer, toClient: Buffer): number;
  close(h: object, id: number): boolean;
  counts(h: object, id: number): [number, number] | undefined;
  size(h: object): number;
  stop(h: object): void;
}

/** A tunnel ended (`side` ended it: the client or backend closed or failed, or JavaScript closed it) or went silent. */
export interface RelayEvent {
  readonly kind: 'closed' | 'silent';
  readonly id: number;
  readonly side: 'client' | 'backend' | 'js';
  /** Bytes the relay read from the client (up) and from the backend (down) so far, final for `closed`; bytes handed over with adopt() are not counted. */
  readonly up: number;
  readonly down: number;
}

let addon: Addon | undefined;

function load(): Addon {
  addon ??= createRequire(import.meta.url)(ADDON_PATH) as Addon;
  return addon;
}

function fdOf(s: Socket): number {
  const fd = (s as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) throw new Error('the socket has no file descriptor (not a connected TCP socket)');
  return fd;
}

/** What the socket read but nobody consumed yet. */
function unread(s: Socket): Buffer[] {
  const out: Buffer[] = [];
  for (let c = s.read() as Buffer | null; c !== null; c = s.read() as Buffer | null) out.push(c);
  return out;
}

/** One native thread relaying any number of tunnels; events come back on the JavaScript thread. */
export class NativeRelay {
  private readonly a = load();
  private readonly h: object;
  private stopped = false;

  /** `tickMs`: how often the relay thread looks for silent tunnels (the precision of silenceMs). */
  constructor(onEvent: (e: RelayEvent) => void, tickMs = 1000) {
    this.h = this.a.create(tickMs, (kind, id, side, up, down) => onEvent({ kind: kind as RelayEvent['kind'], id, side: side as RelayEvent['side'], up, down }));
  }

  /**
   * Hands the established pair to the relay and destroys both sockets (the relay keeps duplicates
   * of their descriptors). `toBackend` goes to the backend first (a request head read here), then
   * whatever the client socket had read and nobody consumed; what the backend socket had read goes
   * to the client. Bytes still queued for writing in a socket would be lost: refused.
   * `silenceMs` > 0: a `silent` event once no client byte came for that long (again after the next).
   */
  adopt(client: Socket, backend: Socket, o: { silenceMs?: number; toBackend?: Buffer } = {}): number {
    if (this.stopped) throw new Error('relay stopped');
    if (client.writableLength > 0 || backend.writableLength > 0) throw new Error('a socket still has bytes queued for writing');
    client.pause();
    backend.pause();
    const toBackend = Buffer.concat([...(o.toBackend ? [o.toBackend] : []), ...unread(client)]);
    const toClient = Buffer.concat(unread(backend));
    const id = this.a.add(this.h, fdOf(client), fdOf(backend), o.silenceMs ?? 0, toBackend, toClient);
    client.destroy();
    backend.destroy();
    return id;
  }

  /** Closes both sides; a `closed` event with side `js` follows. False when it was not open. */
  close(id: number): boolean {
    return !this.stopped && this.a.close(this.h, id);
  }

  counts(id: number): { up: number; down: number } | undefined {
    const c = this.stopped ? undefined : this.a.counts(this.h, id);
    return c && { up: c[0], down: c[1] };
  }

  get size(): number {
    return this.stopped ? 0 : this.a.size(this.h);
  }

  /** Closes every tunnel (without events) and ends the thread. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.a.stop(this.h);
  }
}
