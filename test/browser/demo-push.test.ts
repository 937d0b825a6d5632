// A push you can see (issue 31, item 1), as a new user meets it: `roomgate start` with no backends
// (the demo, a real process with its three demo backends) prints a push token and a curl that uses
// it; with the game page open in headless Chromium, the printed curl answers 202 with the sockets
// it reached and the message appears on the page; docs/push.md's first example, run verbatim (only
// the port differs), reaches the page and a plain socket of the room that never sent `mount`; the
// status page's Recent pushes shows the count. Every wait has a timeout; the demo and the browser
// end in afterAll.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { closeBrowsers, launchBrowser, screenshot, watchErrors } from '../support/browser.js';
import { Client, ROOT, startGateway, stop, stopAll, waitFor, type GatewayProc } from '../support/processes.js';
import { freePortRange, runPrinted } from '../cli/support.js';

let gw: GatewayProc;
let bannerText = '';
const demoPids: number[] = [];
let browser: BrowserContext;

beforeAll(async () => {
  const basePort = await freePortRange(3);
  // The demo as `npm start` runs it: no configuration file, no secret or token in the environment.
  gw = await startGateway({ config: false, env: { ROOMGATE_HOST: '', ROOMGATE_COOKIE_SECRETS: '', ROOMGATE_DEMO_BASE_PORT: String(basePort) } });
  demoPids.push(...gw.logs().filter((l) => l.msg === 'demo backend started').map((l) => Number(l.backendPid)));
  bannerText = await waitFor('the demo banner', 10_000, () => (gw.stderr.some((l) => l.startsWith('Kill a backend')) ? gw.stderr.join('\n') : undefined));
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await closeBrowsers();
  if (gw) await stop(gw, 'SIGTERM', 10_000);
  for (const pid of demoPids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // stopped with the gateway
    }
  }
  await stopAll();
});

/** The banner line that starts with `label`, without it. */
function line(label: string): string {
  const l = bannerText.split('\n').find((x) => x.trimStart().startsWith(label));
  expect(l, `banner line "${label}" in:\n${bannerText}`).toBeDefined();
  return (l as string).trimStart().slice(label.length).trim();
}

/** docs/push.md's first shell example, as written. */
function firstPushExample(): string {
  const doc = readFileSync(join(ROOT, 'docs/push.md'), 'utf8');
  const block = /```sh\n([\s\S]*?)```/.exec(doc)?.[1];
  expect(block).toBeDefined();
  return (block as string)
    .split('\n')
    .filter((l) => !l.startsWith('#'))
    .join('\n');
}

async function pushedOnPage(page: Page): Promise<string[]> {
  return page.locator('#pushed li').allTextContents();
}

describe('the demo: a push you can see', () => {
  it('prints a push token and a curl; the curl reaches the open game page and says how many sockets got it', async () => {
    const curl = line('push token:');
    const token = /Bearer ([A-Za-z0-9_-]+)'/.exec(curl)?.[1] ?? '';
    expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    // Printed once, never logged.
    expect(gw.stderr.join('\n').split(token)).toHaveLength(2);
    expect(gw.lines.join('\n')).not.toContain(token);
    expect(curl).toContain(`'http://localhost:${gw.port}/_roomgate/api/rooms/chess/messages'`);
    expect(bannerText).toContain(`Open http://localhost:${gw.port}/game/chess/ and run the push command: the message appears on the page.`);

    const page = await browser.newPage();
    const errors = watchErrors(page);
    await page.goto(line('a game room:'));
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 10_000 }).toMatch(/^Live in room chess on backend demo-\d$/);
    expect(await page.locator('#no-pushes').isVisible()).toBe(true);

    const sent = await runPrinted(curl);
    expect(sent.code, sent.stderr).toBe(0);
    const answer = JSON.parse(sent.stdout) as Record<string, unknown>;
    expect(answer).toMatchObject({ room: 'chess', backend: await page.locator('#backend-id').textContent(), sockets: 1 });
    await expect.poll(() => pushedOnPage(page), { timeout: 5_000 }).toEqual(['demo: hello from curl']);
    expect(await page.locator('#no-pushes').isVisible()).toBe(false);
    await screenshot(page, 'demo-push');

    // docs/push.md's first example, verbatim but for the port, with the token exported as it says;
    // a plain socket in the room (routed by ?room=, never mounts) gets it too.
    const plain = new Client(`ws://127.0.0.1:${gw.port}/ws/live/?room=chess`);
    await plain.opened;
    await plain.next('connect');
    const example = firstPushExample().replaceAll('http://localhost:8080', `http://localhost:${gw.port}`);
    expect(example).toContain(`http://localhost:${gw.port}/_roomgate/api/rooms/chess/messages`);
    const ran = await runPrinted(example, { ROOMGATE_PUSH_TOKEN: token });
    expect(ran.code, ran.stderr).toBe(0);
    expect(JSON.parse(ran.stdout)).toMatchObject({ room: 'chess', sockets: 2 });
    await expect.poll(() => pushedOnPage(page), { timeout: 5_000 }).toEqual(['job:tournament: final round in 5 minutes', 'demo: hello from curl']);
    expect(await plain.next('push')).toMatchObject({ room: 'chess', sender: 'job:tournament', message: { type: 'announce', text: 'final round in 5 minutes' } });
    expect(errors).toEqual([]);

    // The status page (admin port) shows the count of each push.
    const status = await browser.newPage();
    await status.goto(line('the status page:'));
    const rows = status.locator('#pushes tbody tr');
    await expect.poll(() => rows.count(), { timeout: 5_000 }).toBe(2);
    expect(await rows.first().locator('[data-label="Sockets"]').textContent()).toBe('2');
    expect(await rows.nth(1).locator('[data-label="Sockets"]').textContent()).toBe('1');
    expect(await rows.first().locator('[data-label="Sender"]').textContent()).toBe('job:tournament');
    await plain.close();
  });
});
