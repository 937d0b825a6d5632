// Headless Chromium for the page tests: Debian's /usr/bin/chromium driven by playwright-core (which
// downloads no browser). One Chromium for the whole run (test/support/browser-server.ts, the shared
// project's globalSetup, starts it when the first file asks and closes it at the end): each
// launchBrowser() is a fresh context of it (its own cookies, storage, cache and connections),
// closed by closeBrowsers(). A Chromium launch cost about 3 s of CPU, and a dozen files launched one
// each. A file that needs its own flags (a pinned certificate, host resolver rules), or runs where
// no broker is provided (the isolated project), gets a Chromium of its own, with a fresh temp
// user-data-dir removed by closeBrowsers().
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { inject } from 'vitest';
import { CHROMIUM, CHROMIUM_ARGS } from './chromium.js';
import { ROOT } from './processes.js';

export { CHROMIUM, CHROMIUM_ARGS };
export const SCREENSHOTS = join(ROOT, 'test-output/screenshots');

/** Every wait in a page (selectors, navigation, waitForFunction) gives up after this. */
export const PAGE_TIMEOUT_MS = 10_000;

/** The contexts launchBrowser() made, with the profile dir to remove (none: the shared Chromium's). */
const open = new Map<BrowserContext, string | undefined>();

export interface BrowserOptions {
  javaScriptEnabled?: boolean;
  /** More Chromium flags (e.g. a pinned certificate, host resolver rules): a Chromium of its own. */
  args?: readonly string[];
}

let shared: Promise<Browser> | undefined;

/** The run's Chromium, connected once per worker (again if the connection died); undefined: none here. */
async function sharedBrowser(): Promise<Browser | undefined> {
  const broker = inject('chromiumBroker');
  if (!broker) return undefined;
  const current = await shared?.catch(() => undefined);
  if (current?.isConnected()) return current;
  shared = (async () => {
    const res = await fetch(broker, { signal: AbortSignal.timeout(40_000) });
    const endpoint = await res.text();
    if (!res.ok) throw new Error(`the run's Chromium did not start: ${endpoint}`);
    return chromium.connect(endpoint, { timeout: 30_000 });
  })();
  return shared;
}

/** A browser context with its own fresh profile. */
export async function launchBrowser(o: BrowserOptions = {}): Promise<BrowserContext> {
  let ctx: BrowserContext;
  const browser = o.args?.length ? undefined : await sharedBrowser();
  if (browser === undefined) ctx = await ownChromium(o);
  else {
    ctx = await browser.newContext({ javaScriptEnabled: o.javaScriptEnabled ?? true, viewport: { width: 1200, height: 800 } });
    open.set(ctx, undefined);
  }
  ctx.setDefaultTimeout(PAGE_TIMEOUT_MS);
  ctx.setDefaultNavigationTimeout(PAGE_TIMEOUT_MS);
  return ctx;
}

/** A Chromium of its own with extra flags (a persistent context: the only way to choose the dir). */
async function ownChromium(o: BrowserOptions): Promise<BrowserContext> {
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-chromium-'));
  let ctx: BrowserContext;
  try {
    ctx = await chromium.launchPersistentContext(dir, {
      executablePath: CHROMIUM,
      headless: true,
      args: [...CHROMIUM_ARGS, ...(o.args ?? [])],
      javaScriptEnabled: o.javaScriptEnabled ?? true,
      viewport: { width: 1200, height: 800 },
      timeout: 30_000,
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  open.set(ctx, dir);
  return ctx;
}

/** Closes every context launched here (and a Chromium of its own, with its profile). Call from afterAll. */
export async function closeBrowsers(): Promise<void> {
  await Promise.all(
    [...open].map(async ([ctx, dir]) => {
      await Promise.race([ctx.close().catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))]);
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    }),
  );
  open.clear();
}

/** Console errors and uncaught exceptions of a page (CSP violations show up here). */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`pageerror: ${e.message}`));
  page.on('dialog', (d) => {
    errors.push(`dialog: ${d.message()}`);
    void d.dismiss();
  });
  return errors;
}

/** A full-page PNG in test-output/screenshots/ (gitignored); returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name}.png`);
  await page.screenshot({ path, fullPage: true, timeout: PAGE_TIMEOUT_MS });
  return path;
}

/**
 * A page of `ctx` with JavaScript off: what a context launched with javaScriptEnabled false does
 * (Playwright sends the same Emulation.setScriptExecutionDisabled), for this page only, so a file
 * needs no second browser for its no-JavaScript pages. Pages it opens (a new tab) have JavaScript.
 */
export async function newPageWithoutScripts(ctx: BrowserContext): Promise<Page> {
  const page = await ctx.newPage();
  const cdp = await ctx.newCDPSession(page);
  await cdp.send('Emulation.setScriptExecutionDisabled', { value: true });
  return page;
}
