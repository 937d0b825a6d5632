// The canonical request: the one value every front hands the request pipeline, whatever its wire
// form (the byte-level HTTP/1.1 front, node:http over plain TCP or TLS, an HTTP/2 stream, an
// HTTP/2 extended CONNECT). The front's head check has passed it already (request-head.ts,
// h2-request-head.ts, lean-request-head.ts and the canonical target of target.ts), so from here on
// no rule reads the wire: the pipeline and the paths below it read these fields and nothing else
// of the request. The transport's own objects (a ServerResponse, the byte-level connection, the
// upgraded socket) travel beside it, for the bytes only.
import type { IncomingMessage } from 'node:http';
import type { LeanHandshake, LeanHead } from './lean-request-head.js';
import { peerAddress } from './peer.js';

/** The body a request's head declares. */
export type BodyDeclared =
  /** No Content-Length and no Transfer-Encoding. */
  | 'none'
  /** Content-Length: 0. */
  | 'empty'
  /** Bytes to read: a length over 0, or a chunked (or HTTP/2 DATA) body. */
  | 'bytes';

/** What a WebSocket handshake asks for, as its head says it (checked by the upgrade path's rules). */
export interface WebSocketAsk {
  /** The Upgrade field's value. */
  readonly upgrade: string | undefined;
  readonly key: string | undefined;
  readonly version: string | undefined;
}

export interface ClientRequest {
  readonly method: string;
  /**
   * The canonical target (src/http/target.ts): dot segments resolved, escapes normalised, the
   * absolute form reduced to origin form. The room key is read from it, and the backend gets it
   * (after the room prefix is stripped).
   */
  readonly target: string;
  /** The one Host (HTTP/2: :authority). */
  readonly host: string | undefined;
  readonly transport: 'http/1.1' | 'h2';
  /** The client's connection is TLS. */
  readonly encrypted: boolean;
  /** The client's address, remembered when its connection opened (src/http/peer.ts). */
  readonly peer: string;
  /** A WebSocket handshake (an HTTP/1.1 upgrade or an HTTP/2 extended CONNECT), else null. */
  readonly upgrade: WebSocketAsk | null;
  /** The fields as received, name and value alternating (the forwarding headers are made from them). */
  readonly rawHeaders: readonly string[];
  readonly cookie: string | undefined;
  /** The configured room header's value (room.header), or undefined. */
  readonly roomHeader: string | string[] | undefined;
  readonly body: BodyDeclared;
}

const ZEROS = /^0+$/;

/** The body a node:http (or HTTP/2 compatibility) request's head declares. */
export function bodyDeclared(req: IncomingMessage): BodyDeclared {
  // An HTTP/2 request with DATA and no length is marked chunked by its head check.
  if (req.headers['transfer-encoding'] !== undefined) return 'bytes';
  const cl = req.headers['content-length'];
  if (cl === undefined) return 'none';
  // The head check let only digits through; "00" is a length of 0 too.
  return ZEROS.test(cl) ? 'empty' : 'bytes';
}

/**
 * The canonical request of a node:http or HTTP/2 request whose head check passed; null when the
 * client reset its connection before its address could be read (nobody would get an answer, and
 * a request from an unknown sender is not sent on as one).
 */
export function requestOf(req: IncomingMessage, roomHeader: string, upgrade: boolean): ClientRequest | null {
  // Read now: an h2 request's socket is a view of its connection that throws once that is gone.
  const peer = peerAddress(req.socket);
  if (peer === undefined) return null;
  const h = req.headers;
  return {
    method: req.method ?? '',
    target: req.url ?? '/',
    host: h.host ?? (req as { authority?: string }).authority,
    transport: req.httpVersionMajor === 2 ? 'h2' : 'http/1.1',
    encrypted: (req.socket as { encrypted?: boolean }).encrypted === true,
    peer,
    upgrade: upgrade ? { upgrade: h.upgrade, key: h['sec-websocket-key'] as string | undefined, version: h['sec-websocket-version'] as string | undefined } : null,
    rawHeaders: req.rawHeaders,
    cookie: h.cookie,
    roomHeader: h[roomHeader],
    body: bodyDeclared(req),
  };
}

/**
 * The canonical request of a head the byte-level front read (src/http/lean-request-head.ts: GET
 * or HEAD without a body, one Host, its target already canonical), or of its WebSocket handshake.
 */
export function leanRequestOf(head: LeanHead, handshake: LeanHandshake | null, peer: string, encrypted: boolean): ClientRequest {
  return {
    method: head.method,
    target: head.url,
    host: head.host,
    transport: 'http/1.1',
    encrypted,
    peer,
    upgrade: handshake === null ? null : { upgrade: handshake.upgrade, key: handshake.key, version: handshake.version },
    rawHeaders: head.rawHeaders,
    cookie: head.cookie,
    roomHeader: head.roomHeader,
    body: 'none',
  };
}
