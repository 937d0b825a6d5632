// "Operator experience 3", item 6: the demo game page names a planned move for what it is. Through
// a real gateway in front of two demo backends (processes) in headless Chromium: a `move` through
// the admin API (the old owner's release closes the socket with 1012 "room moved") is said as
// "Moved to backend X by a handoff, without a disconnect" (the demo backend resumes the socket), not
// as a lost connection; the backend the room is on then
// dying is still said as a lost connection. Processes and browser end in afterAll.
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeBrowsers, launchBrowser, screenshot, watchErrors } from '../support/browser.js';
import { startBackend, startGateway, stop, stopAll, type BackendProc, type GatewayProc } from '../support/processes.js';

const TOKEN = 'demo-words-admin-token-0123456789';
let backends: BackendProc[];
let gw: GatewayProc;
let browser: BrowserContext;

beforeAll(async () => {
  backends = await Promise.all(['b1', 'b2'].map((id) => startBackend(id, ['--handoff-resume', 'on'])));
  gw = await startGateway({ backends, config: { admin: { token: TOKEN } } });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await closeBrowsers();
  await stopAll();
});

describe('the demo game page after a move', () => {
  it('says a handoff moved the room; a dead backend is still a lost connection', async () => {
    const page = await browser.newPage();
    const errors = watchErrors(page);
    await page.goto(`${gw.url}/game/words/`);
    const status = page.locator('#status');
    await expect.poll(() => status.textContent(), { timeout: 10_000 }).toMatch(/^Live in room words on backend b[12]$/);
    const from = /backend (b[12])$/.exec((await status.textContent()) ?? '')?.[1] as string;
    const to = from === 'b1' ? 'b2' : 'b1';
    const res = await fetch(`http://127.0.0.1:${gw.adminPort}/rooms/words/move`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ to }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status, await res.text()).toBe(200);
    const moved = page.locator('#moved');
    await expect.poll(() => moved.textContent(), { timeout: 15_000 }).toBe(`Moved to backend ${to} by a handoff, without a disconnect (from backend ${from})`);
    await expect.poll(() => status.textContent(), { timeout: 10_000 }).toBe(`Live in room words on backend ${to}`);
    expect(await page.locator('#backend-id').textContent()).toBe(to);
    await screenshot(page, 'demo-moved-by-handoff');
    // The new owner dies: the room goes back to the other backend after a lost connection.
    await stop(backends.find((b) => b.id === to)!, 'SIGKILL');
    await expect.poll(() => moved.textContent(), { timeout: 20_000 }).toBe(`Moved from backend ${to} to backend ${from} after its connection was lost`);
    expect(errors.filter((e) => !/WebSocket|ERR_CONNECTION|net::/.test(e))).toEqual([]);
    await page.close();
  }, 60_000);
});
