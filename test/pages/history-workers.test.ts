// Issue 31, item 7 with `start --workers 2`: each worker samples its own figures, the primary
// merges them every step and hands the result back, so the status page (answered by either worker)
// plots the whole gateway: the sockets it plots are the sum over both workers.
import { afterAll, describe, expect, it } from 'vitest';
import type { HistorySnapshot } from '../../src/observability/history.js';
import { Client, startBackends, startGateway, stopAll, waitFor, type GatewayProc } from '../support/processes.js';

afterAll(stopAll);

const PRIMARY_LISTENING = (l: string): boolean => l.includes('"msg":"listening"') && l.includes('"role":"primary"');

async function workerStatus(gw: GatewayProc, worker: number): Promise<{ sockets: number }> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}/status`, { headers: { 'x-roomgate-worker': String(worker) }, signal: AbortSignal.timeout(5_000) });
  expect(res.status).toBe(200);
  return (await res.json()) as { sockets: number };
}

/** The first snapshot of worker `worker`'s status stream (through the primary's admin port). */
async function streamedHistory(gw: GatewayProc, worker: number): Promise<HistorySnapshot> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 5_000);
  try {
    const res = await fetch(`http://127.0.0.1:${gw.adminPort}/_roomgate/status/stream`, { headers: { 'x-roomgate-worker': String(worker) }, signal: ac.signal });
    const reader = res.body!.getReader();
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error('stream ended before a status event');
      text += new TextDecoder().decode(value);
      const m = /event: status\ndata: (.*)\n\n/.exec(text);
      if (m) return (JSON.parse(m[1]!) as { history: HistorySnapshot }).history;
    }
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
}

/** Sockets plotted at the newest sampled slot, summed over the backends. */
function plottedSockets(h: HistorySnapshot): number | null {
  for (let i = h.upgrades.length - 1; i >= h.upgrades.length - 2; i--) {
    const vals = h.backends.map((b) => b.sockets[i]);
    if (vals.some((v) => v !== null && v !== undefined)) return vals.reduce<number>((n, v) => n + (v ?? 0), 0);
  }
  return null;
}

describe('the status page history with --workers 2', () => {
  it('plots the sum of both workers, whichever worker answers', async () => {
    const backends = await startBackends(['b1', 'b2']);
    const gw = await startGateway({ backends, args: ['--workers', '2'], readyLine: PRIMARY_LISTENING, config: { shutdown: { graceMs: 500 } } });
    await waitFor('both workers answer', 15_000, async () => {
      const r = await Promise.all([1, 2].map((w) => workerStatus(gw, w).then(() => true, () => false)));
      return r.every(Boolean);
    });
    // Sockets until both workers hold some (the kernel spreads connections by a hash).
    const clients: Client[] = [];
    let per: number[] = [0, 0];
    for (let i = 0; i < 40 && !(per[0]! > 0 && per[1]! > 0); i++) {
      const c = new Client(`${gw.wsUrl}/ws/live/?room=wk-${i}`);
      await c.join(`wk-${i}`);
      clients.push(c);
      per = await Promise.all([1, 2].map(async (w) => (await workerStatus(gw, w)).sockets));
    }
    expect(per[0], 'sockets through worker 1').toBeGreaterThan(0);
    expect(per[1], 'sockets through worker 2').toBeGreaterThan(0);
    const total = clients.length;
    // Within two or three steps (5 s each) the merged history reaches both workers.
    for (const w of [1, 2]) {
      const h = await waitFor(`worker ${w} plots ${total} sockets`, 20_000, async () => {
        const got = await streamedHistory(gw, w);
        return plottedSockets(got) === total ? got : null;
      }, 500);
      expect(h.backends.map((b) => b.id).sort()).toEqual(['b1', 'b2']);
    }
    await Promise.all(clients.map((c) => c.close()));
  }, 60_000);
});
