// Opens a connection to a backend for a WebSocket tunnel: plain TCP for an http:// backend, TLS for
// an https:// one (verified as `backendTls` says). Either way the caller gets a Socket, one `ready`
// call once the handshake may be written, and every read through one (nread, buf) callback:
//   - TCP: net's onread, so reads land in the caller's buffer, which the next read reuses;
//   - TLS: a TLS socket has no onread, so each decrypted chunk is handed over as it is. Node never
//     reuses that chunk, so the callback's contract (buf[0, nread) is valid during the call, and
//     while reading is paused) holds, and no copy is made.
// In both cases a callback that returns false pauses reading until the caller resumes the socket.
// `ready` is 'connect' for TCP and 'secureConnect' for TLS: the handshake is complete and the
// certificate verified before any byte of the request is written; a verification failure is an
// 'error' (classified 'tls' by errors.ts), as a refused connection is.
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { tlsOptions, type BackendTls } from '../backends/backend-tls.js';
import { backendHosts } from '../backends/host-addresses.js';

/** Where a backend listens; `tls` for an https:// backend. */
export interface BackendAddress {
  readonly host: string;
  readonly port: number;
  readonly tls?: boolean;
}

/** Every read of the connection; `this` is the socket. False pauses reading until resume(). */
export type ReadCallback = (this: Socket, nread: number, buf: Uint8Array) => boolean;

const kRead = Symbol('roomgate.backendRead');
type ReadingSocket = Socket & { [kRead]?: ReadCallback };

/**
 * Connects to `backend`. Reads go to `onRead` (through `buffer` for TCP); `ready` runs once, with
 * the socket as `this`, when bytes may be written. Errors and close are the caller's listeners'.
 */
export function connectBackend(backend: BackendAddress, tls: BackendTls, buffer: Buffer, onRead: ReadCallback, ready: (this: Socket) => void): Socket {
  if (!backend.tls) {
    const socket = netConnect({ host: backend.host, port: backend.port, lookup: backendHosts.lookup, onread: { buffer, callback: onRead } });
    socket.once('connect', ready);
    return socket;
  }
  const socket: ReadingSocket = tlsConnect({ host: backend.host, port: backend.port, lookup: backendHosts.lookup, ...tlsOptions(tls, backend.host) });
  socket[kRead] = onRead;
  socket.on('data', onTlsData);
  socket.once('secureConnect', ready);
  return socket;
}

// One listener for every TLS socket (no closure per socket), reaching its callback by symbol.
function onTlsData(this: ReadingSocket, chunk: Buffer): void {
  const onRead = this[kRead];
  if (onRead && onRead.call(this, chunk.length, chunk) === false) this.pause();
}
