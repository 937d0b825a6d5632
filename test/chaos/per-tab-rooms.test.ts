// Per-tab rooms in headless Chromium (issue 38, "Done means"; docs/per-tab-rooms.md): five tabs of
// five rooms in ONE browser context, each running the djust-faithful client
// (test/support/djust-client.mjs) as djust's own would run, once as the fixed-path release (v1.1:
// always /ws/live/) and once as the meta-tag release (#3186: <meta name="djust-ws-path">, here
// for two tabs a path that fails before it ever opens, so those tabs take djust's one fallback to
// /ws/live/ and keep it). The room cookie is the last tab's, as it is in a browser where each page
// load set it. Each page carries its signed room pin and loads roomgate's script
// (/_roomgate/room-pin.v1.js, served by the gateway, checked by its SRI under a CSP without
// 'unsafe-inline'). Through a real gateway in front of three demo backends (processes) that refuse
// a mount of another room than the socket was routed by (the backend kit's fence, close 4400), every
// socket is back on its own room's backend after a backend kill (SIGKILL), a move and a drain with
// handoff: 0 mounts refused, and no room on two processes (each backend's /_backend/rooms).
// A control run without the pin script shows what the test guards: after the kill the cookie
// routes the tabs of other rooms and their mounts are refused.
//
// The tabs' pages and the client module are answered by the test (page.route) on the gateway's
// origin, as an app would serve them; the cookie is set as each page load would have set it.
// Processes and browser end in afterAll. A chaos row (`npm run chaos`, docs/reliability.md) per
// release; the room pin script's CSP behaviour is tested apart (test/browser/room-pin-csp.test.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOM_PIN_SCRIPT_PATH, ROOM_PIN_SCRIPT_SRI } from '../../src/pages/room-pin-script.js';
import { createPinSigner, createRoomSigner } from '../../src/room/signing.js';
import { closeBrowsers, launchBrowser, watchErrors } from '../support/browser.js';
import { recordChaos } from '../support/chaos.js';
import { ROOT, TEST_SECRET, startBackend, startGateway, stop, stopAll, type BackendProc, type GatewayProc } from '../support/processes.js';

const TOKEN = 'per-tab-admin-token-0123456789abcdef';
const ROOMS = ['tab-a', 'tab-b', 'tab-c', 'tab-d', 'tab-e'] as const;
const CLIENT_JS = readFileSync(join(ROOT, 'test/support/djust-client.mjs'), 'utf8');
const pins = createPinSigner([TEST_SECRET], 604_800);
const cookies = createRoomSigner({ secrets: [TEST_SECRET], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 });

// The tab's own module: the djust-faithful client with the page's globals. The WebSocket is looked
// up at each connect, as djust's bundle does (`new WebSocket(url)`), so roomgate's script is in
// the path however late it ran. The demo's mount answer names the backend and the room: kept for
// the test to compare with the room's placement.
const TAB_JS = `import { DjustClient, demoFrames } from '/djust-client.mjs';
const cfg = document.querySelector('meta[name="tab"]');
const state = { on: null, room: null };
const frames = Object.assign({}, demoFrames, {
  isMount(m) {
    if (m.type === 'mounted') { state.on = m.backend; state.room = m.room; }
    return demoFrames.isMount(m);
  },
});
class PageWebSocket { constructor(url) { return new window.WebSocket(url); } }
const client = new DjustClient({
  WebSocket: PageWebSocket,
  fetch: (url, init) => fetch(url, init),
  location: window.location,
  document,
  release: cfg.getAttribute('data-release'),
  frames,
  view: 'demo',
  params: { room: cfg.getAttribute('data-room') },
});
window.__tab = { client, state };
client.start();
`;

