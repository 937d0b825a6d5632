// The pages in a real headless Chromium, as a person would use them: real demo backends b1-b3 and
// a gateway; the lobby's "New room" button opens a room, a second tab opens the same room through
// the per-tab path prefix, both pages and both sockets name the same backend, and the lobby (left
// open, never reloaded) counts 2 players. The status page (admin port) shows the backend bars and
// events and follows a drain live; on the public port it takes the admin token; without JavaScript
// both pages are complete. Hostile room names and metadata stay text. Screenshots go to
// test-output/screenshots/. The demo backends run in this process (test/support/backends-here.ts:
// none is signalled). Every wait has a timeout; browsers and processes end in afterAll.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { closeBrowsers, launchBrowser, newPageWithoutScripts, screenshot, watchErrors } from '../support/browser.js';
import { backendArgs, startBackendsHere, stopBackendsHere, type BackendHere } from '../support/backends-here.js';
import { Client, startGateway, stopAll, withTimeout, type GatewayProc } from '../support/processes.js';

const ADMIN_TOKEN = 'browser-admin-token-0123456789';
const API_TOKEN = 'browser-api-token-0123456789ab';
const PUSH_TOKEN = 'browser-push-token-0123456789a';
// Markup as a room name. No whitespace and no "/": the name is in API paths, where an escaped
// space or slash is refused (400) on every front. Unescaped, it would make an <img> and an <svg>.
const XSS = '<img>"&<svg>';

let backends: BackendHere[];
let gw: GatewayProc;
let browser: BrowserContext;
/** Console errors, exceptions and dialogs of every page opened with JavaScript. */
const errorsOf = new Map<Page, string[]>();
let lobby: Page;
let room = '';
let roomBackend = '';

beforeAll(async () => {
  backends = await startBackendsHere(['b1', 'b2', 'b3']);
  gw = await startGateway({
    backends: backendArgs(backends),
    config: {
      placement: { heartbeatMs: 200, gatewayTtlMs: 1000 },
      presence: { ttlMs: 1000 },
      // Every room listed (api.listRooms): the rooms "New room" makes are in the lobby.
      api: { streamIntervalMs: 100, tokens: [API_TOKEN], listRooms: ['*'] },
      status: { public: 'token' },
      push: { tokens: [PUSH_TOKEN] },
      // Permissive, so a room can be named like markup (the XSS check).
      room: { pattern: '^.{1,128}$' },
    },
    env: { ROOMGATE_ADMIN_TOKEN: ADMIN_TOKEN },
  });
  browser = await launchBrowser();
});

afterAll(async () => {
  await closeBrowsers();
  await stopAll();
  await stopBackendsHere();
});

const adminUrl = (): string => `http://127.0.0.1:${gw.adminPort}`;

function track(page: Page): Page {
  errorsOf.set(page, watchErrors(page));
  return page;
}

async function newPage(): Promise<Page> {
  return track(await browser.newPage());
}

function pageErrors(page: Page): string[] {
  return errorsOf.get(page) ?? [];
}

/** The page's script connected its stream: the status line says "Live:". */
async function waitLive(page: Page): Promise<void> {
  await expect.poll(() => page.locator('#live').textContent(), { timeout: 10_000 }).toMatch(/^Live:/);
}

/** Marks the document, to prove later that what changed came without a reload. */
async function markDocument(page: Page): Promise<void> {
  await page.evaluate('window.sameDocument = true');
}

async function sameDocument(page: Page): Promise<unknown> {
  return page.evaluate('window.sameDocument === true');
}

