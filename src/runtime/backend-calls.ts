// The signer of every call roomgate makes to a backend's own endpoints (pushes, the handoff hooks)
// and the record of each one made. One object for both, so no call can be signed without being
// recorded: a backend that sees a call roomgate's /events and roomgate_backend_calls_total do not
// list knows it did not come from roomgate (docs/security.md, "Calls to backends").
//
// The call secrets can change while the gateway runs (a reload: rotation without a restart), so
// they are read at each signature, never copied by the callers.
import type { Counter } from 'prom-client';
import { signCall, type CallClaims, type CallPurpose } from '../http/call-proof.js';

export interface BackendCallRecord {
  /** ISO time the call was sent. */
  readonly at: string;
  readonly backend: string;
  /** The proof's purpose: push, push-fanout, handoff-hello, -export, -import, -release, -resume. */
  readonly call: CallPurpose;
  /** The message id or handoff id the call named. */
  readonly id: string;
  /** The room it named, '' for none (hello, a fan-out). */
  readonly room: string;
  /** The HTTP status the backend answered, or timeout, unreachable, too-large. */
  readonly result: string;
  /** Time to the answer (ms, rounded). */
  readonly ms: number;
}

/** Past this many records the oldest go: /events shows the latest. */
const KEPT = 200;

export class BackendCalls {
  private secrets: readonly string[];
  private readonly records: BackendCallRecord[] = [];

  constructor(
    secrets: readonly string[],
    private readonly counter?: Counter<'backend' | 'call' | 'result'>,
  ) {
    this.secrets = secrets;
  }

  /** Whether calls can be signed at all (backendCalls.secrets is not empty). */
  get signed(): boolean {
    return this.secrets.length > 0;
  }

  /** A reload's backendCalls.secrets: every call from now on is signed with them. */
  setSecrets(secrets: readonly string[]): void {
    this.secrets = secrets;
  }

  /** The proof fields of a call made now to `claims.destination` (src/http/call-proof.ts). */
  sign(claims: CallClaims): string[] {
    return signCall(this.secrets, claims, Date.now());
  }

  /**
   * Notes a call once its outcome is known: `result` is the answer's status, or why there was none.
   * `startedMs`: Date.now() when it was sent.
   */
  record(c: { backend: string; call: CallPurpose; id: string; room: string; result: number | 'timeout' | 'unreachable' | 'too-large'; startedMs: number }): void {
    const now = Date.now();
    const result = String(c.result);
    this.counter?.inc({ backend: c.backend, call: c.call, result: typeof c.result === 'number' ? `${Math.floor(c.result / 100)}xx` : c.result });
    this.records.push({ at: new Date(c.startedMs).toISOString(), backend: c.backend, call: c.call, id: c.id, room: c.room, result, ms: Math.round(now - c.startedMs) });
    if (this.records.length > KEPT) this.records.shift();
  }

  /** Oldest first; `backend`/`id` narrow it to one backend or one handoff id. */
  recent(filter: { backend?: string; id?: string } = {}): BackendCallRecord[] {
    return this.records.filter((r) => (filter.backend === undefined || r.backend === filter.backend) && (filter.id === undefined || r.id === filter.id));
  }
}
