// Issue 37's chaos row: a rolling restart of three demo backends (protocol version 2) with room
// handoff, under 300 rooms, seen by pages that behave as djust's own client does
// (test/support/djust-client.mjs: no re-send, pending events cleared on every close, the HTTP
// fallback with its version check, reload on a version jump). Real processes: a redis-server,
// three demo backends, two gateways sharing it. Each room has a clicking page through one gateway
// (rooms alternate, so both gateways carry clicks) and an idle page through the other; the pages
// use #3186's socket path with the per-tab prefix (/r/<room>/ws/live/).
//
// What is counted, from the room's final owner (the demo keeps each room's last 20 moves with
// their data, and the clicks of one page stay under 20 in this run): every click a page sent is
// either applied once, lost (never applied: refused as room-moving, sent to a closing socket, or a
// failed POST), or doubled. Also: page reloads, client sockets closed, the reconnect gap, and the
// added latency of a click sent during its room's move (until the page sees it applied: its answer,
// or a mount that counts it), over the median of clicks sent outside any move.
//
// GUARANTEES says what is asserted beyond what holds today (no split, no failed drain, every page
// mounted at the end): 'record' (today's main: the figures only), 'lossless' (the cross-gateway hold
// and the HTTP fallback's wait: 0 lost, 0 doubled, 0 reloads, the gap as before: p99 <= 2 s),
// 'resume' (as lossless, and 0 sockets closed, added latency p99 <= 150 ms). Set it with
// ROOMGATE_DJUST_GUARANTEES once the parts it needs are merged.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordChaos } from '../support/chaos.js';
import { demoFrames, type DjustClient, type SentEvent } from '../support/djust-client.mjs';
import { nodeDjustClient } from '../support/djust-node.js';
import { waitFor, type BackendProc, type GatewayProc } from '../support/processes.js';
import { percentile, sleep } from '../support/room-clients.js';
import { drainWithHandoff, handoffTimes, restartBackend, rollingConfig, rollingPlan, type DrainFigures, type RollingCluster } from '../support/rolling-restart.js';
import { startTwoGateways, stopTwoGateways, type TwoGateways } from '../support/two-gateways.js';

type Guarantees = 'record' | 'lossless' | 'resume';
const GUARANTEES = (process.env.ROOMGATE_DJUST_GUARANTEES ?? 'record') as Guarantees;
const ROOMS = 300;
const TOKEN = 'djust-chaos-admin-token-0123456789';
const CLICK_EVERY_MS = [1_500, 3_000] as const;
/** The demo keeps this many moves of a room with their data (examples/demo-backend/room-moves.ts). */
const MOVES_KEPT = 20;

interface Page {
  readonly room: string;
  readonly via: 'A' | 'B';
  readonly clicks: boolean;
  readonly client: DjustClient;
  timer: NodeJS.Timeout | null;
}

/** A click and what the page knew when it sent it. */
interface Click {
  readonly page: Page;
  readonly ev: SentEvent;
  /** The backend of the page's last mount when it clicked. */
  readonly backend: string | null;
}

let cluster: TwoGateways | undefined;
let rolling: RollingCluster;
const pages: Page[] = [];
const clicks: Click[] = [];
let quiet = false;

beforeAll(async () => {
  cluster = await startTwoGateways(['b1', 'b2', 'b3'], rollingConfig(TOKEN));
  rolling = { backends: cluster.backends, gwA: cluster.gwA, gwB: cluster.gwB, token: TOKEN };
}, 60_000);

afterAll(async () => {
  await stopTwoGateways(cluster, () => {
    quiet = true;
    for (const p of pages) {
      if (p.timer) clearTimeout(p.timer);
      p.client.stop();
    }
  });
}, 30_000);

const lastBackend = (c: DjustClient): string | null => {
  const b = c.mounts.at(-1)?.frame.backend;
  return typeof b === 'string' ? b : null;
};

