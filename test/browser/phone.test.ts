// The pages at phone width (390 x 844) in a real headless Chromium: no sideways scroll on the lobby
// or the status page (admin and public port), with long room names, long metadata and a long
// backend URL; the lobby's empty columns (Title, Status, Details) and an empty leaderboard are not
// in the layout, and a column appears when a row gets a value through the live stream. When an
// event stream is refused (503: every stream slot taken) the page says so in words and comes back
// by itself once a slot is free. Every wait has a timeout; browsers and processes end in afterAll.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { closeBrowsers, launchBrowser, screenshot, watchErrors } from '../support/browser.js';
import { backendArgs, startBackendsHere, stopBackendsHere, type BackendHere } from '../support/backends-here.js';
import { Client, startGateway, stopAll, waitFor, withTimeout, writeFigures, type GatewayProc } from '../support/processes.js';

const ADMIN_TOKEN = 'phone-admin-token-0123456789ab';
const API_TOKEN = 'phone-api-token-0123456789abcd';
const PHONE = { width: 390, height: 844 };
const LONG_ROOM = `a-very-long-room-name-without-any-spaces-${'x'.repeat(70)}`;
const LONG_ID = 'backend-with-a-rather-long-identifier-0123456789';
const LONG_URL = `http://${'internal-backend-host-name-'.repeat(3)}0123.cluster.example.invalid:8080`;
const FAST = { placement: { heartbeatMs: 200, gatewayTtlMs: 1000 }, presence: { ttlMs: 1000 }, health: { intervalMs: 300, timeoutMs: 250, fall: 1, rise: 1 } };

let backends: BackendHere[];
let gw: GatewayProc;
/** api.maxStreams: 1 on both ports, for the refused streams. */
let tight: GatewayProc;
let browser: BrowserContext;
const errors: string[] = [];
/** The measured widths (test-output/figures/phone-widths.txt). */
const figures: string[] = [];

beforeAll(async () => {
  // In this process (test/support/backends-here.ts): b4 going down is its server closing.
  backends = await startBackendsHere(['b1', 'b2', 'b3', 'b4']);
  [gw, tight] = await Promise.all([
    startGateway({
      backends: [...backends.map((b) => `${b.id}=${b.url}`), `${LONG_ID}=${LONG_URL}`],
      config: { ...FAST, api: { streamIntervalMs: 100, tokens: [API_TOKEN], listRooms: ['*'] }, status: { public: 'open' }, room: { pattern: '^.{1,128}$' } },
      env: { ROOMGATE_ADMIN_TOKEN: ADMIN_TOKEN },
    }),
    startGateway({
      backends: backendArgs(backends.slice(0, 1)),
      config: { ...FAST, api: { streamIntervalMs: 100, tokens: [API_TOKEN], maxStreams: 1, listRooms: ['*'] } },
      env: { ROOMGATE_ADMIN_TOKEN: ADMIN_TOKEN },
    }),
  ]);
  browser = await launchBrowser();
});

afterAll(async () => {
  writeFigures('phone-widths', figures);
  await closeBrowsers();
  await stopAll();
  await stopBackendsHere();
});

const adminUrl = (g: GatewayProc): string => `http://127.0.0.1:${g.adminPort}`;

async function phonePage(): Promise<Page> {
  const page = await browser.newPage();
  await page.setViewportSize(PHONE);
  const mine = watchErrors(page);
  page.on('close', () => errors.push(...mine));
  return page;
}

interface Widths {
  doc: number;
  body: number;
}

async function widths(page: Page): Promise<Widths> {
  return (await page.evaluate('({ doc: document.documentElement.scrollWidth, body: document.body.scrollWidth })')) as Widths;
}

async function expectNoSideways(page: Page, what: string): Promise<Widths> {
  const w = await widths(page);
  figures.push(`${what}: documentElement.scrollWidth ${w.doc}, body.scrollWidth ${w.body} at ${PHONE.width} px`);
  expect.soft(w.doc, `${what}: documentElement.scrollWidth`).toBeLessThanOrEqual(PHONE.width);
  expect.soft(w.body, `${what}: body.scrollWidth`).toBeLessThanOrEqual(PHONE.width);
  return w;
}

/**
 * The column of a table headed `header`: whether its header cell and each body cell take part in
 * the layout (have boxes). null: no such header at all.
 */
async function column(page: Page, table: string, header: string): Promise<{ head: boolean; cells: boolean[] } | null> {
  return (await page.evaluate(`(() => {
    const ths = Array.from(document.querySelectorAll(${JSON.stringify(`${table} thead th`)}));
    const i = ths.findIndex((th) => th.textContent.trim() === ${JSON.stringify(header)});
    if (i < 0) return null;
    const laid = (e) => !!e && e.getClientRects().length > 0;
    return { head: laid(ths[i]), cells: Array.from(document.querySelectorAll(${JSON.stringify(`${table} tbody tr`)})).map((tr) => laid(tr.children[i])) };
  })()`)) as { head: boolean; cells: boolean[] } | null;
}

