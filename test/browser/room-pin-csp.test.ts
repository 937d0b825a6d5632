// The room pin script (/_roomgate/room-pin.v1.js, src/pages/room-pin-script.ts) in headless
// Chromium under a page's Content-Security-Policy: it runs under script-src 'self', under its SRI
// hash alone and under a nonce, and not under 'none'. The pin through faults in a real browser is
// test/chaos/per-tab-rooms.test.ts's (npm run chaos).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ROOM_PIN_SCRIPT, ROOM_PIN_SCRIPT_HEADERS, ROOM_PIN_SCRIPT_PATH, ROOM_PIN_SCRIPT_SRI } from '../../src/pages/room-pin-script.js';
import { closeBrowsers, launchBrowser } from '../support/browser.js';

describe('the room pin script under a Content-Security-Policy', () => {
  it("runs under script-src 'self', under its SRI hash alone, under a nonce; not under 'none'", async () => {
    const server = http.createServer((req, res) => {
      if (req.url === ROOM_PIN_SCRIPT_PATH) {
        res.writeHead(200, ROOM_PIN_SCRIPT_HEADERS);
        return void res.end(ROOM_PIN_SCRIPT);
      }
      const csp = decodeURIComponent(new URL(req.url ?? '/', 'http://x').searchParams.get('csp') ?? '');
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': csp });
      res.end(`<!doctype html><meta name="roomgate-pin" content="r.1.s"><script src="${ROOM_PIN_SCRIPT_PATH}" integrity="${ROOM_PIN_SCRIPT_SRI}" crossorigin="anonymous" nonce="n0nce"></script>`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const browser = await launchBrowser();
      const page = await browser.newPage();
      const ran: Record<string, unknown> = {};
      for (const [name, csp] of [['self', "script-src 'self'"], ['hash', `script-src '${ROOM_PIN_SCRIPT_SRI}'`], ['nonce', "script-src 'nonce-n0nce'"], ['none', "script-src 'none'"]] as const) {
        await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/?csp=${encodeURIComponent(csp)}`);
        ran[name] = await page.evaluate(() => (globalThis as unknown as { WebSocket: { roomgatePin?: string } }).WebSocket.roomgatePin ?? null);
      }
      expect(ran).toEqual({ self: 'r.1.s', hash: 'r.1.s', nonce: 'r.1.s', none: null });
    } finally {
      await closeBrowsers();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  }, 60_000);
});