function openPage(room: string, gw: GatewayProc, via: 'A' | 'B', clicks: boolean): Page {
  const client = nodeDjustClient(gw.port, `/game/${room}/`, { release: '3186', wsPath: `/r/${room}/ws/live/`, frames: demoFrames, params: { room }, id: `${room}-${via}` });
  return { room, via, clicks, client: client.start(), timer: null };
}

function clickOn(p: Page): void {
  if (quiet) return;
  const backend = lastBackend(p.client);
  clicks.push({ page: p, ev: p.client.sendEvent('click'), backend });
  const [lo, hi] = CLICK_EVERY_MS;
  p.timer = setTimeout(() => clickOn(p), lo + Math.random() * (hi - lo));
}

function allMounted(what: string, timeoutMs: number): Promise<Map<string, string>> {
  return waitFor(
    what,
    timeoutMs,
    () => {
      const out = new Map<string, string>();
      for (const p of pages) {
        const b = lastBackend(p.client);
        if (!p.client.mounted || b === null || (out.get(p.room) ?? b) !== b) return null;
        out.set(p.room, b);
      }
      return out;
    },
    100,
  );
}

interface Held {
  moves: number;
  last: { n: number; data: { c?: string; k?: number } | null }[];
}

interface Outcome {
  sent: number;
  applied: number;
  lost: number;
  doubled: number;
  /** Rooms with more moves than the demo keeps: counted by totals, not click by click. */
  inexact: number;
  /** Each applied click's move number. */
  moveOf: Map<SentEvent, number>;
}

/** Every click against its room's final owner's record. */
async function tally(owners: Map<string, string>): Promise<Outcome> {
  const url = new Map(rolling.backends.map((b: BackendProc) => [b.id, b.url]));
  const out: Outcome = { sent: 0, applied: 0, lost: 0, doubled: 0, inexact: 0, moveOf: new Map() };
  for (const [room, owner] of owners) {
    const res = await fetch(`${url.get(owner) as string}/_backend/moves/${room}`, { signal: AbortSignal.timeout(5_000) });
    const held = (await res.json()) as Held;
    const mine = clicks.filter((c) => c.page.room === room);
    out.sent += mine.length;
    if (held.moves > MOVES_KEPT) {
      out.inexact++;
      out.applied += Math.min(held.moves, mine.length);
      out.lost += Math.max(0, mine.length - held.moves);
      out.doubled += Math.max(0, held.moves - mine.length);
      continue;
    }
    for (const c of mine) {
      const at = held.last.filter((m) => m.data?.c === c.page.client.id && m.data?.k === c.ev.ref);
      if (at.length === 0) out.lost++;
      else out.applied++;
      out.doubled += Math.max(0, at.length - 1);
      if (at[0] !== undefined) out.moveOf.set(c.ev, at[0].n);
    }
  }
  return out;
}

/** When the page saw its click applied: its answer, or the first later mount whose count includes it. */
function seenAt(c: Click, move: number | undefined): number | null {
  if (c.ev.ackedAt !== null) return c.ev.ackedAt;
  if (move === undefined) return null;
  return c.page.client.mounts.find((m) => m.at >= c.ev.sentAt && (m.version ?? -1) >= move)?.at ?? null;
}

/** Added latency of the clicks sent during their room's move, over the median of the others. */
function addedLatency(o: Outcome, drains: readonly (DrainFigures & { endedAt: number })[]): { during: number[]; baseline: number; lostDuring: number } {
  const inMove = (c: Click): boolean => drains.some((d) => c.backend === d.backend && c.ev.sentAt >= d.startedAt && c.ev.sentAt <= d.endedAt);
  const latency = (c: Click): number | null => {
    const t = seenAt(c, o.moveOf.get(c.ev));
    return t === null ? null : t - c.ev.sentAt;
  };
  const outside = clicks.filter((c) => !inMove(c)).map(latency).filter((x): x is number => x !== null);
  const baseline = percentile(outside, 50);
  const during = clicks.filter(inMove);
  const added = during.map(latency).filter((x): x is number => x !== null);
  return { during: added.map((x) => Math.max(0, x - baseline)), baseline, lostDuring: during.length - added.length };
}

