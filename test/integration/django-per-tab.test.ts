// docs/django.md's per-tab rooms, exercised: the Django Channels example (examples/django-channels)
// renders each room's page with its signed pin ({% roomgate_pin %} of roomgate_kit) and roomgate's
// script, and a socket carrying the pin reaches that room's process whatever the room cookie says.
// Two daphne processes (Debian's Django 3.2, Channels 4.0, daphne 4.0) behind one gateway started
// from the example's roomgate.yaml; in headless Chromium, two tabs of two rooms in one browser (the
// cookie is the last tab's): a move of the first tab's room with handoff closes its socket, which
// comes back to the room's new process by its pin (not refused by the cookie's room), and the page's
// "Served by" names the new process. Daphnes, gateway, browser and the static directory end in afterAll.
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, watchErrors } from '../support/browser.js';
import { exampleGatewayConfig, manage, startDaphne, stopExample, type DaphneApp } from '../support/daphne.js';
import { runCliHere } from '../cli/in-process.js';
import { backendEnv, Client, startGateway, TEST_SECRET, type GatewayProc } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const ADMIN_TOKEN = 'django-per-tab-admin-token-0123456789';
const SRI = 'sha384-ET3mbPb5f3vf0h2XaZlWeISZeLunu+iUDCNuRNXAtSOsDBMeE8t2bH2FZOCku8/F';
const staticRoot = scopeTempDir('roomgate-django-per-tab-');
const IDS = ['dj-t1', 'dj-t2'] as const;
const apps = new Map<string, DaphneApp>();
let gw: GatewayProc;
let browser: BrowserContext;

// Each process signs pins with roomgate's first cookie secret, as the gateway has it.
const appEnv = (id: string): Record<string, string> => ({ DJANGO_STATIC_ROOT: staticRoot, DJANGO_ALLOWED_HOSTS: 'localhost,127.0.0.1', ...backendEnv(id), ROOMGATE_COOKIE_SECRETS: TEST_SECRET });

beforeAll(async () => {
  const collected = await manage(['collectstatic', '--noinput'], appEnv('collect'));
  expect(collected.code, collected.out).toBe(0);
  const started = await Promise.all(IDS.map((id) => startDaphne(appEnv(id))));
  IDS.forEach((id, i) => apps.set(id, started[i] as DaphneApp));
  gw = await startGateway({ backends: IDS.map((id) => `${id}=${apps.get(id)?.url}`), config: { ...exampleGatewayConfig(staticRoot), admin: { token: ADMIN_TOKEN } } });
  browser = await launchBrowser();
}, 60_000);

afterAll(() => stopExample(staticRoot));

interface RoomPage {
  room: string;
  backend: string;
  pin: string;
  cookie: string;
  html: string;
}

async function page(room: string): Promise<RoomPage> {
  const res = await fetch(`${gw.url}/game/${room}/`, { signal: AbortSignal.timeout(5_000) });
  const html = await res.text();
  expect(res.status, html).toBe(200);
  return {
    room,
    html,
    backend: /<strong id="backend">([^<]+)</.exec(html)?.[1] as string,
    pin: /<meta name="roomgate-pin" content="([^"]+)"/.exec(html)?.[1] as string,
    cookie: /roomgate_room=[^;]+/.exec(res.headers.get('set-cookie') ?? '')?.[0] as string,
  };
}

/** Two rooms the gateway places on different processes (the ring decides; 12 names are plenty). */
async function twoRooms(prefix: string): Promise<[RoomPage, RoomPage]> {
  const seen = new Map<string, RoomPage>();
  for (let i = 0; i < 12 && seen.size < 2; i++) {
    const p = await page(`${prefix}-${i}`);
    if (!seen.has(p.backend)) seen.set(p.backend, p);
  }
  expect([...seen.keys()].sort()).toEqual([...IDS]);
  return [...seen.values()] as [RoomPage, RoomPage];
}

async function move(room: string, to: string): Promise<void> {
  const res = await fetch(`http://127.0.0.1:${gw.adminPort}/rooms/${room}/move`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ to }),
    signal: AbortSignal.timeout(15_000),
  });
  expect(res.status, await res.text()).toBe(200);
}

const socketsOf = async (backend: string, room: string): Promise<number> =>
  ((await (await fetch(`${apps.get(backend)?.url}/_example/rooms/${room}/`, { signal: AbortSignal.timeout(5_000) })).json()) as { sockets: number }).sockets;

