// The receiver guarantees of docs/push.md ("What a receiver checks") and of the handoff hooks
// (docs/handoff.md, "Every call is signed"), as a list of calls any backend must answer in a
// defined way: forged, stale, re-purposed, moved to another room, epoch, body, sender or backend,
// and replayed calls are refused (403) before anything of them is read; a genuine push is taken;
// the hello answers its version. `roomgate check-backend` sends them to a live app (run.ts); the
// tests send the same list to the examples. Every call names a room made up for the check, so a
// check can run against a backend in use: the only genuine calls are a push to that room (no
// socket holds it) and the hello; the hooks that change a room (export, import, release, resume)
// are sent only forged, which a receiver must refuse untouched.
import { randomBytes } from 'node:crypto';
import { backendKey, signWithKeys, type CallClaims } from '../http/call-proof.js';

export interface ReceiverTarget {
  /** http(s)://host:port of the backend itself (not through roomgate). */
  readonly url: string;
  /** Its id as roomgate names it: the destination of every genuine call. */
  readonly id: string;
  /** Its own keys (`roomgate backend-key ID`): what the genuine calls are signed with. */
  readonly keys: readonly string[];
  /** push.path as the backend serves it; null: not checked. */
  readonly pushPath: string | null;
  /** handoff.path as the backend serves it; null: not checked. */
  readonly handoffPath: string | null;
  /** The app's WebSocket path, for the resume handshake (checked when the hello says resume); default /ws/live/. */
  readonly wsPath?: string;
}

/** What an answer must be: 403; a 2xx; a hello's 200 with `{"version": N}`; a 4xx, never a 101. */
export type Want = 'refused' | 'taken' | 'hello' | 'not-opened';

export interface CheckCall {
  readonly name: string;
  /** Path on the backend. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: string;
  readonly want: Want;
  /** A WebSocket handshake (GET with Upgrade) instead of a POST. */
  readonly upgrade?: true;
}

/** A call's claims (the body as text), when it was signed, and with which keys. */
interface Proof extends Omit<CallClaims, 'body'> {
  readonly body: string;
  readonly nowMs: number;
  readonly keys: readonly string[];
}

function proofFields(p: Proof): Record<string, string> {
  const list = signWithKeys(p.keys, { purpose: p.purpose, destination: p.destination, id: p.id, room: p.room, epoch: p.epoch, sender: p.sender, body: Buffer.from(p.body) }, p.nowMs);
  return Object.fromEntries([0, 2, 4].map((i) => [list[i] as string, list[i + 1] as string]));
}

const SENDER = 'roomgate-check';
const MINUTES_2 = 120_000;

