// A connection the byte-level front hands to node:http in the middle of a request head keeps
// that head's deadline. node:http starts its own header clock when it gets the connection, so
// without this a head trickled on the byte-level path first (up to listen.headersTimeoutMs) and
// then made unusual by one byte would get a second headersTimeoutMs from node:http. The deadline
// is cleared once node:http has a whole head (a request, an upgrade, a CONNECT) or the
// connection closes.
import type { Socket } from 'node:net';

const kDeadline = Symbol('roomgate.headDeadline');
type Held = Socket & { [kDeadline]?: NodeJS.Timeout };

/** At atMs, unless node:http parsed a head by then, onExpire(socket) (which answers 408). */
export function keepHeadDeadline(socket: Socket, atMs: number, onExpire: (socket: Socket) => void): void {
  const s = socket as Held;
  clearHeadDeadline(s);
  s[kDeadline] = setTimeout(expire, Math.max(0, atMs - Date.now()), s, onExpire);
  s.once('close', onClose);
}

export function clearHeadDeadline(socket: Socket): void {
  const s = socket as Held;
  const t = s[kDeadline];
  if (t === undefined) return;
  clearTimeout(t);
  s[kDeadline] = undefined;
  s.off('close', onClose);
}

function onClose(this: Socket): void {
  clearHeadDeadline(this);
}

function expire(s: Held, onExpire: (socket: Socket) => void): void {
  s[kDeadline] = undefined;
  s.off('close', onClose);
  if (!s.destroyed && s.writable) onExpire(s);
}
