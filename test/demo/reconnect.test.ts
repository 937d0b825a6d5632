// The demo's game page in real headless Chromium: when the room's backend dies, the page
// reconnects like djust's client (jittered exponential back-off) through the gateway, which places
// the room on another backend, and the page says it moved and where it is now, without a reload.
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePortRange } from '../cli/support.js';
import { closeBrowsers, launchBrowser, screenshot, watchErrors } from '../support/browser.js';
import { startGateway, stop, stopAll, waitFor, type GatewayProc } from '../support/processes.js';

let gw: GatewayProc;
let browser: BrowserContext;
const demoPids = new Map<string, number>();

beforeAll(async () => {
  const basePort = await freePortRange(3);
  // The demo as `npm start` runs it: no configuration file, three demo backends of its own.
  gw = await startGateway({ config: false, env: { ROOMGATE_HOST: '', ROOMGATE_DEMO_BASE_PORT: String(basePort) } });
  for (const l of gw.logs().filter((x) => x.msg === 'demo backend started')) demoPids.set(String(l.backend), Number(l.backendPid));
  browser = await launchBrowser();
});

afterAll(async () => {
  await closeBrowsers();
  if (gw) await stop(gw, 'SIGTERM', 10_000);
  for (const pid of demoPids.values()) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  await stopAll();
});

describe('the demo game page', () => {
  it('reconnects to another backend after its backend dies, and says it moved', async () => {
    expect(demoPids.size).toBe(3);
    const page = await browser.newPage();
    const errors = watchErrors(page);
    await page.goto(`http://127.0.0.1:${gw.port}/game/chess/`);
    await page.evaluate('window.sameDocument = true');
    const first = ((await page.locator('#backend-id').textContent()) ?? '').trim();
    expect([...demoPids.keys()]).toContain(first);
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 10_000 }).toBe(`Live in room chess on backend ${first}`);
    expect(await page.locator('#moved').isHidden()).toBe(true);

    // The room's backend dies (a crash: no close frame from it).
    process.kill(demoPids.get(first) as number, 'SIGKILL');
    await waitFor('the page on another backend', 20_000, async () => {
      const ws = ((await page.locator('#ws-backend').textContent()) ?? '').trim();
      return ws !== first && ws !== '' && (await page.locator('#status').textContent())?.startsWith('Live in room chess');
    });
    const now = ((await page.locator('#ws-backend').textContent()) ?? '').trim();
    expect([...demoPids.keys()].filter((id) => id !== first)).toContain(now);
    expect(await page.locator('#status').textContent()).toBe(`Live in room chess on backend ${now}`);
    expect(await page.locator('#moved').isVisible()).toBe(true);
    expect(await page.locator('#moved').textContent()).toBe(`Moved from backend ${first} to backend ${now} after its connection was lost`);
    // The banner follows the backend it is on now; the page was not reloaded.
    expect(((await page.locator('#backend-id').textContent()) ?? '').trim()).toBe(now);
    expect(await page.title()).toBe(`Room chess - roomgate demo (${now})`);
    expect(await page.evaluate('window.sameDocument === true')).toBe(true);
    // The gateway agrees: the room is on the backend the page says.
    const where = (await (await fetch(`http://127.0.0.1:${gw.adminPort}/rooms/chess`, { signal: AbortSignal.timeout(5_000) })).json()) as { backend: string };
    expect(where.backend).toBe(now);
    await screenshot(page, 'demo-moved');
    // Failed reconnect attempts log a WebSocket error in the console; nothing else may.
    expect(errors.filter((e) => !/WebSocket connection to .* failed|favicon/.test(e))).toEqual([]);
  });

  it('backs off between attempts: jittered, doubling from 500 ms, at most 5 s', async () => {
    // The page's own status line names each wait; with every backend gone it keeps retrying.
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${gw.port}/game/poker/`);
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 10_000 }).toMatch(/^Live in room poker/);
    const waits: number[] = [];
    await page.exposeFunction('__reportStatus', (t: string) => {
      const m = /reconnecting in ([\d.]+) s \(attempt (\d+)\)/.exec(t);
      if (m) waits[Number(m[2]) - 1] = Number(m[1]) * 1000;
    });
    await page.evaluate(`new MutationObserver(() => window.__reportStatus(document.getElementById('status').textContent)).observe(document.getElementById('status'), { childList: true, characterData: true, subtree: true })`);
    for (const pid of demoPids.values()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // the first test's backend is gone already
      }
    }
    await waitFor('five reconnect attempts', 30_000, () => waits.filter((w) => w !== undefined).length >= 5, 100);
    for (const [i, w] of waits.slice(0, 5).entries()) {
      const full = Math.min(5_000, 500 * 2 ** i);
      expect(w, `attempt ${i + 1}`).toBeGreaterThanOrEqual(full / 2 - 100);
      expect(w, `attempt ${i + 1}`).toBeLessThanOrEqual(full + 100);
    }
  });
});
