// roomgate's room handoff hooks (docs/handoff.md, "The protocol"), transport-free: a step, the
// request's fields and body in, an answer out (handoff-http.ts serves them on node:http). Around
// the app's functions (exportRoom, importRoom; applyMessages for version 2's held messages; the
// socket states for resume) the kit holds the rules: the proof of each step's own purpose, the
// call's fields (400), the freeze and its lease, idempotency by handoff id, the 409 rules, the
// epoch fence, and bounded remembered tables.
import type { IncomingHttpHeaders } from 'node:http';
import { error, jsonAnswer, NO_CONTENT, type Answer } from './answers.js';
import { field, type Verifier } from './proofs.js';
import { remember } from './remember.js';
import { CLOSE_SERVICE_RESTART, ROOM_KEY, ROOM_MOVED, SOCKET_ID } from './fence.js';
import type { RoomSocket, RoomTable } from './rooms.js';
import { SocketStates, unwrap, wrap } from './socket-states.js';

export const LEASE_MAX_MS = 600_000;
export const STEPS = ['hello', 'export', 'import', 'release', 'resume', 'messages'] as const;
export type Step = (typeof STEPS)[number];
const HANDOFF_ID_MAX_LENGTH = 200;

/** What the app gives the hooks: its room's state as a blob and back (and version 2's parts). */
export interface HandoffApp {
  /** The room's state (null: nothing of it here: a 404). Called in the turn that freezes the room. */
  exportRoom(room: string): Buffer | null;
  /** Restores the room from a blob `exportRoom` made; false when it is not one of this room's (a 400). */
  importRoom(room: string, blob: Buffer, epoch: number): boolean;
  /** Version 2: a held socket's messages (text or binary), in order, applied as if it had sent them here. */
  applyMessages?(room: string, socketId: string, messages: readonly (string | Buffer)[]): void | Promise<void>;
}

export interface HandoffOptions {
  readonly rooms: RoomTable<RoomSocket>;
  readonly verify: Verifier;
  readonly app: HandoffApp;
  /** The hello's version: 2 (with `messages` when the app applies them) or 1. Default 2. */
  readonly version?: 1 | 2;
  /** Resume (version 2): the states of the room's sockets for an export, by socket id; null: no resume. */
  readonly socketStates: ((room: string) => Map<string, unknown>) | null;
  /** Where the imported socket states wait for their resumed sockets. */
  readonly resumable: SocketStates;
  readonly log: (line: string) => void;
}

interface Call {
  readonly id: string;
  readonly room: string;
  readonly epoch: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

type Outcome = 'exported' | 'resumed' | 'released' | 'imported';

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

/** The call's handoff id, room and epoch, or the 400 that refuses it. */
function callOf(headers: IncomingHttpHeaders, body: Buffer): Call | Answer {
  const [id, room, epoch] = ['x-roomgate-message-id', 'x-roomgate-room', 'x-roomgate-epoch'].map((n) => field(headers, n) ?? '') as [string, string, string];
  if (id === '' || id.length > HANDOFF_ID_MAX_LENGTH) return error(400, 'no handoff id');
  if (!ROOM_KEY.test(room)) return error(400, 'no room');
  // Up to 16 digits: roomgate's Redis store issues epochs from the clock (ms x 1000, 1.8e15 today).
  if (!/^[1-9]\d{0,15}$/.test(epoch) || !Number.isSafeInteger(Number(epoch))) return error(400, 'no epoch');
  return { id, room, epoch: Number(epoch), headers, body };
}

export class HandoffHooks {
  private readonly outcomes = new Map<string, Outcome>();
  /** `room \n handoff id \n socket id` -> applying or applied. */
  private readonly applied = new Map<string, 'applying' | 'applied'>();
  private readonly freezes = new Map<string, { readonly id: string; readonly blob: Buffer; readonly timer: NodeJS.Timeout }>();

  constructor(private readonly o: HandoffOptions) {}

  /** What the hello says this app can do. */
  hello(): { version: number; messages?: true; resume?: true } {
    if (this.o.version === 1 || this.o.app.applyMessages === undefined) return { version: 1 };
    return this.o.socketStates === null ? { version: 2, messages: true } : { version: 2, messages: true, resume: true };
  }

