// The kit put together for an app on node:http and `ws` (docs/node-kit.md): one room table, one
// verifier, the push receiver and the handoff hooks on their paths, and the fence (and resume) on
// the app's WebSocket handshakes. The app gives its own parts only: its room state as a blob and
// back, where a push goes, and for resume a socket's own state and how its session goes on.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { WebSocket, WebSocketServer } from 'ws';
import { error, readBody, writeAnswer, type Answer } from './answers.js';
import { HandoffHooks, STEPS, type HandoffApp } from './handoff.js';
import { createVerifier, earlyRefusal, type Verifier } from './proofs.js';
import { receivePush, type Deliver } from './push.js';
import { RoomTable } from './rooms.js';
import { SocketStates } from './socket-states.js';
import { upgrade, type ResumedSocket, type SocketInfo } from './upgrade.js';

export const DEFAULT_PUSH_PATH = '/_roomgate/push';
export const DEFAULT_HANDOFF_PATH = '/_roomgate/handoff';
/** A call's body is read up to this by default: roomgate's handoff.maxStateBytes default (16 MiB). */
const BODY_MAX_BYTES = 16 << 20;

export interface BackendKitOptions extends HandoffApp {
  /** This backend's id in roomgate's configuration (ROOMGATE_BACKEND_ID): the destination every call names. */
  readonly backendId: string;
  /** This backend's keys, asked at every call (keysFromEnv, or a rotation's newest set). */
  readonly keys: () => readonly string[];
  /** The app's WebSocket server (noServer: true); the kit hands it the upgrades it accepts. */
  readonly wss: WebSocketServer;
  /** A socket accepted (not a resumed one): the app greets it and serves it. */
  onSocket(ws: WebSocket, req: IncomingMessage, info: SocketInfo): void;
  /** Delivers a push to the room's sockets here (`rooms.sockets(room)`); how many got it. */
  readonly deliver: Deliver;
  /** The app's state of `room` is stale (a release, or a newer placement of a room with no socket here). */
  onDrop?(room: string): void;
  /** Resume: a socket's own state for an export (JSON-able; undefined: nothing to resume it with). */
  exportSocket?(room: string, ws: WebSocket): unknown;
  /** Resume: a socket roomgate moved here goes on from its state; send no greeting. */
  resumeSocket?(ws: WebSocket, req: IncomingMessage, resumed: ResumedSocket): void;
  readonly pushPath?: string;
  readonly handoffPath?: string;
  /** The hello's version (default 2 when the app gives applyMessages; 1: the hooks of version 1). */
  readonly handoffVersion?: 1 | 2;
  /** Offer resume in the hello (default: when the app gives exportSocket and resumeSocket). */
  readonly resume?: boolean;
  /**
   * A socket routed under an older epoch than the room is held under here (it was routed before a
   * newer placement) is refused before accept, 403 (default true); false accepts it as any other
   * (docs/ownership.md: "it can be refused"). Pushes under an older epoch are refused either way.
   */
  readonly refuseOlderSockets?: boolean;
  readonly log?: (line: string) => void;
  /** A call's body is read up to this (default 16 MiB, roomgate's handoff.maxStateBytes default); past it 413. */
  readonly maxBodyBytes?: number;
  /** The replay window (default 60 s) and the clock (tests). */
  readonly windowS?: number;
  readonly now?: () => number;
}

export interface BackendKit {
  readonly rooms: RoomTable<WebSocket>;
  readonly verify: Verifier;
  /** Serves roomgate's calls (push, handoff hooks); false when the request is none of them. */
  handleRequest(req: IncomingMessage, res: ServerResponse): boolean;
  /** The fence and resume on one WebSocket upgrade (call it from the server's 'upgrade' for the app's socket paths). */
  handleUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** What the hello answers. */
  hello(): { version: number; messages?: true; resume?: true };
  /** Clears the lease timers (shutdown). */
  close(): void;
}

function pathOf(url: string | undefined): string {
  const raw = url ?? '/';
  const q = raw.indexOf('?');
  return q < 0 ? raw : raw.slice(0, q);
}