function tabPage(room: string, release: 'v1.1' | '3186', wsPath: string | null, pinned: boolean): string {
  const pin = pinned ? `<meta name="roomgate-pin" content="${pins.sign(room, Date.now())}">\n<script src="${ROOM_PIN_SCRIPT_PATH}" integrity="${ROOM_PIN_SCRIPT_SRI}" crossorigin="anonymous"></script>\n` : '';
  const meta = wsPath === null ? '' : `<meta name="djust-ws-path" content="${wsPath}">\n`;
  return `<!doctype html><html><head><meta charset="utf-8"><title>${room}</title>\n<meta name="tab" data-room="${room}" data-release="${release}">\n${meta}${pin}<script type="module" src="/tab.mjs"></script></head><body>${room}</body></html>`;
}

// No inline script may run: roomgate's script must pass a CSP an app would set.
const CSP = "default-src 'none'; script-src 'self'; connect-src 'self'";

interface TabView {
  readonly room: string;
  readonly on: string | null;
  readonly mountedRoom: string | null;
  readonly mounted: boolean;
  readonly mounts: number;
  readonly refused: number;
  readonly gaveUp: boolean;
  readonly paths: readonly string[];
}

function view(page: Page, room: string): Promise<TabView> {
  return page.evaluate((r) => {
    const t = (globalThis as unknown as { __tab?: { client: { mounted: boolean; mounts: unknown[]; mountsRefused: number; gaveUp: boolean; closes: { path: string }[] }; state: { on: string | null; room: string | null } } }).__tab;
    if (!t) return { room: r, on: null, mountedRoom: null, mounted: false, mounts: 0, refused: 0, gaveUp: false, paths: [] };
    return { room: r, on: t.state.on, mountedRoom: t.state.room, mounted: t.client.mounted, mounts: t.client.mounts.length, refused: t.client.mountsRefused, gaveUp: t.client.gaveUp, paths: t.client.closes.map((c) => c.path) };
  }, room);
}

async function admin(gw: GatewayProc, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, json: (await res.json()) as Record<string, unknown> };
}

/** Where the gateway sends each room now. */
async function placements(gw: GatewayProc): Promise<Record<string, string | null>> {
  const out: Record<string, string | null> = {};
  for (const r of ROOMS) out[r] = (await admin(gw, `/rooms/${r}`)).json.backend as string | null;
  return out;
}

/** Each live backend's rooms (the demo's witness): room -> the backends holding a socket mounted in it. */
async function holders(backends: readonly BackendProc[]): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const b of backends) {
    const res = await fetch(`${b.url}/_backend/rooms`, { signal: AbortSignal.timeout(5_000) });
    const { rooms } = (await res.json()) as { rooms: Record<string, number> };
    for (const r of Object.keys(rooms)) (out[r] ??= []).push(b.id);
  }
  return out;
}

interface Run {
  gw: GatewayProc;
  backends: BackendProc[];
  browser: BrowserContext;
  tabs: Page[];
  errors: string[][];
}

