// vitest globalSetup (the shared project's): one headless Chromium for the whole run, started by
// the first page test that asks and closed when the run ends. Workers reach it through a loopback
// HTTP endpoint (provided to them as `chromiumBroker`): a GET launches Chromium as a Playwright
// browser server once and answers its WebSocket endpoint; test/support/browser.ts connects to it
// and makes a fresh context per launchBrowser(). A run without page tests starts no Chromium.
// Started here, in vitest's own process, the browser is closed (and its temp profile removed) by
// the teardown below, whatever happens to the workers; a Chromium launched in a worker outlived it
// and left its profile in /tmp.
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type BrowserServer } from 'playwright-core';
import type { TestProject } from 'vitest/node';
import { CHROMIUM, CHROMIUM_ARGS } from './chromium.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** URL whose GET answers the run's Chromium WebSocket endpoint ('' when there is no Chromium). */
    chromiumBroker: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let server: Promise<BrowserServer> | undefined;
  const broker = createServer((_req, res) => {
    server ??= chromium.launchServer({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 30_000 });
    server.then(
      (s) => res.end(s.wsEndpoint()),
      (err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      },
    );
  });
  await new Promise<void>((resolve) => broker.listen(0, '127.0.0.1', resolve));
  project.provide('chromiumBroker', existsSync(CHROMIUM) ? `http://127.0.0.1:${(broker.address() as AddressInfo).port}/` : '');
  return async () => {
    broker.close();
    const s = await server?.catch(() => undefined);
    await s?.close();
  };
}
