// With --workers N each worker samples its own figures for the status page's plots; the status
// page is answered by one worker. So the primary asks every ready worker for its history once per
// history step, merges them (src/observability/history.ts, mergeHistories) and hands the result to
// every worker, which plots it instead of its own while it is fresh. One timer in the primary; a
// worker that does not answer is left out of that round (its figures are missing, not stale).
import { HISTORY_STEP_MS, mergeHistories, type HistorySnapshot } from '../observability/history.js';
import type { Logger } from '../observability/logger.js';
import type { RpcPeer } from './ipc-rpc.js';
import { HISTORY, MERGED_HISTORY } from './protocol.js';

/** Asked this long after each slot began: after every worker sampled it (they sample at +100 ms). */
const MERGE_OFFSET_MS = 1_000;
const HISTORY_TIMEOUT_MS = 2_000;

export class HistoryMerger {
  private timer: NodeJS.Timeout | null = null;
  private quietUntil = 0;

  constructor(
    private readonly peers: () => readonly RpcPeer[],
    private readonly logger: Logger,
    private readonly stepMs = HISTORY_STEP_MS,
  ) {}

  start(): void {
    if (this.timer) return;
    this.timer = setTimeout(
      () => {
        void this.round();
        this.timer = setInterval(() => void this.round(), this.stepMs);
        this.timer.unref();
      },
      this.stepMs - (Date.now() % this.stepMs) + MERGE_OFFSET_MS,
    );
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer); // clears an interval too
    this.timer = null;
  }

  /** One merge: every worker's history, merged, sent to every worker. */
  async round(): Promise<HistorySnapshot | null> {
    const peers = this.peers();
    const results = await Promise.allSettled(peers.map((p) => p.call<HistorySnapshot>(HISTORY, [], HISTORY_TIMEOUT_MS)));
    const ok = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    if (ok.length < results.length && Date.now() >= this.quietUntil) {
      this.quietUntil = Date.now() + 60_000; // once a minute at most
      this.logger.warn({ answered: ok.length, workers: results.length }, 'status history: a worker did not answer; its figures are missing from the plots');
    }
    const merged = mergeHistories(ok);
    if (merged === null) return null;
    for (const p of peers) if (!p.closed) p.emit(MERGED_HISTORY, merged);
    return merged;
  }
}