async function adminPost(path: string, body: unknown): Promise<void> {
  const res = await fetch(`${adminUrl()}${path}`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
  expect(res.status).toBe(200);
}

describe('lobby and game pages', () => {
  it('"New room" opens a room; two tabs of it (/game/ and /r/ prefix) reach one backend; the lobby counts 2 live', async () => {
    lobby = await newPage();
    await lobby.goto(`${gw.url}/_roomgate/lobby`);
    await waitLive(lobby);
    await markDocument(lobby);
    expect(await lobby.locator('#no-rooms').isVisible()).toBe(true);

    const [tab1] = await Promise.all([browser.waitForEvent('page', { timeout: 10_000 }), lobby.getByRole('button', { name: 'New room' }).click()]);
    track(tab1);
    await tab1.waitForLoadState('load');
    const m = /^\/game\/([^/]+)\/$/.exec(new URL(tab1.url()).pathname);
    expect(m, tab1.url()).not.toBeNull();
    room = decodeURIComponent(m?.[1] as string);

    const tab2 = await newPage();
    await tab2.goto(`${gw.url}/r/${encodeURIComponent(room)}/game/${encodeURIComponent(room)}/`);

    const ids: string[] = [];
    for (const tab of [tab1, tab2]) {
      const id = (await tab.locator('#backend-id').textContent())?.trim() ?? '';
      expect(backends.map((b) => b.id)).toContain(id);
      ids.push(id);
      // The page's socket reached the same process, and both tabs are in one room there.
      await expect.poll(() => tab.locator('#ws-backend').textContent(), { timeout: 10_000 }).toBe(id);
      await expect.poll(() => tab.locator('#members').textContent(), { timeout: 10_000 }).toBe('2');
      expect(await tab.locator('#served-by').textContent()).toBe(`Served by backend ${id} for room ${room}`);
    }
    expect(ids[0]).toBe(ids[1]);
    roomBackend = ids[0] as string;
    const where = (await (await fetch(`${adminUrl()}/rooms/${encodeURIComponent(room)}`, { signal: AbortSignal.timeout(5_000) })).json()) as { backend: string; socketsHere: number };
    expect(where).toMatchObject({ backend: roomBackend, socketsHere: 2 });

    // The lobby, left open, shows the room with 2 players (and no backend: that is the admin port's).
    const link = lobby.getByRole('link', { name: room, exact: true });
    await link.waitFor();
    const row = lobby.locator('#rooms tbody tr', { has: link });
    await expect.poll(() => row.locator('[data-col="sockets"]').allTextContents(), { timeout: 10_000 }).toEqual(['2']);
    expect(await row.locator('[data-col="backend"]').count()).toBe(0);
    expect(await row.getByRole('link').getAttribute('href')).toBe(`/game/${encodeURIComponent(room)}/`);
    await expect.poll(async () => Number(await lobby.locator('#online-total').textContent()), { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
    expect(await sameDocument(lobby)).toBe(true);
    expect(await lobby.locator('#no-rooms').isVisible()).toBe(false);

    await screenshot(lobby, 'lobby');
    await screenshot(tab1, 'game-tab1-game-path');
    await screenshot(tab2, 'game-tab2-path-prefix');
    for (const p of [lobby, tab1, tab2]) expect(pageErrors(p).filter((e) => !/favicon|404/.test(e))).toEqual([]);
  });

  it('the leaderboard follows new scores', async () => {
    const res = await fetch(`${gw.url}/_roomgate/api/leaderboards/global/scores`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${API_TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ scores: [{ member: 'ana', score: 42 }, { member: 'bo', score: 17 }] }),
      signal: AbortSignal.timeout(5_000),
    });
    expect(res.status).toBe(200);
    // Polled every 5 s by the page.
    await expect.poll(() => lobby.locator('#board tbody th').allTextContents(), { timeout: 12_000 }).toEqual(['ana', 'bo']);
    expect(await lobby.locator('#board tbody td').allTextContents()).toEqual(['1', '42', '2', '17']);
    expect(await lobby.locator('#no-scores').isVisible()).toBe(false);
    await screenshot(lobby, 'lobby-with-leaderboard');
  });

  it('hostile room names and metadata stay text (live and server-rendered)', async () => {
    const c = new Client(`${gw.wsUrl}/ws/live/?room=${encodeURIComponent(XSS)}`);
    await withTimeout(c.opened, 10_000, 'socket of the hostile room');
    const put = await fetch(`${gw.url}/_roomgate/api/rooms/${encodeURIComponent(XSS)}/meta`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${API_TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ title: XSS, status: '"><svg onload=alert(2)>', note: '</script><script>alert(3)</script>' }),
      signal: AbortSignal.timeout(5_000),
    });
    expect(put.status).toBe(200);
    const check = async (page: Page): Promise<void> => {
      const link = page.getByRole('link', { name: XSS, exact: true });
      await link.waitFor();
      const row = page.locator('#rooms tbody tr', { has: link });
      await expect.poll(() => row.locator('td').nth(0).textContent(), { timeout: 5_000 }).toBe(XSS);
      expect(await row.locator('td').nth(1).textContent()).toBe('"><svg onload=alert(2)>');
      expect(await page.locator('img, svg, iframe, object').count()).toBe(0);
      expect(await page.locator('script').count()).toBe(1);
    };
    await check(lobby); // added live by the script
    const fresh = await newPage();
    await fresh.goto(`${gw.url}/_roomgate/lobby`); // server-rendered
    await check(fresh);
    await screenshot(fresh, 'lobby-hostile-names');
    for (const p of [lobby, fresh]) expect(pageErrors(p).filter((e) => /dialog|pageerror/.test(e))).toEqual([]);
    await fresh.close();
    await c.close();
  });
});

