// Names for backend failures (for metrics, logs and retry rules) and the short answers roomgate
// gives in place of a backend.

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

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

export function plainResponse(
  status: number,
  body: string,
  extra: Record<string, string> = {},
): { headers: Record<string, string>; body: string } {
  return {
    headers: {
      'Content-Type': 'text/plain; charset=utf-8',
      'Content-Length': String(Buffer.byteLength(body)),
      'Cache-Control': 'no-store',
      ...extra,
    },
    body,
  };
}

/** A whole HTTP/1.1 response as text, for sockets no longer owned by Node's HTTP server (upgrades, parse errors). */
export function rawResponse(status: number, body: string, extra: Record<string, string> = {}): string {
  const r = plainResponse(status, body, { ...extra, Connection: 'close' });
  let head = `HTTP/1.1 ${status} ${REASONS[status] ?? 'Error'}\r\n`;
  for (const [k, v] of Object.entries(r.headers)) head += `${k}: ${v}\r\n`;
  return `${head}\r\n${r.body}`;
}