async function laidOut(page: Page, selector: string): Promise<boolean> {
  return (await page.evaluate(`(() => { const e = document.querySelector(${JSON.stringify(selector)}); return !!e && e.getClientRects().length > 0; })()`)) as boolean;
}

async function waitLive(page: Page): Promise<void> {
  await expect.poll(() => page.locator('#live').textContent(), { timeout: 10_000 }).toMatch(/^Live:/);
}

async function api(method: string, path: string, body: unknown): Promise<void> {
  const res = await fetch(`${gw.url}/_roomgate/api${path}`, {
    method,
    headers: { Authorization: `Bearer ${API_TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
  expect(res.status, `${method} ${path}`).toBe(200);
}

async function admin(g: GatewayProc, path: string, body: unknown): Promise<void> {
  const res = await fetch(`${adminUrl(g)}${path}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
  expect(res.status, path).toBe(200);
}

/** Holds one event stream open (the only slot of `tight`'s port) until release() is called. */
async function holdStream(url: string): Promise<() => Promise<void>> {
  const ctl = new AbortController();
  const res = await fetch(url, { signal: ctl.signal });
  expect(res.status, url).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  await withTimeout(reader.read(), 5_000, `first frame of ${url}`);
  return async () => {
    ctl.abort();
    await reader.cancel().catch(() => undefined);
  };
}

describe('lobby at 390 px', () => {
  it('no sideways scroll; empty columns and an empty leaderboard are not laid out; a column appears live', async () => {
    const plain = new Client(`${gw.wsUrl}/ws/live/?room=plain-room`);
    const long = new Client(`${gw.wsUrl}/ws/live/?room=${encodeURIComponent(LONG_ROOM)}`);
    await withTimeout(Promise.all([plain.opened, long.opened]), 10_000, 'room sockets');

    const page = await phonePage();
    await page.goto(`${gw.url}/_roomgate/lobby`);
    await waitLive(page);
    await expect.poll(() => page.locator('#rooms tbody tr').count(), { timeout: 10_000 }).toBe(2);
    await page.evaluate('window.sameDocument = true');
    await expectNoSideways(page, 'lobby, no metadata');
    for (const h of ['Title', 'Status', 'Details']) expect(await column(page, '#rooms', h), h).toEqual({ head: false, cells: [false, false] });
    for (const h of ['Room', 'Players']) expect(await column(page, '#rooms', h), h).toEqual({ head: true, cells: [true, true] });
    expect(await laidOut(page, '#board'), 'the empty leaderboard table').toBe(false);
    expect(await page.locator('#no-scores').isVisible()).toBe(true);
    await screenshot(page, 'phone-lobby-empty-columns');

    // A title arrives through the lobby stream: the Title column is laid out, Status stays hidden.
    await api('PUT', `/rooms/${encodeURIComponent(LONG_ROOM)}/meta`, { title: `A title that is long enough to wrap ${'y'.repeat(60)}` });
    await expect.poll(async () => (await column(page, '#rooms', 'Title'))?.head, { timeout: 10_000 }).toBe(true);
    const title = await column(page, '#rooms', 'Title');
    // The row with the title shows its cell; the one without may leave an empty cell out.
    expect(title?.cells).toContain(true);
    expect((await column(page, '#rooms', 'Status'))?.head).toBe(false);
    expect((await column(page, '#rooms', 'Details'))?.head).toBe(false);
    await api('PUT', '/rooms/plain-room/meta', { status: 'open', mode: 'free-for-all', notes: 'z'.repeat(150) });
    await expect.poll(async () => (await column(page, '#rooms', 'Details'))?.head, { timeout: 10_000 }).toBe(true);
    expect((await column(page, '#rooms', 'Status'))?.head).toBe(true);
    await expectNoSideways(page, 'lobby with metadata');

    // The metadata goes away again: so do the columns.
    await api('PUT', `/rooms/${encodeURIComponent(LONG_ROOM)}/meta`, {});
    await api('PUT', '/rooms/plain-room/meta', {});
    await expect.poll(async () => (await column(page, '#rooms', 'Title'))?.head, { timeout: 10_000 }).toBe(false);
    await expect.poll(async () => (await column(page, '#rooms', 'Details'))?.head, { timeout: 10_000 }).toBe(false);

    // Scores: the leaderboard (polled every 5 s) is laid out.
    await api('POST', '/leaderboards/global/scores', { scores: [{ member: `player-${'q'.repeat(80)}`, score: 123456789 }] });
    await expect.poll(() => laidOut(page, '#board'), { timeout: 12_000 }).toBe(true);
    expect(await page.locator('#no-scores').isVisible()).toBe(false);
    await api('PUT', '/rooms/plain-room/meta', { title: 'Friday night', status: 'open', capacity: 8 });
    await expect.poll(async () => (await column(page, '#rooms', 'Title'))?.head, { timeout: 10_000 }).toBe(true);
    await expectNoSideways(page, 'lobby with metadata and leaderboard');
    expect(await page.evaluate('window.sameDocument === true')).toBe(true);
    await screenshot(page, 'phone-lobby');

    // Server-rendered with the same data: the same columns, no script needed for it.
    const fresh = await phonePage();
    await fresh.goto(`${gw.url}/_roomgate/lobby`);
    expect((await column(fresh, '#rooms', 'Title'))?.head).toBe(true);
    expect((await column(fresh, '#rooms', 'Status'))?.head).toBe(true);
    expect((await column(fresh, '#rooms', 'Details'))?.head).toBe(true);
    await expectNoSideways(fresh, 'lobby, server-rendered');
    await fresh.close();
    await page.close();
    await Promise.all([plain.close(), long.close()]);
  });
});

describe('status page at 390 px', () => {
  it('admin port (backend URLs, one very long; up, draining, maintenance, down) and public port: no sideways scroll', async () => {
    await admin(gw, '/backends/b2/drain', { deadlineMs: 3_600_000 });
    await admin(gw, '/backends/b3/maintenance', {});
    await (backends[3] as BackendHere).backend.close();
    await waitFor('b4 down', 10_000, async () => {
      const res = await fetch(`${adminUrl(gw)}/backends/b4`, { signal: AbortSignal.timeout(5_000) });
      return ((await res.json()) as { state?: string }).state === 'down';
    });
    const page = await phonePage();
    await page.goto(`${adminUrl(gw)}/_roomgate/`);
    await waitLive(page);
    expect(await page.locator('#backends tbody tr').count()).toBe(5);
    const states = await page.locator('#backends tbody .state').allTextContents();
    for (const s of ['up', 'draining', 'maintenance', 'down']) expect(states).toContain(s);
    expect(await page.locator(`#backends tbody tr[data-backend="${LONG_ID}"]`).textContent()).toContain(LONG_URL);
    await expectNoSideways(page, 'status, admin port');
    // The events name URLs (joined): the Detail column is laid out.
    expect((await column(page, '#events', 'Detail'))?.head).toBe(true);
    await screenshot(page, 'phone-status-admin');

    const pub = await phonePage();
    await pub.goto(`${gw.url}/_roomgate/`);
    await waitLive(pub);
    await expectNoSideways(pub, 'status, public port');
    await screenshot(pub, 'phone-status-public');
    await pub.close();
    await page.close();
  });
});

describe('a refused event stream (503, every slot taken)', () => {
  it('the status page says live updates are paused and why, retries, and goes live once a slot is free', async () => {
    const release = await holdStream(`${adminUrl(tight)}/_roomgate/status/stream`);
    const page = await phonePage();
    try {
      await page.goto(`${adminUrl(tight)}/_roomgate/`);
      await expect.poll(() => page.locator('#live').textContent(), { timeout: 10_000 }).toMatch(/^Live updates paused: .*too many.*retrying in \d+ s/i);
      await screenshot(page, 'phone-status-paused');
    } finally {
      await release();
    }
    await expect.poll(() => page.locator('#live').textContent(), { timeout: 20_000 }).toMatch(/^Live:/);
    await page.close();
  });

  it('the lobby says so too, and goes live once a slot is free', async () => {
    const release = await holdStream(`${tight.url}/_roomgate/api/lobby/stream`);
    const page = await phonePage();
    try {
      await page.goto(`${tight.url}/_roomgate/lobby`);
      await expect.poll(() => page.locator('#live').textContent(), { timeout: 10_000 }).toMatch(/^Live updates paused: .*too many.*retrying in \d+ s/i);
      await expectNoSideways(page, 'lobby, paused');
      await screenshot(page, 'phone-lobby-paused');
    } finally {
      await release();
    }
    await expect.poll(() => page.locator('#live').textContent(), { timeout: 20_000 }).toMatch(/^Live:/);
    await page.close();
  });
});

describe('console', () => {
  it('no CSP violation, exception or dialog', () => {
    expect(errors.filter((e) => /Content Security Policy|Refused to|pageerror|dialog/.test(e))).toEqual([]);
  });
});