  /** One hook: the step exists, POST, the proof for its own purpose, the call's fields, then the step. */
  async call(step: string, method: string | undefined, headers: IncomingHttpHeaders, body: Buffer): Promise<Answer> {
    const known = STEPS.find((s) => s === step);
    if (known === undefined || (known === 'messages' && this.hello().version === 1)) return error(404, 'no such handoff step');
    if (method !== 'POST') return error(405, 'POST only');
    const refused = this.o.verify(headers, body, `handoff-${known}`);
    if (refused !== null) return error(403, `handoff refused: ${refused}`);
    if (known === 'hello') return jsonAnswer(200, this.hello());
    const c = callOf(headers, body);
    if ('status' in c) return c;
    const stale = this.refused(c);
    if (stale !== null) return error(409, stale);
    if (known === 'export') return this.exportRoom(c);
    if (known === 'import') return this.importRoom(c);
    if (known === 'release') return this.releaseRoom(c);
    if (known === 'resume') return this.resumeRoom(c);
    return this.applyMessages(c);
  }

  /** Whether a handoff has the room frozen here. */
  frozen(room: string): boolean {
    return this.freezes.has(room);
  }

  /** Clears the lease timers (process shutdown). */
  close(): void {
    for (const room of [...this.freezes.keys()]) this.unfreeze(room);
  }

  private key(c: Call): string {
    return `${c.room}\n${c.id}`;
  }

  /** Why a call about the room at its epoch cannot be about the copy held here, or null. */
  private refused(c: Call): string | null {
    const held = this.o.rooms.get(c.room);
    // The room here is a newer copy than the one the call is about (import: newer than the new one).
    if (held !== undefined && c.epoch < held.epoch) return 'this room is held under a newer epoch';
    if (this.o.rooms.fenced(c.room, c.epoch) && this.outcomes.get(this.key(c)) !== 'released') return 'this room was released';
    return null;
  }

  private otherHandoff(c: Call): boolean {
    const f = this.freezes.get(c.room);
    return f !== undefined && f.id !== c.id;
  }

  private unfreeze(room: string): void {
    const f = this.freezes.get(room);
    if (f === undefined) return;
    clearTimeout(f.timer);
    this.freezes.delete(room);
    const held = this.o.rooms.get(room);
    if (held !== undefined) held.frozenBy = null;
  }

  private exportRoom(c: Call): Answer {
    const f = this.freezes.get(c.room);
    // The same handoff again: the very blob the first call got, under the same lease.
    if (f !== undefined) return f.id === c.id ? { status: 200, body: f.blob, type: 'application/octet-stream' } : error(409, 'another handoff holds this room');
    if (this.outcomes.has(this.key(c))) return error(409, 'this handoff is over');
    const leaseMs = leaseOf(c.body);
    if (leaseMs === null) return error(400, `leaseMs must be an integer 1..${LEASE_MAX_MS}`);
    const state = this.o.app.exportRoom(c.room);
    if (state === null) return error(404, 'room not here');
    const blob = this.o.socketStates === null ? Buffer.from(state) : wrap(state, this.o.socketStates(c.room));
    // Frozen from here on, in the same turn as the blob: every change made before is in it, and
    // none is taken after it (rooms.live is false).
    const held = this.o.rooms.hold(c.room, c.epoch);
    held.frozenBy = c.id;
    const timer = setTimeout(() => this.expire(c), leaseMs);
    timer.unref();
    this.freezes.set(c.room, { id: c.id, blob, timer });
    remember(this.outcomes, this.key(c), 'exported');
    return { status: 200, body: blob, type: 'application/octet-stream' };
  }

  /** The lease ran out: neither release nor resume came, so the room goes on here. */
  private expire(c: Call): void {
    if (this.freezes.get(c.room)?.id !== c.id) return;
    this.unfreeze(c.room);
    remember(this.outcomes, this.key(c), 'resumed');
    this.o.log(`handoff ${c.id}: lease of room ${c.room} expired, resumed`);
  }

