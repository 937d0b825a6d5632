// Names for backend failures (for metrics, logs and retry rules). roomgate's own short answers
// are in src/http/replies.ts.

export type ErrorKind = 'refused' | 'connect-timeout' | 'unreachable' | 'timeout' | 'reset' | 'other';

export function classifyError(err: NodeJS.ErrnoException): ErrorKind {
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

/** The backend could not be reached at all: nothing was sent, so it is marked down and skipped. */
export function isConnectFailure(kind: ErrorKind): boolean {
  return kind === 'refused' || kind === 'connect-timeout' || kind === 'unreachable';
}
