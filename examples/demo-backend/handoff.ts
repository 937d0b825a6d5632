// The room handoff's hooks of the demo backend (docs/handoff.md, "The protocol"): roomgate moves a
// room with its state from this process to another one by calling, on this backend's own address,
//   POST {path}/hello    -> 200 {"version":2,"messages":true} (or {"version":1}: --handoff-version 1)
//   POST {path}/export   -> the room frozen (a lease of leaseMs), its state as an opaque blob
//   POST {path}/import   -> the blob restored here under the new epoch
//   POST {path}/release  -> the room's sockets closed with 1012, its state dropped, its epoch fenced
//   POST {path}/resume   -> the freeze lifted (roomgate rolled back)
//   POST {path}/messages -> version 2: a held socket's messages applied as if it had sent them here
// Each call carries roomgate's proof for its own purpose, and each is idempotent by handoff id
// (X-Roomgate-Message-Id): roomgate retries, and a retry must get the answer the first call got.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CallCheck } from './call-check.js';
import type { MoveStore } from './room-moves.js';

export const DEFAULT_HANDOFF_PATH = '/_roomgate/handoff';
/** The protocol version the hooks speak by default (docs/handoff.md, "Protocol version 2"). */
export const HANDOFF_VERSION = 2;
/** WebSocket close code for "service restart": djust's client reconnects, and lands on the new owner. */
export const CLOSE_SERVICE_RESTART = 1012;
const BLOB_MAX_BYTES = 1 << 20;
const LEASE_MAX_MS = 600_000;
const HANDOFF_ID_MAX_LENGTH = 200;
/** Handoffs remembered for idempotent retries, and rooms fenced after a release; the oldest go first. */
const REMEMBERED_MAX = 10_000;
const STEPS = ['hello', 'export', 'import', 'release', 'resume', 'messages'] as const;
/** X-Roomgate-Socket: 22 base64url characters. */
const SOCKET_ID = /^[A-Za-z0-9_-]{22}$/;
type Step = (typeof STEPS)[number];

/** What the hooks need of the backend that serves them. */
export interface HandoffHost {
  readonly checkCall: CallCheck;
  readonly moves: MoveStore;
  /** The epoch the room is held under here (undefined: none noted). */
  heldEpoch(room: string): number | undefined;
  setEpoch(room: string, epoch: number): void;
  /** Whether this process holds anything of the room: sockets or state. */
  holds(room: string): boolean;
  /** Closes every socket of the room (mounted or routed there) with `code`. */
  closeRoom(room: string, code: number): void;
  /** Version 2: a held socket's messages (text or binary), in order, applied as if it had sent them here. */
  applyMessages(room: string, socketId: string, messages: readonly (string | Buffer)[]): void;
  /** The protocol version the hello answers (1 or 2). */
  readonly version: 1 | 2;
  log(line: string): void;
}

export interface Handoff {
  /** Serves the request when its path is one of the hooks; false when it is not (the caller goes on). */
  serve(req: IncomingMessage, res: ServerResponse, pathname: string): boolean;
  /** Whether the room is frozen by an export: its events are refused until release or resume. */
  frozen(room: string): boolean;
  /** Whether `epoch` of `room` was released here: a socket or push under it is refused. */
  fenced(room: string, epoch: number): boolean;
  /** Clears the lease timers (process shutdown). */
  close(): void;
}

interface Freeze {
  readonly id: string;
  readonly blob: Buffer;
  readonly timer: NodeJS.Timeout;
}

type Outcome = 'exported' | 'resumed' | 'released' | 'imported' | 'applied';

interface Call {
  readonly step: Exclude<Step, 'hello'>;
  readonly id: string;
  readonly room: string;
  readonly epoch: number;
  readonly body: Buffer;
  /** X-Roomgate-Socket ('' when absent). */
  readonly socket: string;
}

type Answer = { status: number; body?: Buffer | string; type?: string };

/** A Map that forgets its oldest entries past `max`. */
function remember<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) map.delete(map.keys().next().value as K);
}

/** An export's {"leaseMs": N}: N, or null when it is not an integer 1..LEASE_MAX_MS. */
function leaseOf(body: Buffer): number | null {
  let leaseMs: unknown;
  try {
    leaseMs = (JSON.parse(body.toString('utf8')) as { leaseMs?: unknown } | null)?.leaseMs;
  } catch {
    return null;
  }
  return Number.isSafeInteger(leaseMs) && (leaseMs as number) >= 1 && (leaseMs as number) <= LEASE_MAX_MS ? (leaseMs as number) : null;
}