describe("docs/django.md's per-tab rooms: the example's pages carry their room pin", () => {
  it("a room's page is rendered with its pin and roomgate's script; a socket with the pin goes to that room's process whatever the cookie", async () => {
    const [a, b] = await twoRooms('dj-pin');
    expect(a.pin).toMatch(new RegExp(`^${a.room}\\.[0-9a-z]+\\.[A-Za-z0-9_-]{43}$`));
    expect(a.html).toContain(`<script src="/_roomgate/room-pin.v1.js" integrity="${SRI}" crossorigin="anonymous"></script>`);
    expect((await fetch(`${gw.url}/_roomgate/room-pin.v1.js`, { signal: AbortSignal.timeout(5_000) })).status).toBe(200);

    // The browser's cookie names room b (its tab was opened last); the socket of a's tab carries a's pin.
    const pinned = new Client(`${gw.wsUrl}/ws/live/?roomgate_pin=${a.pin}`, { headers: { Origin: gw.url, Cookie: b.cookie } });
    await pinned.opened;
    expect(await pinned.next('connect')).toMatchObject({ room: a.room, backend: a.backend });
    pinned.send({ type: 'mount', url: `/game/${a.room}/` });
    expect(await pinned.next('mounted')).toMatchObject({ room: a.room, backend: a.backend });
    await pinned.close();

    // The same without the pin: the cookie's room, where a's mount is refused once (4400), not split.
    const cookieOnly = new Client(`${gw.wsUrl}/ws/live/`, { headers: { Origin: gw.url, Cookie: b.cookie } });
    await cookieOnly.opened;
    expect(await cookieOnly.next('connect')).toMatchObject({ room: b.room, backend: b.backend });
    cookieOnly.send({ type: 'mount', url: `/game/${a.room}/` });
    expect(await cookieOnly.closed).toBe(4400);

    // roomgate sign --pin gives the operator the same pin; a forged one is refused before any process.
    const signed = await runCliHere(['sign', '--pin', a.room], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    const byCli = new Client(`${gw.wsUrl}/ws/live/?roomgate_pin=${signed.stdout.trim()}`, { headers: { Origin: gw.url, Cookie: b.cookie } });
    await byCli.opened;
    expect(await byCli.next('connect')).toMatchObject({ room: a.room, backend: a.backend });
    await byCli.close();
    const forged = new Client(`${gw.wsUrl}/ws/live/?roomgate_pin=${a.pin.slice(0, -2)}xx`, { headers: { Origin: gw.url, Cookie: b.cookie } });
    await expect(forged.opened).rejects.toThrow();
    expect(forged.refusal?.status).toBe(403);
  });

  it('Chromium, two tabs of two rooms in one browser: after a move with handoff, the first tab is back in its room on the new process, and "Served by" says so', async () => {
    const [a, b] = await twoRooms('dj-tabs');
    const tabA = await browser.newPage();
    const tabB = await browser.newPage();
    const errors = [...[tabA, tabB].map((t) => watchErrors(t))];
    await tabA.goto(`${gw.url}/game/${a.room}/`);
    await expect.poll(() => tabA.locator('#status').textContent(), { timeout: 10_000 }).toBe(`Live in room ${a.room} on ${a.backend}`);
    await tabB.goto(`${gw.url}/game/${b.room}/`); // the cookie now names b's room
    await expect.poll(() => tabB.locator('#status').textContent(), { timeout: 10_000 }).toBe(`Live in room ${b.room} on ${b.backend}`);

    const to = b.backend; // a's room moves to the other process, the one holding b's
    await move(a.room, to);
    await expect.poll(() => tabA.locator('#status').textContent(), { timeout: 15_000 }).toBe(`Live in room ${a.room} on ${to} (moved from ${a.backend})`);
    expect(await tabA.locator('#backend').textContent()).toBe(to);
    expect(await tabA.title()).toBe(`Room ${a.room} (${to})`);
    expect(Number(await tabA.locator('#epoch').textContent())).toBeGreaterThan(0);
    // Each room has its one socket on its own process; nothing left where a's room was.
    expect(await socketsOf(to, a.room)).toBe(1);
    expect(await socketsOf(a.backend, a.room)).toBe(0);
    expect(await socketsOf(b.backend, b.room)).toBe(1);
    expect(await tabB.locator('#status').textContent()).toBe(`Live in room ${b.room} on ${b.backend}`);
    expect(errors.flat()).toEqual([]);
  });
});
