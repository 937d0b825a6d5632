// The client's address, remembered when its connection opens. Node reads `remoteAddress` from
// the live handle, so a client that resets right after sending a request makes it undefined
// before the request is forwarded; the backend would then see "X-Forwarded-For: unknown" for a
// request that had a perfectly known sender.
import type { Socket } from 'node:net';

const PEER = Symbol('roomgate.peer');
type Remembering = Socket & { [PEER]?: string };

/** Called on 'connection' (or 'secureConnection'): keeps the address for the socket's life. */
export function rememberPeer(socket: Socket): void {
  const addr = socket.remoteAddress;
  if (addr !== undefined) (socket as Remembering)[PEER] = addr;
}

/** The address the connection was opened from, or undefined when it never had one. */
export function peerAddress(socket: Socket): string | undefined {
  return (socket as Remembering)[PEER] ?? socket.remoteAddress;
}