  private importRoom(c: Call): Answer {
    if (this.outcomes.get(this.key(c)) === 'imported') return NO_CONTENT;
    if (this.freezes.has(c.room)) return error(409, 'this room is frozen here by another handoff');
    const envelope = this.o.socketStates === null ? null : unwrap(c.body);
    if (!this.o.app.importRoom(c.room, envelope?.room ?? c.body, c.epoch)) return error(400, 'not a state blob of this room');
    // Held under the new epoch before the 2xx: the room's sockets may arrive right after.
    this.o.rooms.hold(c.room, c.epoch);
    if (envelope !== null) this.o.resumable.keep(c.room, c.id, c.epoch, envelope.sockets);
    remember(this.outcomes, this.key(c), 'imported');
    return NO_CONTENT;
  }

  private releaseRoom(c: Call): Answer {
    const k = this.key(c);
    if (this.outcomes.get(k) === 'released') return NO_CONTENT;
    if (this.otherHandoff(c)) return error(409, 'another handoff holds this room');
    // A release no export announced here: roomgate's /events (backendCalls) says whether it made it.
    if (!this.freezes.has(c.room) && !this.outcomes.has(k)) this.o.log(`handoff ${c.id}: release of room ${c.room}, a handoff this process never exported (check roomgate's /events backendCalls)`);
    this.unfreeze(c.room);
    const sockets = this.o.rooms.release(c.room, c.epoch);
    this.o.resumable.drop(c.room);
    remember(this.outcomes, k, 'released');
    for (const s of sockets) s.close(CLOSE_SERVICE_RESTART, ROOM_MOVED);
    return NO_CONTENT;
  }

  private resumeRoom(c: Call): Answer {
    const k = this.key(c);
    if (this.otherHandoff(c)) return error(409, 'another handoff holds this room');
    if (this.outcomes.get(k) === 'released') return error(409, 'this room was released');
    if (!this.freezes.has(c.room) && !this.outcomes.has(k)) this.o.log(`handoff ${c.id}: resume of room ${c.room}, a handoff this process never exported (check roomgate's /events backendCalls)`);
    this.unfreeze(c.room);
    // Nothing frozen (resumed already, the lease ran out, never exported): the same end state.
    // Remembered even for a handoff never exported here: roomgate resumes after an export it gave
    // up on, and that export may still arrive; it then gets 409 instead of freezing the room.
    remember(this.outcomes, k, 'resumed');
    return NO_CONTENT;
  }

  /** A held socket's messages: once per handoff and socket; never while the room is frozen here. */
  private async applyMessages(c: Call): Promise<Answer> {
    const socket = field(c.headers, 'x-roomgate-socket') ?? '';
    const messages = heldMessages(c.body, socket);
    if (messages === null) return error(400, 'the body is {"socket": X-Roomgate-Socket, "messages": [{"text": ...} | {"binary": base64}, ...]}');
    const k = `${this.key(c)}\n${socket}`;
    const done = this.applied.get(k);
    if (done !== undefined) return done === 'applied' ? NO_CONTENT : error(409, 'these messages are being applied');
    if (this.freezes.has(c.room) || this.o.rooms.note(c.room, c.epoch) === null) return error(409, 'this room is frozen here, or held under a newer epoch');
    remember(this.applied, k, 'applying');
    try {
      await this.o.app.applyMessages?.(c.room, socket, messages);
    } catch (err) {
      this.applied.delete(k); // not applied: roomgate's retry applies them
      this.o.log(`handoff ${c.id}: applyMessages failed for room ${c.room}, socket ${socket}: ${err instanceof Error ? err.message : String(err)}`);
      return error(500, 'the messages could not be applied');
    }
    remember(this.applied, k, 'applied');
    return NO_CONTENT;
  }
}

/** The messages of a messages call, in order, or null when the body is not one for `socket`. */
export function heldMessages(body: Buffer, socket: string): (string | Buffer)[] | null {
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
    const only = one !== null && typeof one === 'object' && Object.keys(one).length === 1;
    if (only && typeof one.text === 'string') out.push(one.text);
    else if (only && typeof one.binary === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(one.binary)) out.push(Buffer.from(one.binary, 'base64'));
    else return null;
  }
  return out;
}
