/**
 * The soak's clients: a child process (bench/soak/run.ts starts one or more, each under the
 * open-files limit) that holds game sockets through the gateway and churns upgrades, speaking the
 * demo backend's djust-like protocol: the server's `connect` frame, the client's `mount` with its
 * room, `mounted`, then `event` frames the backend broadcasts to the room as `patch` frames.
 * It reuses the suite's lean client (bench/suite/wsclient.ts), browser headers, cookie and ticker.
 *
 * Commands (IPC, each answered with {id, ok, ...} or {id, ok: false, error}):
 *   hold {..., from, count}   opens `count` held sockets in rooms of `roomSize` (rooms `from/roomSize`
 *                             on), at most `ratePerS` new ones a second, each retried twice on
 *                             failure (a 503 of the gateway's admission limits says "retry");
 *                             each then sends an event every `inputMs` (random phase).
 *   churn-start {...}         opens and closes `total` sockets at `ratePerS`: each opens, mounts
 *                             (half in a fresh room, half as a 5th member of a held room), then
 *                             closes, half with a close frame, half abruptly (a lost network);
 *                             except 1 in ABANDON_EVERY, whose client gives its handshake up
 *                             as soon as it is sent (a FIN before any answer: what clients past
 *                             their own timeout do when the gateway is overloaded).
 *   stats                     counters so far: held sockets open, held sockets dropped, frames
 *                             received, events sent, churn done/failed/in flight, top errors.
 *   churn-stop                stops starting churn; answers when the ones in flight are done.
 *   close                     closes every held socket.
 * Exits when the IPC channel closes.
 */
import { createRoomSigner, type RoomSigner } from '../../src/room/signing.js';
import { serveIpc } from '../suite/ipc-child.js';
import { browserHeaders, cookieHeader } from '../suite/protocol.js';
import { Ticker } from '../suite/ticker.js';
import { WsClient } from '../suite/wsclient.js';

export interface Target {
  readonly port: number;
  /** roomgate's cookie secret: the clients send the signed room cookie as a browser would. */
  readonly secret: string;
  readonly timeoutMs: number;
}

export type Command =
  | ({ cmd: 'hold'; id: number; from: number; count: number; roomSize: number; inputMs: number; ratePerS: number } & Target)
  | ({ cmd: 'churn-start'; id: number; total: number; ratePerS: number; maxInflight: number; prefix: string } & Target)
  | { cmd: 'stats'; id: number }
  | { cmd: 'churn-stop'; id: number; timeoutMs: number }
  | { cmd: 'close'; id: number };

export interface Stats {
  held: number;
  dropped: number;
  frames: number;
  inputs: number;
  churnDone: number;
  churnFailed: number;
  churnInflight: number;
  /** Held sockets that did not open after 3 tries. */
  heldFailed: number;
  errors: string[];
}

export interface HoldResult {
  opened: number;
  failed: number;
  errors: string[];
}

interface Held {
  readonly ws: WsClient;
  seq: number;
}

const held = new Set<Held>();
const heldRooms: string[] = [];
const errors = new Map<string, number>();
let frames = 0;
let inputs = 0;
let dropped = 0;
let heldFailed = 0;
let closing = false;
const churn: { done: number; failed: number; inflight: number; timer: NodeJS.Timeout | undefined; idle: (() => void) | undefined } = {
  done: 0,
  failed: 0,
  inflight: 0,
  timer: undefined,
  idle: undefined,
};
let signer: RoomSigner | undefined;
let ticker: Ticker<Held> | undefined;

function noteError(msg: string): void {
  errors.set(msg, (errors.get(msg) ?? 0) + 1);
}

function signerFor(secret: string): RoomSigner {
  signer ??= createRoomSigner({ secrets: [secret], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 });
  return signer;
}

/**
 * Opens one socket to `room` and resolves with it once the backend said `mounted`; rejects on
 * any failure before that (HTTP status, close, timeout). After `mounted`, `onFrame` gets every
 * frame and `onEnd` the end of the socket.
 */
