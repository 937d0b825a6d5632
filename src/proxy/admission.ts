// Admission limits per backend for WebSocket upgrades: at most N handshakes in flight and at most
// R per second (token bucket). Beyond them the client gets 503 + Retry-After (djust backs off and
// retries), so the reconnect wave after a failover cannot melt the survivor. Per gateway.

export interface AdmissionOptions {
  /** Handshakes in flight per backend; 0 = unlimited. */
  readonly maxInflight: number;
  /** Handshakes started per second per backend (also the burst); 0 = unlimited. */
  readonly perSecond: number;
  readonly retryAfterS: number;
}

interface Bucket {
  inflight: number;
  tokens: number;
  at: number;
}

export class Admission {
  private readonly buckets = new Map<string, Bucket>();
  refused = 0;

  constructor(private readonly o: AdmissionOptions) {}

  get retryAfterS(): number {
    return this.o.retryAfterS;
  }

  /** Takes a slot for a handshake to `backend`; false when a limit is reached. */
  tryAcquire(backend: string, nowMs: number): boolean {
    let b = this.buckets.get(backend);
    if (!b) this.buckets.set(backend, (b = { inflight: 0, tokens: this.o.perSecond, at: nowMs }));
    if (this.o.perSecond > 0) {
      b.tokens = Math.min(this.o.perSecond, b.tokens + ((nowMs - b.at) / 1000) * this.o.perSecond);
      b.at = nowMs;
    }
    if ((this.o.maxInflight > 0 && b.inflight >= this.o.maxInflight) || (this.o.perSecond > 0 && b.tokens < 1)) {
      this.refused++;
      return false;
    }
    if (this.o.perSecond > 0) b.tokens -= 1;
    b.inflight++;
    return true;
  }

  /** The handshake got its answer (or failed): the in-flight slot is free again. */
  release(backend: string): void {
    const b = this.buckets.get(backend);
    if (b && b.inflight > 0) b.inflight--;
  }

  inflight(backend: string): number {
    return this.buckets.get(backend)?.inflight ?? 0;
  }
}
