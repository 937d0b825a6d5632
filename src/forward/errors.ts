// Names for backend failures (for metrics, logs and retry rules), and the refusal a client gets
// for one (src/http/refusals.ts).
import { tlsFailure } from '../backends/backend-tls.js';
import type { Refusal } from '../http/refusals.js';

export type ErrorKind = 'refused' | 'connect-timeout' | 'unreachable' | 'tls' | 'timeout' | 'reset' | 'other';

export function classifyError(err: NodeJS.ErrnoException): ErrorKind {
  // An https backend whose certificate fails verification, or whose handshake fails.
  if (tlsFailure(err) !== null) return 'tls';
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'refused';
    case 'ECONNTIMEOUT':
      return 'connect-timeout';
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EADDRNOTAVAIL':
      return 'unreachable';
    case 'ERESPONSETIMEOUT':
      return 'timeout';
    case 'ECONNRESET':
    case 'EPIPE':
      return 'reset';
    default:
      return 'other';
  }
}

/**
 * The backend could not be reached at all: nothing was sent, so it is marked down and skipped. A
 * TLS failure is one too: the request is written only once the handshake is complete and verified.
 */
export function isConnectFailure(kind: ErrorKind): boolean {
  return kind === 'refused' || kind === 'connect-timeout' || kind === 'unreachable' || kind === 'tls';
}

/** Why a backend is marked down after a failed connection: the kind, or the TLS failure in full. */
export function downReason(err: NodeJS.ErrnoException, kind: ErrorKind): string {
  return (kind === 'tls' && tlsFailure(err)) || kind;
}

/** What the client gets when its backend failed before answering: 504 for a timeout, else 502. */
export function backendFailure(kind: ErrorKind, backend: string): Refusal {
  return kind === 'timeout' ? { code: 'backend-timeout', backend, detail: kind } : { code: 'backend-unavailable', retryAfterS: 1, backend, detail: kind };
}
