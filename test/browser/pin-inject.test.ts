// room.pinInject in headless Chromium (docs/per-tab-rooms.md#injection-by-roomgate): the app's
// pages carry no pin of their own and are served under a strict Content-Security-Policy
// (`script-src 'self'`, no inline code); roomgate puts the pin and its script tag into each page
// of a room, the script passes the CSP (external, checked by its SRI), and every socket the page
// opens to the fixed /ws/live/ goes to the page's own room, while the browser's one room cookie
// names another room. Two tabs of two rooms in one browser context; the backend (a real node:http
// server with a ws WebSocketServer, in this process) records the room roomgate routed each socket
// by and the URL it got (the pin removed).
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocketServer } from 'ws';
import type { Gateway } from '../../src/gateway.js';
import { createRoomSigner } from '../../src/room/signing.js';
import { closeBrowsers, launchBrowser, watchErrors } from '../support/browser.js';
import { startInProcessGateway } from '../support/in-process-gateway.js';

/** The cookie secret startInProcessGateway gives its gateways. */
const SECRET = '0123456789abcdef0123456789abcdef';
const CSP = "default-src 'none'; script-src 'self'; connect-src 'self'";
const cookies = createRoomSigner({ secrets: [SECRET], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 });

// The tab's own module (external, as the CSP wants): opens the app's socket at the fixed path, as
// djust's client before #3186 does, after roomgate's script ran (it is earlier in <head>).
const TAB_JS = `const ws = new WebSocket('ws://' + location.host + '/ws/live/?v=1');
window.__tab = { opened: false, said: null };
ws.onopen = () => { window.__tab.opened = true; };
ws.onmessage = (e) => { window.__tab.said = String(e.data); };
`;

const page = (room: string): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${room}</title><script src="/tab.mjs" type="module"></script></head><body>${room}</body></html>`;

/** What the backend saw of each socket: the room roomgate routed it by, and its URL. */
const sockets: { room: string | undefined; url: string | undefined }[] = [];
const open = new Set<Socket>();
let backend: http.Server;
let wss: WebSocketServer;
let gw: Gateway;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'roomgate-pin-browser-'));
  wss = new WebSocketServer({ noServer: true });
  backend = http.createServer((req, res) => {
    if ((req.url ?? '').startsWith('/tab.mjs')) {
      res.writeHead(200, { 'Content-Type': 'text/javascript' });
      return void res.end(TAB_JS);
    }
    const room = String(req.headers['x-roomgate-room'] ?? 'none');
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8', 'Content-Security-Policy': CSP });
    res.end(page(room));
  });
  backend.on('connection', (s: Socket) => {
    open.add(s);
    s.on('close', () => open.delete(s));
  });
  backend.on('upgrade', (req, socket, head) => {
    const room = req.headers['x-roomgate-room'] as string | undefined;
    sockets.push({ room, url: req.url });
    wss.handleUpgrade(req, socket, head, (ws) => ws.send(`room ${room ?? 'none'}`));
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  gw = await startInProcessGateway(dir, `http://127.0.0.1:${(backend.address() as AddressInfo).port}`, {
    health: { path: null },
    proxy: { websocketPaths: ['/ws/'] },
    room: { pinInject: true },
    cookie: { secrets: [SECRET], setOnPages: false },
  });
});

afterAll(async () => {
  await closeBrowsers();
  await gw?.stop();
  for (const c of wss?.clients ?? []) c.terminate();
  for (const s of open) s.destroy();
  await new Promise<void>((r) => backend?.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

describe('room.pinInject in Chromium under a strict CSP', () => {
  it("each tab's socket to /ws/live/ goes to the tab's room, whatever the browser's cookie says", async () => {
    const browser = await launchBrowser();
    const origin = `http://127.0.0.1:${gw.port}`;
    const tabs = [];
    for (const room of ['tab-a', 'tab-b']) {
      // The page load's Set-Cookie: the browser's one room cookie is now this tab's room.
      await browser.addCookies([{ name: 'roomgate_room', value: cookies.sign(room, Date.now()), url: origin, httpOnly: true, sameSite: 'Lax' }]);
      const p = await browser.newPage();
      const errors = watchErrors(p);
      await p.goto(`${origin}/r/${room}/page/`);
      await expect.poll(() => p.evaluate(() => (globalThis as unknown as { __tab?: { said: string | null } }).__tab?.said ?? null), { timeout: 10_000 }).toBe(`room ${room}`);
      tabs.push({ room, p, errors });
    }
    // Tab a reconnects now, with tab b's cookie in the browser: its pin still routes it to tab-a.
    const a = tabs[0]!;
    const again = await a.p.evaluate(
      () =>
        new Promise<string>((resolve) => {
          const g = globalThis as unknown as { location: { host: string }; WebSocket: new (url: string) => { onmessage: (e: { data: unknown }) => void; onerror: () => void } };
          const ws = new g.WebSocket(`ws://${g.location.host}/ws/live/`);
          ws.onmessage = (e) => resolve(String(e.data));
          ws.onerror = () => resolve('error');
        }),
    );
    expect(again).toBe('room tab-a');
    for (const t of tabs) {
      // The page carries the pin roomgate put in, and the script ran (it passed the CSP by 'self' and its SRI).
      const seen = await t.p.evaluate(() => {
        type El = { getAttribute(n: string): string | null } | null;
        const g = globalThis as unknown as { document: { querySelector(s: string): El; head: { firstElementChild: El } }; WebSocket: { roomgatePin?: string } };
        return {
          pin: g.document.querySelector('meta[name="roomgate-pin"]')?.getAttribute('content') ?? null,
          afterHead: g.document.head.firstElementChild?.getAttribute('name') ?? null,
          scriptPinned: g.WebSocket.roomgatePin ?? null,
        };
      });
      expect(seen.pin).toMatch(new RegExp(`^${t.room}\\.`));
      expect(seen.afterHead).toBe('roomgate-pin');
      expect(seen.scriptPinned).toBe(seen.pin);
      expect(t.errors.filter((e) => !/favicon/.test(e))).toEqual([]);
    }
    // At the backend: every socket routed by its page's room, the pin never in its URL.
    expect(sockets.map((s) => s.room)).toEqual(['tab-a', 'tab-b', 'tab-a']);
    for (const s of sockets) expect(s.url).not.toContain('roomgate_pin');
    expect(sockets[0]!.url).toBe('/ws/live/?v=1');
  }, 60_000);
});
