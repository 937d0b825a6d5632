// The accounting of one proxied request, shared by every path: the backend's in-flight count
// (bounded loads read it) goes up at once and down exactly once, and the request is counted once
// under the status the client got; an attempt that is retried elsewhere is counted only as a
// proxy error (done(null)).
import type { Metrics } from '../observability/metrics.js';
import type { BackendPool } from '../runtime/pool.js';

export function startRequest(pool: BackendPool, metrics: Metrics, backendId: string): (status: number | null) => void {
  pool.requestStarted(backendId);
  let settled = false;
  return (status) => {
    if (settled) return;
    settled = true;
    pool.requestEnded(backendId);
    if (status !== null) metrics.httpRequests.inc({ backend: backendId, status: String(status) });
  };
}