function mount(t: Target, room: string, seed: number, onFrame: () => void, onEnd: (err?: Error) => void): Promise<WsClient> {
  return new Promise((resolve, reject) => {
    const cookie = cookieHeader(room, signerFor(t.secret).sign(room, Date.now()), seed);
    const ws = new WsClient({ host: '127.0.0.1', port: t.port, path: '/ws/live/', headers: browserHeaders(`http://127.0.0.1:${t.port}`, cookie), timeoutMs: t.timeoutMs });
    let mounted = false;
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`not mounted within ${t.timeoutMs} ms`));
    }, t.timeoutMs);
    ws.onMessage = (data) => {
      if (mounted) return onFrame();
      // The demo backend speaks first ({"type":"connect"}), then answers the mount.
      if (data.includes('"type":"connect"')) ws.sendText(`{"type":"mount","room":"${room}"}`);
      else if (data.includes('"type":"mounted"')) {
        mounted = true;
        clearTimeout(timer);
        resolve(ws);
      }
    };
    ws.onClose = (err) => {
      clearTimeout(timer);
      if (mounted) onEnd(err);
      else reject(err ?? new Error('closed before mounted'));
    };
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function hold(c: Extract<Command, { cmd: 'hold' }>): Promise<HoldResult> {
  closing = false;
  ticker ??= new Ticker<Held>(c.inputMs, (h) => {
    h.seq++;
    h.ws.sendText(`{"type":"event","data":{"seq":${h.seq},"x":1,"y":2}}`);
    inputs++;
  });
  const tick = ticker;
  for (let r = Math.floor(c.from / c.roomSize); r * c.roomSize < c.from + c.count; r++) heldRooms.push(`h${r}`);
  let opened = 0;
  let failed = 0;
  const failures = new Map<string, number>();
  const openOne = async (i: number): Promise<void> => {
    const room = `h${Math.floor(i / c.roomSize)}`;
    for (let attempt = 0; ; attempt++) {
      try {
        let h: Held | undefined;
        const ws = await mount(
          c,
          room,
          i,
          () => void frames++,
          () => {
            if (!h) return;
            tick.delete(h);
            if (held.delete(h) && !closing) dropped++;
          },
        );
        h = { ws, seq: 0 };
        held.add(h);
        tick.add(h, Math.random());
        opened++;
        return;
      } catch (err) {
        if (attempt >= 2) {
          failed++;
          heldFailed++;
          const m = (err as Error).message;
          failures.set(m, (failures.get(m) ?? 0) + 1);
          return;
        }
        await sleep(1_000);
      }
    }
  };
  // Paced: one start every 1/ratePerS s, whatever the answers take.
  const pending: Promise<void>[] = [];
  const t0 = performance.now();
  for (let k = 0; k < c.count; k++) {
    const due = t0 + (k * 1000) / c.ratePerS;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    pending.push(openOne(c.from + k));
  }
  await Promise.all(pending);
  return { opened, failed, errors: [...failures].map(([m, n]) => `${n} x ${m}`).slice(0, 5) };
}

/** 1 churn upgrade in this many is abandoned right behind its handshake (see churn-start). */
const ABANDON_EVERY = 10;

/** Sends a handshake for `room` and goes at once (WsClient.abandon): counted as churned. */
function abandonOne(t: Target, room: string, seq: number): void {
  const cookie = cookieHeader(room, signerFor(t.secret).sign(room, Date.now()), seq);
  new WsClient({ host: '127.0.0.1', port: t.port, path: '/ws/live/', headers: browserHeaders(`http://127.0.0.1:${t.port}`, cookie), timeoutMs: t.timeoutMs }).abandon();
  churn.done++;
}

function churnOne(t: Target, room: string, seq: number): void {
  if (seq % ABANDON_EVERY === ABANDON_EVERY - 1) return abandonOne(t, room, seq);
  churn.inflight++;
  const end = (ok: boolean): void => {
    churn.inflight--;
    if (ok) churn.done++;
    else churn.failed++;
    if (churn.inflight === 0) churn.idle?.();
  };
  mount(t, room, seq, () => undefined, () => undefined).then(
    (ws) => {
      // Half close as a page does, half vanish as a lost network does.
      if (seq % 4 < 2) ws.close();
      else ws.terminate();
      end(true);
    },
    (err: Error) => {
      noteError(`churn: ${err.message}`);
      end(false);
    },
  );
}

function churnStart(c: Extract<Command, { cmd: 'churn-start' }>): void {
  const t0 = performance.now();
  let started = 0;
  churn.timer = setInterval(() => {
    const due = Math.min(c.total, Math.floor(((performance.now() - t0) / 1000) * c.ratePerS));
    while (started < due && churn.inflight < c.maxInflight) {
      const seq = started++;
      // Half in a fresh room (placed, then empty and forgotten), half joining a held room.
      const room = seq % 2 === 0 || heldRooms.length === 0 ? `${c.prefix}${seq}` : heldRooms[Math.floor(Math.random() * heldRooms.length)]!;
      churnOne(c, room, seq);
    }
    // Behind by more than maxInflight allows: skip, so the rate stays what was asked.
    if (started < due) started = due;
    if (started >= c.total) clearInterval(churn.timer);
  }, 20);
}

async function churnStop(timeoutMs: number): Promise<void> {
  clearInterval(churn.timer);
  if (churn.inflight === 0) return;
  await Promise.race([new Promise<void>((r) => (churn.idle = r)), sleep(timeoutMs)]);
  churn.idle = undefined;
}

function stats(): Stats {
  return {
    held: held.size,
    dropped,
    frames,
    inputs,
    churnDone: churn.done,
    churnFailed: churn.failed,
    churnInflight: churn.inflight,
    heldFailed,
    errors: [...errors].map(([m, n]) => `${n} x ${m}`).slice(0, 5),
  };
}

async function handle(c: Command): Promise<unknown> {
  switch (c.cmd) {
    case 'hold':
      return hold(c);
    case 'churn-start':
      churnStart(c);
      return {};
    case 'stats':
      return stats();
    case 'churn-stop':
      await churnStop(c.timeoutMs);
      return stats();
    case 'close': {
      closing = true;
      ticker?.clear();
      for (const h of held) h.ws.close();
      held.clear();
      return {};
    }
  }
}

serveIpc<Command>(handle);