async function startRun(release: 'v1.1' | '3186', pinned: boolean): Promise<Run> {
  // No socket resume: the pin is about reconnects (a resumed socket never reconnects, so it would
  // not test the pin); a move and a drain then close the room's sockets and the tabs come back.
  const backends = await Promise.all(['b1', 'b2', 'b3'].map((id) => startBackend(id, ['--handoff-resume', 'off'])));
  const gw = await startGateway({ backends, config: { admin: { token: TOKEN }, proxy: { websocketPaths: ['/ws/'] } } });
  // A page answered by page.route has no address of its own, so Chromium's Local Network Access
  // checks would take it for a public page opening sockets to 127.0.0.1 and block them.
  const browser = await launchBrowser({ args: ['--disable-features=LocalNetworkAccessChecks'] });
  const origin = gw.url;
  await browser.route(`${origin}/tab/**`, (route) => {
    const url = new URL(route.request().url());
    const room = decodeURIComponent(url.pathname.split('/')[2] ?? '');
    const i = ROOMS.indexOf(room as (typeof ROOMS)[number]);
    // #3186: tabs 0, 2 and 4 get the prefixed path (routed by the prefix too); 1 and 3 a path that
    // fails before it opens (404 here, a 503 in a failover), so djust falls back to /ws/live/.
    const wsPath = release === 'v1.1' ? null : i % 2 === 0 ? `/r/${room}/ws/live/` : '/no-such-prefix/ws/live/';
    void route.fulfill({ status: 200, headers: { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': CSP }, body: tabPage(room, release, wsPath, pinned) });
  });
  await browser.route(`${origin}/tab.mjs`, (route) => void route.fulfill({ status: 200, headers: { 'content-type': 'text/javascript' }, body: TAB_JS }));
  await browser.route(`${origin}/djust-client.mjs`, (route) => void route.fulfill({ status: 200, headers: { 'content-type': 'text/javascript' }, body: CLIENT_JS }));
  const tabs: Page[] = [];
  const errors: string[][] = [];
  for (const room of ROOMS) {
    // The page load's Set-Cookie: the browser's one room cookie is now this tab's room.
    await browser.addCookies([{ name: 'roomgate_room', value: cookies.sign(room, Date.now()), url: origin, httpOnly: true, sameSite: 'Lax' }]);
    const page = await browser.newPage();
    errors.push(watchErrors(page));
    await page.goto(`${origin}/tab/${room}/`);
    tabs.push(page);
    try {
      await expect.poll(async () => (await view(page, room)).mounted, { timeout: 15_000 }).toBe(true);
    } catch (err) {
      const seen = await page.evaluate(() => { const g = globalThis as unknown as { __tab?: { client: { closes: unknown[]; mounts: unknown[] } }; WebSocket: unknown }; return JSON.stringify({ tab: g.__tab !== undefined, closes: g.__tab?.client.closes, mounts: g.__tab?.client.mounts, ws: String(g.WebSocket).slice(0, 60) }); });
      throw new Error(`${room} did not mount: ${seen}; page errors: ${errors.at(-1)!.join(' | ')}`, { cause: err });
    }
  }
  return { gw, backends, browser, tabs, errors };
}

/** The run's browser and processes (every run has its own). */
async function endRun(): Promise<void> {
  await closeBrowsers();
  await stopAll();
}

/** Every tab mounted again (after `before` mounts each), on its room's backend, none refused, no room on two backends. */
async function settled(r: Run, before: readonly number[], live: readonly BackendProc[], changed: readonly string[]): Promise<TabView[]> {
  let last: TabView[] = [];
  await expect
    .poll(
      async () => {
        last = await Promise.all(r.tabs.map((p, i) => view(p, ROOMS[i]!)));
        const where = await placements(r.gw);
        return last.every((t, i) => t.mounted && t.mountedRoom === t.room && t.on === where[t.room] && (!changed.includes(t.room) || t.mounts > (before[i] ?? 0)));
      },
      { timeout: 30_000, interval: 250 },
    )
    .toBe(true);
  for (const t of last) expect(t.refused, `${t.room}: mounts refused`).toBe(0);
  const held = await holders(live);
  for (const room of ROOMS) expect(held[room], `${room} is held by exactly one backend`).toHaveLength(1);
  return last;
}

async function phases(release: 'v1.1' | '3186'): Promise<void> {
  const r = await startRun(release, true);
  const took: Record<string, number> = {};
  const timed = async <T>(name: string, f: () => Promise<T>): Promise<T> => {
    const t0 = Date.now();
    const out = await f();
    took[name] = Date.now() - t0;
    return out;
  };
  try {
    let tabs = await settled(r, [], r.backends, []);
    if (release === '3186') {
      // Tabs 1 and 3 fell back to /ws/live/ once (their first path never opened) and kept it; the others kept their prefixed path.
      expect(tabs[1]!.paths).toContain('/no-such-prefix/ws/live/');
    }
    // 1. A backend dies: the one tab-a's room is on.
    const where = await placements(r.gw);
    const dead = r.backends.find((b) => b.id === where['tab-a'])!;
    const moved = ROOMS.filter((room) => where[room] === dead.id);
    await stop(dead, 'SIGKILL');
    const live = r.backends.filter((b) => b !== dead);
    tabs = await timed('kill', () => settled(r, tabs.map((t) => t.mounts), live, moved));

    // 2. A move with handoff: tab-b's room to the other live backend.
    const from = (await placements(r.gw))['tab-b']!;
    const to = live.find((b) => b.id !== from)!.id;
    const move = await admin(r.gw, '/rooms/tab-b/move', { to });
    expect(move.status, JSON.stringify(move.json)).toBe(200);
    tabs = await timed('move', () => settled(r, tabs.map((t) => t.mounts), live, ['tab-b']));
    expect(tabs[1]!.on).toBe(to);

    // 3. A drain with handoff of the backend holding tab-c's room: its rooms move to the last one.
    const before = await placements(r.gw);
    const drained = before['tab-c']!;
    const drain = await admin(r.gw, `/backends/${drained}/drain`, { handoff: true });
    expect(drain.status, JSON.stringify(drain.json)).toBe(200);
    const drainedRooms = ROOMS.filter((room) => before[room] === drained);
    tabs = await timed('drain', () => settled(r, tabs.map((t) => t.mounts), live, drainedRooms));
    for (const t of tabs) expect(t.on, `${t.room} left the drained backend`).not.toBe(drained);
    for (const e of r.errors) expect(e.filter((x) => !/WebSocket|ERR_CONNECTION|net::|404/.test(x))).toEqual([]);
    recordChaos({
      id: `per-tab-rooms-${release === 'v1.1' ? 'fixed-path' : 'meta-path'}`,
      fault: `5 tabs of 5 rooms in one Chromium context, djust's ${release === 'v1.1' ? 'fixed /ws/live/ client (v1.1)' : 'meta-tag client (releases that read djust-ws-path) with its fallback to /ws/live/ for 2 tabs'}, one room cookie (the last tab's), the room pin script: a backend killed (SIGKILL), a move and a drain with handoff`,
      promise: 'each tab back on its own room\'s backend whatever the cookie says: 0 mounts refused, no room on two backends',
      figures: {
        recoverMs: Math.max(took.kill ?? 0, took.move ?? 0, took.drain ?? 0),
        roomsMoved: moved.length + 1 + drainedRooms.length,
        requestsFailed: tabs.reduce((n, t) => n + t.refused, 0),
        roomsSplit: 0,
        other: [`all tabs mounted again after the kill in ${took.kill} ms, the move in ${took.move} ms, the drain in ${took.drain} ms`, 'mounts refused: 0 (requests failed)'],
      },
      file: import.meta.url,
      test: 'per-tab rooms in one browser through a kill, a move and a drain',
    });
  } finally {
    await endRun();
  }
}

afterAll(async () => {
  await closeBrowsers();
  await stopAll();
});

describe('per-tab rooms in one browser: each socket stays on its own room', () => {
  it('the fixed-path release (djust v1.1: /ws/live/ only): a kill, a move, a drain with handoff; 0 mounts refused, no room on two backends', async () => {
    await phases('v1.1');
  }, 180_000);

  it('the meta-tag release (#3186), with its fallback to /ws/live/ for two tabs: the same', async () => {
    await phases('3186');
  }, 180_000);

  it('control: without the pin, the cookie of the last tab routes the others after a kill and their mounts are refused', async () => {
    const r = await startRun('v1.1', false);
    try {
      const where = await placements(r.gw);
      // tab-a's backend: its socket reconnects with the cookie of tab-e, is routed for tab-e, and its mount of tab-a is refused.
      await stop(r.backends.find((b) => b.id === where['tab-a'])!, 'SIGKILL');
      await expect
        .poll(async () => (await Promise.all(r.tabs.map((p, i) => view(p, ROOMS[i]!)))).reduce((n, t) => n + t.refused, 0), { timeout: 30_000, interval: 250 })
        .toBeGreaterThan(0);
    } finally {
      await endRun();
    }
  }, 180_000);
});
