// /healthz and /readyz: answered by roomgate itself on every listener, before anything else,
// never touching Redis or a backend (a platform's probes must not depend on either).

/** The health paths (roomgate's own behind the per-tab prefix too: src/http/target.ts). */
export const HEALTH_PATHS = ['/healthz', '/readyz'] as const;

/** The answer to a health path (with or without a query string), or null for any other path. */
export function healthAnswer(url: string | undefined, isReady: () => boolean): { status: number; body: string } | null {
  if (url === undefined) return null;
  if (url === '/healthz' || url.startsWith('/healthz?')) return { status: 200, body: 'ok\n' };
  if (url === '/readyz' || url.startsWith('/readyz?')) {
    return isReady() ? { status: 200, body: 'ready\n' } : { status: 503, body: 'shutting down\n' };
  }
  return null;
}