/** The calls to push.path, in the order they must be sent (the replays after the genuine one). */
export function pushCalls(t: ReceiverTarget, path: string, nowMs: number, tag = randomBytes(4).toString('hex')): CheckCall[] {
  const room = `roomgate-check-${tag}`;
  const body = '{"check":"forged"}';
  const genuineBody = '{"check":"genuine"}';
  const fields = (id: string): Record<string, string> => ({ 'Content-Type': 'application/json', 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': '1', 'X-Roomgate-Message-Id': id, 'X-Roomgate-Sender': SENDER });
  const base: Proof = { purpose: 'push', destination: t.id, id: '', room, epoch: '1', sender: SENDER, body, nowMs, keys: t.keys };
  const forged = (name: string, id: string, p: Partial<Proof>, extra: Record<string, string> = {}): CheckCall => ({
    name: `push: ${name}`,
    path,
    headers: { ...fields(id), ...proofFields({ ...base, id, ...p }), ...extra },
    body,
    want: 'refused',
  });
  const otherKey = backendKey(randomBytes(32).toString('hex'), t.id);
  const genuine = { ...fields(`${tag}-g`), ...proofFields({ ...base, id: `${tag}-g`, body: genuineBody }) };
  const signature = genuine['X-Roomgate-Signature'] as string;
  return [
    { name: 'push: unsigned', path, headers: fields(`${tag}-1`), body, want: 'refused' },
    forged('signed with a key that is not its own', `${tag}-2`, { keys: [otherKey] }),
    forged('made for another backend', `${tag}-3`, { destination: `${t.id}~other` }),
    forged('stale (2 minutes old)', `${tag}-4`, { nowMs: nowMs - MINUTES_2 }),
    forged('from the future (2 minutes ahead)', `${tag}-5`, { nowMs: nowMs + MINUTES_2 }),
    forged('proof made for another room', `${tag}-6`, { room: `${room}-other` }),
    forged('proof made for another epoch', `${tag}-7`, { epoch: '2' }),
    forged('proof made for another body', `${tag}-8`, { body: '{}' }),
    forged('proof made for a fan-out', `${tag}-9`, { purpose: 'push-fanout' }),
    forged('proof made for another sender', `${tag}-10`, { sender: 'job:trusted' }),
    forged('proof made for a handoff hook', `${tag}-11`, { purpose: 'handoff-import' }),
    { name: 'push: genuine (to a room no socket holds)', path, headers: genuine, body: genuineBody, want: 'taken' },
    { name: 'push: the genuine one replayed', path, headers: genuine, body: genuineBody, want: 'refused' },
    { name: 'push: replayed with another entry beside it', path, headers: { ...genuine, 'X-Roomgate-Signature': `${signature},v2=00000000:00` }, body: genuineBody, want: 'refused' },
    { name: 'push: replayed with spaces', path, headers: { ...genuine, 'X-Roomgate-Signature': ` ${signature} ` }, body: genuineBody, want: 'refused' },
    {
      name: 'push: a signature that is not ASCII',
      path,
      headers: { ...fields(`${tag}-12`), 'X-Roomgate-Destination': t.id, 'X-Roomgate-Timestamp': String(Math.floor(nowMs / 1000)), 'X-Roomgate-Signature': 'v2=00000000:\u00e9' },
      body,
      want: 'refused',
    },
  ];
}

const STEPS = ['export', 'import', 'release', 'resume'] as const;

/** The calls to the handoff hooks: the hello genuine and forged, every other hook forged only. */
export function handoffCalls(t: ReceiverTarget, path: string, nowMs: number, tag = randomBytes(4).toString('hex')): CheckCall[] {
  const room = `roomgate-check-${tag}`;
  const hello = (name: string, id: string, p: Partial<Proof>, want: Want = 'refused'): CheckCall => ({
    name: `hello: ${name}`,
    path: `${path}/hello`,
    headers: { 'X-Roomgate-Message-Id': id, 'X-Roomgate-Sender': SENDER, ...proofFields({ purpose: 'handoff-hello', destination: t.id, id, room: '', epoch: '', sender: SENDER, body: '', nowMs, keys: t.keys, ...p }) },
    body: '',
    want,
  });
  const calls: CheckCall[] = [
    hello('genuine', `${tag}-h1`, {}, 'hello'),
    { name: 'hello: unsigned', path: `${path}/hello`, headers: { 'X-Roomgate-Message-Id': `${tag}-h2`, 'X-Roomgate-Sender': SENDER }, body: '', want: 'refused' },
    hello('made for another backend', `${tag}-h3`, { destination: `${t.id}~other` }),
    hello('stale (2 minutes old)', `${tag}-h4`, { nowMs: nowMs - MINUTES_2 }),
    hello('proof made for export', `${tag}-h5`, { purpose: 'handoff-export' }),
  ];
  for (const step of STEPS) {
    const id = `${tag}-${step}`;
    const body = step === 'export' ? '{"leaseMs":1000}' : step === 'import' ? '{"check":"forged"}' : '';
    const fields = { 'X-Roomgate-Message-Id': id, 'X-Roomgate-Sender': SENDER, 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': '2' };
    const base: Proof = { purpose: `handoff-${step}`, destination: t.id, id, room, epoch: '2', sender: SENDER, body, nowMs, keys: t.keys };
    calls.push(
      { name: `${step}: unsigned`, path: `${path}/${step}`, headers: fields, body, want: 'refused' },
      { name: `${step}: proof made for hello`, path: `${path}/${step}`, headers: { ...fields, ...proofFields({ ...base, purpose: 'handoff-hello' }) }, body, want: 'refused' },
      { name: `${step}: made for another backend`, path: `${path}/${step}`, headers: { ...fields, ...proofFields({ ...base, destination: `${t.id}~other` }) }, body, want: 'refused' },
    );
  }
  return calls;
}

/**
 * The resume handshake of protocol version 2 (docs/handoff.md, "Deliver"), for a backend whose hello
 * says resume: a GET upgrade of its WebSocket path with X-Roomgate-Resume, signed for
 * handoff-resume-socket over the socket id. Forged ones must be refused (403) before anything is
 * attached; a genuine one for a socket no export carried must not open (a 4xx, never a 101).
 */
export function resumeCalls(t: ReceiverTarget, path: string, nowMs: number, tag = randomBytes(4).toString('hex')): CheckCall[] {
  const room = `roomgate-check-${tag}`;
  const socket = randomBytes(16).toString('base64url').slice(0, 22);
  const id = `${tag}-resume`;
  const fields = { 'X-Roomgate-Message-Id': id, 'X-Roomgate-Sender': SENDER, 'X-Roomgate-Room': room, 'X-Roomgate-Epoch': '2', 'X-Roomgate-Socket': socket, 'X-Roomgate-Resume': id };
  const base: Proof = { purpose: 'handoff-resume-socket', destination: t.id, id, room, epoch: '2', sender: SENDER, body: socket, nowMs, keys: t.keys };
  const call = (name: string, p: Partial<Proof> | null, want: Want = 'refused'): CheckCall => ({
    name: `resume handshake: ${name}`,
    path,
    headers: { ...fields, ...(p === null ? {} : proofFields({ ...base, ...p })) },
    body: '',
    want,
    upgrade: true,
  });
  return [
    call('unsigned', null),
    call('proof made for the resume hook', { purpose: 'handoff-resume' }),
    call('made for another backend', { destination: `${t.id}~other` }),
    call('stale (2 minutes old)', { nowMs: nowMs - MINUTES_2 }),
    call('genuine, for a socket no export carried', {}, 'not-opened'),
  ];
}