async function rollThrough(): Promise<{ drains: (DrainFigures & { endedAt: number })[]; restarts: number[] }> {
  const drains: (DrainFigures & { endedAt: number })[] = [];
  const restarts: number[] = [];
  for (const [i, gw, via] of rollingPlan(rolling)) {
    const d = await drainWithHandoff(rolling, i, gw, via);
    restarts.push(await restartBackend(rolling, i));
    await allMounted(`every page mounted again after ${d.backend}`, 30_000);
    // A click sent during the move counts until its room's pages are all back.
    drains.push({ ...d, endedAt: Date.now() });
    await sleep(1_500);
  }
  return { drains, restarts };
}

describe('djust pages through a rolling restart with room handoff, 300 rooms, 2 gateways', () => {
  it(`no click lost or doubled, no page reloaded (guarantees: ${GUARANTEES}); sockets closed, gap and added latency measured`, async () => {
    const c = cluster as TwoGateways;
    for (let r = 0; r < ROOMS; r++) {
      if (r > 0 && r % 50 === 0) await sleep(200);
      const room = `djust-${r}`;
      const clickVia = r % 2 === 0 ? 'A' : 'B';
      pages.push(openPage(room, clickVia === 'A' ? c.gwA : c.gwB, clickVia, true), openPage(room, clickVia === 'A' ? c.gwB : c.gwA, clickVia === 'A' ? 'B' : 'A', false));
    }
    await allMounted('every page mounted, each room on one backend', 60_000);
    for (const p of pages) if (p.clicks) p.timer = setTimeout(() => clickOn(p), Math.random() * CLICK_EVERY_MS[1]);
    await sleep(3_000);
    const startedAt = Date.now();
    const { drains, restarts } = await rollThrough();
    const rollingMs = Date.now() - startedAt;
    const handoffMs = await handoffTimes(rolling);
    quiet = true;
    for (const p of pages) if (p.timer) clearTimeout(p.timer);
    await Promise.all(clicks.map((k) => k.ev.done));
    await sleep(1_000); // answers of the last clicks in flight
    const owners = await allMounted('every page mounted at the end', 30_000);
    const o = await tally(owners);
    const split = c.watcher.since(startedAt);
    const figures = { ...measure(o, drains, startedAt), split: split.length };

    expect(split.length, c.watcher.describe(split.slice(0, 10))).toBe(0);
    expect(drains.map((d) => d.failed)).toEqual([0, 0, 0]);
    expect(pages.filter((p) => p.client.gaveUp).length).toBe(0);
    expect(o.sent).toBeGreaterThan(ROOMS);
    if (GUARANTEES !== 'record') {
      expect({ lost: o.lost, doubled: o.doubled, reloads: figures.reloads }).toEqual({ lost: 0, doubled: 0, reloads: 0 });
    }
    if (GUARANTEES === 'lossless') expect(figures.gapP99).toBeLessThanOrEqual(2_000);
    if (GUARANTEES === 'resume') {
      expect(figures.closed).toBe(0);
      expect(figures.addedP99).toBeLessThanOrEqual(150);
    }
    record(o, figures, drains, restarts, handoffMs, rollingMs);
  }, 300_000);
});

interface Figures {
  reloads: number;
  resyncs: number;
  closed: number;
  codes: string;
  gaps: number[];
  gapP99: number;
  added: number[];
  addedP99: number;
  baseline: number;
  lostDuring: number;
  refusedMoving: number;
  postsFailed: number;
  posts: number;
  moved: number;
}

