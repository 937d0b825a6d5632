// TLS session ticket keys, rotated on a schedule (tls.ticketKeyRotationS). A ticket is the
// server's session state encrypted with this key; anyone holding an old key could decrypt the
// sessions of every ticket it issued, so the key is replaced regularly. Node accepts tickets of the
// current key only: a client with an older ticket makes a full handshake. One process makes and
// rotates its own key; a cluster's primary makes one for all workers and sends each new one to
// every worker (src/cluster/), so a session resumes whichever worker a connection reaches.
// Tickets are made and read with the keys of the server's own context (tls.Server.setTicketKeys)
// whichever certificate SNI chose: replacing those replaces them for every name (the tests check
// an SNI name too).
import { randomBytes } from 'node:crypto';
import type { Logger } from '../observability/logger.js';

/** Node's ticket keys: 16 bytes name, 16 bytes HMAC secret, 16 bytes AES key. */
export const TICKET_KEYS_BYTES = 48;

export function newTicketKeys(): Buffer {
  return randomBytes(TICKET_KEYS_BYTES);
}

/**
 * Calls `rotate` with a new key every `everyMs` (0: never); returns the stop function. The timer
 * does not keep the process alive.
 */
export function startTicketKeyRotation(everyMs: number, rotate: (keys: Buffer) => void, logger: Logger): () => void {
  if (everyMs <= 0) return () => undefined;
  let rotations = 0;
  const timer = setInterval(() => {
    rotate(newTicketKeys());
    logger.info({ rotations: ++rotations }, 'TLS session ticket keys rotated');
  }, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