export function createBackendKit(o: BackendKitOptions): BackendKit {
  const log = o.log ?? ((line: string) => process.stderr.write(`roomgate backend kit: ${line}\n`));
  const rooms = new RoomTable<WebSocket>((room) => {
    resumable.drop(room);
    o.onDrop?.(room);
  });
  const verify = createVerifier({ backendId: o.backendId, keys: o.keys, ...(o.windowS === undefined ? {} : { windowS: o.windowS }), ...(o.now === undefined ? {} : { now: o.now }) });
  const resumable = new SocketStates();
  const ids = new WeakMap<WebSocket, string>();
  const resume = (o.resume ?? true) && o.exportSocket !== undefined && o.resumeSocket !== undefined && o.applyMessages !== undefined && o.handoffVersion !== 1;
  const socketStates = (room: string): Map<string, unknown> => {
    const out = new Map<string, unknown>();
    for (const ws of rooms.sockets(room)) {
      const id = ids.get(ws);
      const state = id === undefined ? undefined : o.exportSocket?.(room, ws);
      if (id !== undefined && state !== undefined) out.set(id, state);
    }
    return out;
  };
  const hooks = new HandoffHooks({ rooms, verify, app: o, version: o.handoffVersion ?? 2, socketStates: resume ? socketStates : null, resumable, log });
  const pushPath = o.pushPath ?? DEFAULT_PUSH_PATH;
  const handoffBase = (o.handoffPath ?? DEFAULT_HANDOFF_PATH).replace(/\/+$/, '');

  /** What roomgate's call gets before its body is read: 404, 405, or 403 without a proof that can hold. */
  function before(req: IncomingMessage, step: string | null): Answer | null {
    if (step !== null && !STEPS.some((st) => st === step)) return error(404, 'no such handoff step');
    if (req.method !== 'POST') return error(405, 'POST only');
    const refused = earlyRefusal({ backendId: o.backendId, keys: o.keys, ...(o.windowS === undefined ? {} : { windowS: o.windowS }), ...(o.now === undefined ? {} : { now: o.now }) }, req.headers);
    return refused === null ? null : error(403, `${step === null ? 'push' : 'handoff'} refused: ${refused}`);
  }

  async function answer(req: IncomingMessage, step: string | null): Promise<Answer> {
    const early = before(req, step);
    if (early !== null) {
      req.resume();
      return early;
    }
    const body = await readBody(req, o.maxBodyBytes ?? BODY_MAX_BYTES);
    if (body === 'too-large') return error(413, 'too large');
    if (body === 'broken') return error(400, 'the body did not arrive');
    return step === null ? receivePush(rooms, verify, o.deliver, req.method, req.headers, body) : hooks.call(step, req.method, req.headers, body);
  }

  function handleRequest(req: IncomingMessage, res: ServerResponse): boolean {
    const path = pathOf(req.url);
    const step = path.startsWith(`${handoffBase}/`) ? path.slice(handoffBase.length + 1) : null;
    if (path !== pushPath && step === null) return false;
    answer(req, step).then(
      (a) => writeAnswer(res, a),
      (err: unknown) => {
        // The app's part threw (deliver, exportRoom, importRoom): a 500, never a crash.
        log(`${step === null ? 'push' : `handoff ${step}`} failed: ${err instanceof Error ? err.message : String(err)}`);
        if (!res.headersSent) writeAnswer(res, error(500, 'the call could not be served'));
        else res.destroy();
      },
    );
    return true;
  }

  const upgradeOptions = {
    wss: o.wss,
    rooms,
    verify,
    resumable,
    resume,
    ids,
    refuseOlder: o.refuseOlderSockets ?? true,
    onSocket: (ws: WebSocket, req: IncomingMessage, info: SocketInfo) => o.onSocket(ws, req, info),
    onResume: (ws: WebSocket, req: IncomingMessage, r: ResumedSocket) => o.resumeSocket?.(ws, req, r),
  };
  return {
    rooms,
    verify,
    handleRequest,
    handleUpgrade: (req, socket, head) => upgrade(upgradeOptions, req, socket, head),
    hello: () => hooks.hello(),
    close: () => hooks.close(),
  };
}