describe('status page', () => {
  it('admin port: a bar per backend for rooms and sockets, the events; follows a drain live', async () => {
    const page = await newPage();
    await page.goto(`${adminUrl()}/_roomgate/`);
    await waitLive(page);
    await markDocument(page);
    const rows = page.locator('#backends tbody tr');
    expect(await rows.count()).toBe(3);
    for (const b of backends) {
      const row = page.locator(`#backends tbody tr[data-backend="${b.id}"]`);
      expect(await row.locator('th').textContent()).toBe(b.id);
      expect(await row.locator('td').nth(0).textContent()).toBe(b.url);
      expect(await row.locator('.state').textContent()).toBe('up');
      expect(await row.locator('.fill.rooms').getAttribute('class')).toMatch(/^fill rooms p\d{1,3}$/);
      expect(await row.locator('.fill.sockets').getAttribute('class')).toMatch(/^fill sockets p\d{1,3}$/);
    }
    // The room's two tabs hold sockets on its backend: its sockets bar is not empty.
    const mine = page.locator(`#backends tbody tr[data-backend="${roomBackend}"]`);
    await expect.poll(async () => Number(await mine.locator('td').nth(3).locator('.val').textContent()), { timeout: 5_000 }).toBeGreaterThanOrEqual(2);
    expect(await mine.locator('.fill.sockets').getAttribute('class')).not.toBe('fill sockets p0');
    // Bars really are drawn: the fill's width follows its share. Both read in one turn of the page:
    // a live update between two reads may redraw the row (seen on a loaded machine: a track of 0).
    const { fill, track } = await mine.locator('td').nth(3).evaluate((td) => ({
      fill: td.querySelector('.fill.sockets')?.getBoundingClientRect().width ?? -1,
      track: td.querySelector('.bar')?.getBoundingClientRect().width ?? -1,
    }));
    expect(fill).toBeGreaterThan(0);
    expect(fill).toBeLessThanOrEqual(track);
    const joined = await page.locator('#events tbody tr').filter({ hasText: 'joined' }).count();
    expect(joined).toBe(3);
    expect(await page.locator('#placement-mode').textContent()).toBe('in memory (this gateway only)');
    expect(await page.locator('#gateway-id').textContent()).toMatch(/-\d+-[0-9a-f]{6}$/);

    const other = backends.find((b) => b.id !== roomBackend) as BackendHere;
    await adminPost(`/backends/${other.id}/drain`, { deadlineMs: 3_600_000 });
    const row = page.locator(`#backends tbody tr[data-backend="${other.id}"]`);
    await expect.poll(() => row.locator('.state').textContent(), { timeout: 5_000 }).toBe('draining');
    expect(await row.locator('.state-extra').textContent()).toMatch(/^ until \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/);
    await expect.poll(() => page.locator('#events tbody tr').first().locator('td').nth(1).textContent(), { timeout: 5_000 }).toBe('draining');
    expect(await page.locator('#announce').textContent()).toContain(`Backend ${other.id} is now draining (was up)`);
    expect(await sameDocument(page)).toBe(true);
    await screenshot(page, 'status-admin-draining');
    await adminPost(`/backends/${other.id}/undrain`, {});
    await expect.poll(() => row.locator('.state').textContent(), { timeout: 5_000 }).toBe('up');

    // A push to the room shows up live in the pushes table, with the room and its backend.
    expect(await page.locator('#no-pushes').isVisible()).toBe(true);
    const pushed = await fetch(`http://127.0.0.1:${gw.port}/_roomgate/api/rooms/${encodeURIComponent(room)}/messages`, {
      method: 'POST',
      headers: { authorization: `Bearer ${PUSH_TOKEN}`, 'content-type': 'application/json', 'x-roomgate-sender': 'job:browser' },
      body: '{"hello":1}',
      signal: AbortSignal.timeout(5_000),
    });
    expect(pushed.status).toBe(202);
    const first = page.locator('#pushes tbody tr').first();
    await expect.poll(() => first.locator('[data-label="Result"]').textContent(), { timeout: 5_000 }).toBe('delivered');
    expect(await first.locator('th').textContent()).toBe(room);
    expect(await first.locator('[data-label="Backend"]').textContent()).toBe(roomBackend);
    expect(await first.locator('[data-label="Sender"]').textContent()).toBe('job:browser');
    // The room's two tabs got it: the demo backend said so, and the live row shows it.
    expect(await first.locator('[data-label="Sockets"]').textContent()).toBe('2');
    expect(await page.locator('#no-pushes').isVisible()).toBe(false);
    expect(await sameDocument(page)).toBe(true);
    expect(pageErrors(page)).toEqual([]);
    await page.close();
  });

  it('public port (status.public: token): the admin token as Basic credentials; no backend URLs', async () => {
    const page = await newPage();
    // Without credentials: 401 and a Basic challenge (a browser prompts; headless Chromium has no
    // prompt and cancels the navigation, so the answer is read through the page's request API).
    const refused = await page.request.get(`${gw.url}/_roomgate/`, { timeout: 10_000 });
    expect(refused.status()).toBe(401);
    expect(refused.headers()['www-authenticate']).toMatch(/^Basic realm="roomgate status"/);
    // As after the browser's login prompt: the browser sends the credentials, the stream too.
    const host = new URL(gw.url).host;
    const ok = await page.goto(`http://viewer:${ADMIN_TOKEN}@${host}/_roomgate/`);
    expect(ok?.status()).toBe(200);
    await waitLive(page);
    expect(await page.locator('#backends tbody tr').count()).toBe(3);
    expect(await page.locator('#backends thead th').allTextContents()).toEqual(['Backend', 'State', 'Rooms', 'Sockets', 'Weight']);
    expect(await page.content()).not.toContain('127.0.0.1:');
    await screenshot(page, 'status-public-token');
    expect(pageErrors(page).filter((e) => !/401/.test(e))).toEqual([]);
    await page.close();
  });
});

