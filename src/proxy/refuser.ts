// The side effects of a refusal (src/http/refusals.ts holds what it says): a request id, one log
// line naming it with the detail the client is not told (which backend, why), and the count by
// code. A storm of one refusal (every backend down under load) must not become a log storm: past
// LOG_BURST lines a second for one code, the rest of that second are only counted, and the next
// line says how many were left out.
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import { renderRefusal, type ErrorPages, type Refusal, type RefusalCode, type RenderedRefusal, REFUSALS } from '../http/refusals.js';

const LOG_BURST = 10;

export interface RefuserOptions {
  readonly pages: ErrorPages;
  readonly logger: Logger;
  readonly metrics: Metrics;
}

export class Refuser {
  private readonly window = new Map<RefusalCode, { second: number; logged: number; skipped: number }>();

  constructor(private readonly o: RefuserOptions) {}

  /** The answer to write for `r` to a client whose Accept is `accept`; logged and counted once. */
  render(r: Refusal, accept: string | undefined): RenderedRefusal {
    const requestId = randomBytes(8).toString('hex');
    this.o.metrics.refusals.inc({ code: r.code });
    this.log(r, requestId);
    return renderRefusal(r, requestId, accept, this.o.pages);
  }

  private log(r: Refusal, requestId: string): void {
    const second = Math.floor(Date.now() / 1000);
    let w = this.window.get(r.code);
    if (w === undefined || w.second !== second) {
      const skipped = w?.skipped ?? 0;
      w = { second, logged: 0, skipped: 0 };
      this.window.set(r.code, w);
      if (skipped > 0) this.o.logger.info({ code: r.code, skipped }, 'refusals left out of the log in the last second');
    }
    if (w.logged >= LOG_BURST) {
      w.skipped++;
      return;
    }
    w.logged++;
    const entry = REFUSALS[r.code];
    this.o.logger.info({ requestId, code: r.code, status: entry.status, backend: r.backend ?? 'none', detail: r.detail, why: entry.log }, 'request refused');
  }
}

/** `proxy.errorPages` read into memory (at start: a request never waits on the disk). */
export function readErrorPages(list: readonly { readonly status: number; readonly file: string }[]): ErrorPages {
  return new Map(list.map((p) => [p.status, readFileSync(p.file, 'utf8')]));
}