function measure(o: Outcome, drains: readonly (DrainFigures & { endedAt: number })[], since: number): Figures {
  const closes = pages.flatMap((p) => p.client.closes.filter((x) => x.at >= since && x.mounted).map((x) => ({ p, x })));
  const codes = new Map<string, number>();
  for (const { p, x } of closes) codes.set(`${x.code} via ${p.via}`, (codes.get(`${x.code} via ${p.via}`) ?? 0) + 1);
  const gaps = closes.map(({ p, x }) => (p.client.mounts.find((m) => m.at >= x.at)?.at ?? Number.NaN) - x.at).filter((g) => !Number.isNaN(g));
  const lat = addedLatency(o, drains);
  return {
    reloads: pages.reduce((n, p) => n + p.client.reloads.length, 0),
    resyncs: pages.reduce((n, p) => n + p.client.resyncs, 0),
    closed: closes.length,
    codes: [...codes].sort().map(([k, n]) => `${k} x${n}`).join(', '),
    gaps,
    gapP99: percentile(gaps, 99),
    added: lat.during,
    addedP99: percentile(lat.during, 99),
    baseline: lat.baseline,
    lostDuring: lat.lostDuring,
    refusedMoving: pages.reduce((n, p) => n + p.client.errors.filter((e) => e.error === 'room-moving').length, 0),
    postsFailed: clicks.filter((k) => k.ev.via === 'http' && k.ev.failed !== null).length,
    posts: clicks.filter((k) => k.ev.via === 'http').length,
    moved: drains.reduce((n, d) => n + d.moved, 0),
  };
}

function record(o: Outcome, f: Figures & { split: number }, drains: readonly DrainFigures[], restarts: readonly number[], handoffMs: readonly number[], rollingMs: number): void {
  const ms = (xs: readonly number[]): string => (xs.length === 0 ? 'none' : `p50 ${Math.round(percentile(xs, 50))} ms, p99 ${Math.round(percentile(xs, 99))} ms`);
  recordChaos({
    id: 'djust-handoff-rolling-restart',
    fault: `rolling restart of 3 backends (protocol version 2), each drained with handoff, under ${ROOMS} rooms with djust-faithful pages (a clicking page through one gateway, an idle one through the other, 2 gateways sharing Redis)`,
    promise:
      GUARANTEES === 'record'
        ? 'recorded, not yet asserted (issue 37): no click lost or doubled, no page reloaded; with resume no socket closed and a click during a move late by p99 <= 150 ms; without it the gap as before'
        : `asserted (${GUARANTEES}): no click lost or doubled, no page reloaded${GUARANTEES === 'resume' ? ', no socket closed, a click during a move late by p99 <= 150 ms' : ', the gap as before (p99 <= 2 s)'}`,
    figures: {
      recoverMs: f.gaps.length === 0 ? null : Math.max(...f.gaps),
      roomsMoved: f.moved,
      socketsDropped: f.closed,
      requestsFailed: f.postsFailed,
      roomsSplit: f.split,
      other: [
        `clicks: ${o.sent} sent, ${o.applied} applied, ${o.lost} lost, ${o.doubled} doubled${o.inexact ? ` (${o.inexact} rooms counted by totals)` : ''}`,
        `page reloads: ${f.reloads}; request_html resyncs: ${f.resyncs}`,
        `clicks refused as room-moving (djust drops them): ${f.refusedMoving}; sent as POST while closed: ${f.posts}, failed ${f.postsFailed}`,
        `added latency of a click sent during its room's move (until the page sees it applied, over the ${Math.round(f.baseline)} ms median outside moves): ${ms(f.added)} over ${f.added.length}; ${f.lostDuring} of them never applied`,
        `reconnect gap (close to mounted again): ${ms(f.gaps)}, max ${f.gaps.length ? Math.max(...f.gaps) : 0} ms over ${f.gaps.length}`,
        `close codes (b1, b3 drained through A, b2 through B): ${f.codes || 'none'}`,
        `drains: ${drains.map((d) => `${d.backend} ${d.moved} rooms in ${(d.ms / 1000).toFixed(1)} s (${d.via}${d.reissued ? `, issued ${d.reissued + 1} times` : ''})`).join('; ')}`,
        `one handoff (hello to release): ${ms(handoffMs)}; restart to undrained: ${restarts.map((x) => `${x} ms`).join(', ')}; whole rolling restart ${(rollingMs / 1000).toFixed(1)} s`,
      ],
    },
    file: import.meta.url,
    test: 'djust pages through a rolling restart with room handoff, 300 rooms, 2 gateways',
  });
}