// Pages with JavaScript off in the one browser of the file (newPageWithoutScripts), not a second one.
describe('without JavaScript', () => {

  it('the status table is complete', async () => {
    const page = await newPageWithoutScripts(browser);
    await page.goto(`${adminUrl()}/_roomgate/`);
    expect(await page.locator('#live').textContent()).toBe('Static view: reload the page to refresh.');
    const rows = page.locator('#backends tbody tr');
    expect(await rows.count()).toBe(3);
    for (const b of backends) {
      const row = page.locator(`#backends tbody tr[data-backend="${b.id}"]`);
      expect(await row.locator('.state').textContent()).toBe('up');
      expect(await row.locator('td').nth(2).locator('.val').textContent()).toMatch(/^\d+$/);
      expect(await row.locator('td').nth(3).locator('.val').textContent()).toMatch(/^\d+$/);
    }
    const sockets = Number(await page.locator(`#backends tbody tr[data-backend="${roomBackend}"] td`).nth(3).locator('.val').textContent());
    expect(sockets).toBeGreaterThanOrEqual(2);
    expect(await page.locator('#events tbody tr').filter({ hasText: 'draining' }).count()).toBe(1);
    expect(await page.locator('#events tbody tr').filter({ hasText: 'joined' }).count()).toBe(3);
    await screenshot(page, 'status-admin-no-js');
    await page.close();
  });

  it('the lobby lists the room, and "New room" still opens one', async () => {
    const page = await newPageWithoutScripts(browser);
    await page.goto(`${gw.url}/_roomgate/lobby`);
    const link = page.getByRole('link', { name: room, exact: true });
    await link.waitFor();
    const row = page.locator('#rooms tbody tr', { has: link });
    expect(await row.locator('[data-col="sockets"]').textContent()).toBe('2');
    expect(await page.locator('#online-total').textContent()).toMatch(/^\d+$/);
    await screenshot(page, 'lobby-no-js');
    const [tab] = await Promise.all([browser.waitForEvent('page', { timeout: 10_000 }), page.getByRole('button', { name: 'New room' }).click()]);
    await tab.waitForLoadState('load');
    expect(new URL(tab.url()).pathname).toMatch(/^\/game\/[a-z]+-[a-z]+-\d{4}\/$/);
    expect(backends.map((b) => b.id)).toContain((await tab.locator('#backend-id').textContent())?.trim());
    await tab.close();
    await page.close();
  });
});

describe('console', () => {
  it('no page reported a CSP violation, an exception or a dialog', () => {
    const all = [...errorsOf.values()].flat();
    expect(errorsOf.size).toBeGreaterThanOrEqual(6);
    expect(all.filter((e) => /Content Security Policy|Refused to|pageerror|dialog/.test(e))).toEqual([]);
  });
});