/** The call a request makes, or the answer that refuses it before anything of it is used. */
function callOf(req: IncomingMessage, step: Step, body: Buffer, checkCall: CallCheck, version: 1 | 2): Call | Answer {
  if (step === 'messages' && version === 1) return { status: 404, body: 'not found\n' };
  const refusal = checkCall(req, body, `handoff-${step}`);
  if (refusal !== null) return { status: 403, body: `handoff refused: ${refusal}\n` };
  if (step === 'hello') return { status: 200, body: JSON.stringify(version === 2 ? { version: 2, messages: true } : { version: 1 }), type: 'application/json' };
  const field = (name: string): string => (typeof req.headers[name] === 'string' ? (req.headers[name] as string) : '');
  const [id, room, epoch] = [field('x-roomgate-message-id'), field('x-roomgate-room'), field('x-roomgate-epoch')];
  if (id === '' || id.length > HANDOFF_ID_MAX_LENGTH) return { status: 400, body: 'no handoff id\n' };
  if (room === '' || room.length > 128) return { status: 400, body: 'no room\n' };
  // Up to 16 digits: roomgate's Redis store issues epochs from the clock (ms x 1000, 1.8e15 today).
  if (!/^[1-9]\d{0,15}$/.test(epoch) || !Number.isSafeInteger(Number(epoch))) return { status: 400, body: 'no epoch\n' };
  return { step, id, room, epoch: Number(epoch), body, socket: field('x-roomgate-socket') };
}

function answer(res: ServerResponse, a: Answer): void {
  const body = a.body === undefined ? undefined : Buffer.isBuffer(a.body) ? a.body : Buffer.from(a.body);
  res.writeHead(a.status, body === undefined ? {} : { 'Content-Type': a.type ?? 'text/plain; charset=utf-8', 'Content-Length': body.length });
  res.end(body);
}

