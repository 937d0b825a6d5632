// The demo game page's moves in headless Chromium, against one demo backend (no gateway): the
// button makes a move and the count follows the room, a reload shows the count the room kept, a
// move made while a handoff froze the room is refused with a note and sent again once the page
// has reconnected (here after a release: the backend dropped the room, so the move is the first of
// the room's new life), and the page logs no error. Browser and backend end in afterAll.
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeBrowsers, launchBrowser, screenshot, watchErrors } from '../support/browser.js';
import { callHook } from '../support/handoff-receiver.js';
import { startBackend, stopAll, type BackendProc } from '../support/processes.js';

let backend: BackendProc;
let browser: BrowserContext;

beforeAll(async () => {
  backend = await startBackend('moves-a');
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await closeBrowsers();
  await stopAll();
});

describe('the demo game page: moves', () => {
  it('counts the moves of the room, keeps them over a reload, and sends a move refused while the room moved again after the reconnect', async () => {
    const page = await browser.newPage();
    const errors = watchErrors(page);
    await page.goto(`${backend.url}/game/moves/`);
    const moves = page.locator('#moves');
    await expect.poll(() => page.locator('#move').isEnabled(), { timeout: 10_000 }).toBe(true);
    for (let i = 1; i <= 3; i++) {
      await page.locator('#move').click();
      await expect.poll(() => moves.textContent(), { timeout: 5_000 }).toBe(String(i));
    }
    await page.reload();
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 10_000 }).toMatch(/^Live in room moves/);
    expect(await moves.textContent()).toBe('3');

    const be = { id: backend.id, url: backend.url, wsUrl: `ws://127.0.0.1:${backend.port}/ws/live/` };
    expect((await callHook(be, '/_roomgate/handoff', 'export', { id: 'h-page', room: 'moves', epoch: 1 })).status).toBe(200);
    await page.locator('#move').click();
    await expect.poll(() => page.locator('#move-note').textContent(), { timeout: 5_000 }).toMatch(/moving to another backend/);
    expect(await moves.textContent()).toBe('3');
    await screenshot(page, 'demo-moves-room-moving');
    expect((await callHook(be, '/_roomgate/handoff', 'release', { id: 'h-page', room: 'moves', epoch: 1 })).status).toBe(204);
    // Released: closed with 1012, reconnected, mounted (the room starts again here), move sent again.
    await expect.poll(() => page.locator('#move-note').textContent(), { timeout: 10_000 }).toBe('Your move was sent again');
    await expect.poll(() => moves.textContent(), { timeout: 5_000 }).toBe('1');
    expect(errors).toEqual([]);
  });
});