/** Serves a hook's request: reads its body, checks the call, answers what `run` makes of it. */
function serveHook(req: IncomingMessage, res: ServerResponse, base: string, pathname: string, checkCall: CallCheck, version: 1 | 2, run: (c: Call) => Answer): boolean {
  if (!pathname.startsWith(`${base}/`)) return false;
  const step = STEPS.find((s) => pathname === `${base}/${s}`);
  if (step === undefined || req.method !== 'POST') {
    req.resume();
    answer(res, { status: step === undefined ? 404 : 405, body: step === undefined ? 'not found\n' : 'POST only\n' });
    return true;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  req.on('data', (chunk: Buffer) => {
    size += chunk.length;
    if (size <= BLOB_MAX_BYTES) chunks.push(chunk);
  });
  req.on('end', () => {
    if (size > BLOB_MAX_BYTES) return answer(res, { status: 413, body: 'too large\n' });
    const call = callOf(req, step, Buffer.concat(chunks), checkCall, version);
    answer(res, 'status' in call ? call : run(call));
  });
  req.on('error', () => res.destroy());
  return true;
}

/** The hooks, served under `path`, over the rooms of `host`. */
export function createHandoff(path: string, host: HandoffHost): Handoff {
  const base = path.replace(/\/+$/, '');
  const freezes = new Map<string, Freeze>();
  /** `room \n handoff id` -> what that handoff did here, so a retry gets the same answer. */
  const outcomes = new Map<string, Outcome>();
  /** Room -> the highest epoch released here. */
  const fences = new Map<string, number>();
  const key = (c: Call): string => `${c.room}\n${c.id}`;

  function unfreeze(room: string): void {
    const f = freezes.get(room);
    if (f === undefined) return;
    clearTimeout(f.timer);
    freezes.delete(room);
  }

  function exportRoom(c: Call): Answer {
    const f = freezes.get(c.room);
    if (f !== undefined) return f.id === c.id ? { status: 200, body: f.blob, type: 'application/octet-stream' } : { status: 409, body: 'another handoff holds this room\n' };
    if (outcomes.has(key(c))) return { status: 409, body: 'this handoff is over\n' };
    const leaseMs = leaseOf(c.body);
    if (leaseMs === null) return { status: 400, body: `leaseMs must be an integer 1..${LEASE_MAX_MS}\n` };
    if (!host.holds(c.room)) return { status: 404, body: 'room not here\n' };
    host.setEpoch(c.room, c.epoch);
    const blob = host.moves.serialize(c.room);
    // The lease: a gateway that dies mid-handoff must not leave the room frozen.
    const timer = setTimeout(() => {
      freezes.delete(c.room);
      remember(outcomes, key(c), 'resumed', REMEMBERED_MAX);
      host.log(`handoff ${c.id}: lease of room ${c.room} expired, resumed`);
    }, leaseMs);
    freezes.set(c.room, { id: c.id, blob, timer });
    remember(outcomes, key(c), 'exported', REMEMBERED_MAX);
    return { status: 200, body: blob, type: 'application/octet-stream' };
  }

  function importRoom(c: Call): Answer {
    if (outcomes.get(key(c)) === 'imported') return { status: 204 };
    if (freezes.has(c.room)) return { status: 409, body: 'this room is frozen here by another handoff\n' };
    if (!host.moves.restore(c.room, c.body)) return { status: 400, body: 'not a state blob of this room\n' };
    host.setEpoch(c.room, c.epoch);
    remember(outcomes, key(c), 'imported', REMEMBERED_MAX);
    return { status: 204 };
  }

  function releaseRoom(c: Call): Answer {
    if (outcomes.get(key(c)) === 'released') return { status: 204 };
    const f = freezes.get(c.room);
    if (f !== undefined && f.id !== c.id) return { status: 409, body: 'another handoff holds this room\n' };
    if (f === undefined && outcomes.get(key(c)) === 'resumed') host.log(`handoff ${c.id}: release of room ${c.room} after its lease expired`);
    // A release no export announced here: roomgate's /events and roomgate_backend_calls_total say
    // whether roomgate made it (a retry after this process restarted, or a call to look into).
    if (f === undefined && !outcomes.has(key(c))) host.log(`handoff ${c.id}: release of room ${c.room}, a handoff this process never exported (check roomgate's /events backendCalls)`);
    unfreeze(c.room);
    // The fence first, so a socket that arrives while the others close is refused too.
    remember(fences, c.room, Math.max(c.epoch, fences.get(c.room) ?? 0), REMEMBERED_MAX);
    host.closeRoom(c.room, CLOSE_SERVICE_RESTART);
    host.moves.drop(c.room);
    remember(outcomes, key(c), 'released', REMEMBERED_MAX);
    return { status: 204 };
  }

  function resumeRoom(c: Call): Answer {
    const f = freezes.get(c.room);
    if (f !== undefined && f.id !== c.id) return { status: 409, body: 'another handoff holds this room\n' };
    if (outcomes.get(key(c)) === 'released') return { status: 409, body: 'this room was released\n' };
    if (f === undefined && !outcomes.has(key(c))) host.log(`handoff ${c.id}: resume of room ${c.room}, a handoff this process never exported (check roomgate's /events backendCalls)`);
    unfreeze(c.room);
    // Nothing frozen (already resumed, the lease ran out, or never exported): the same end state.
    // Remembered even for a handoff never exported here: roomgate resumes after an export it gave
    // up on, and that export may still arrive; it then gets 409 instead of freezing the room for a lease.
    remember(outcomes, key(c), 'resumed', REMEMBERED_MAX);
    return { status: 204 };
  }

  /** A held socket's messages: once per handoff and socket; never while the room is frozen here. */
  function applyRoom(c: Call): Answer {
    const k = `${key(c)}\n${c.socket}`;
    if (outcomes.get(k) === 'applied') return { status: 204 };
    const messages = heldMessages(c.body, c.socket);
    if (messages === null) return { status: 400, body: 'the body is {"socket": X-Roomgate-Socket, "messages": [{"text": ...} | {"binary": base64}, ...]}\n' };
    if (freezes.has(c.room) || host.heldEpoch(c.room) !== c.epoch) return { status: 409, body: 'this room is not held here under that epoch\n' };
    host.applyMessages(c.room, c.socket, messages);
    remember(outcomes, k, 'applied', REMEMBERED_MAX);
    return { status: 204 };
  }

  function run(c: Call): Answer {
    const held = host.heldEpoch(c.room);
    // The room here is a newer copy than the one the call is about (import: newer than the new one).
    if (held !== undefined && c.epoch < held) return { status: 409, body: 'this room is held under a newer epoch\n' };
    if ((fences.get(c.room) ?? 0) >= c.epoch && outcomes.get(key(c)) !== 'released') return { status: 409, body: 'this room was released\n' };
    switch (c.step) {
      case 'export':
        return exportRoom(c);
      case 'import':
        return importRoom(c);
      case 'release':
        return releaseRoom(c);
      case 'resume':
        return resumeRoom(c);
      case 'messages':
        return applyRoom(c);
    }
  }

  return {
    serve: (req, res, pathname) => serveHook(req, res, base, pathname, host.checkCall, host.version, run),
    frozen: (room) => freezes.has(room),
    fenced: (room, epoch) => epoch > 0 && (fences.get(room) ?? 0) >= epoch,
    close() {
      for (const room of [...freezes.keys()]) unfreeze(room);
    },
  };
}

/** The messages of a messages call, in order, or null when the body is not one for `socket`. */
function heldMessages(body: Buffer, socket: string): (string | Buffer)[] | null {
  if (!SOCKET_ID.test(socket)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return null;
  }
  const p = parsed as { socket?: unknown; messages?: unknown } | null;
  if (p === null || typeof p !== 'object' || p.socket !== socket || !Array.isArray(p.messages)) return null;
  const out: (string | Buffer)[] = [];
  for (const m of p.messages as unknown[]) {
    const one = m as { text?: unknown; binary?: unknown } | null;
    if (one !== null && typeof one === 'object' && typeof one.text === 'string' && Object.keys(one).length === 1) out.push(one.text);
    else if (one !== null && typeof one === 'object' && typeof one.binary === 'string' && Object.keys(one).length === 1) out.push(Buffer.from(one.binary, 'base64'));
    else return null;
  }
  return out;
}
