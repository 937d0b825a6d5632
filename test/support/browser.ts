// Headless Chromium for the page tests: Debian's /usr/bin/chromium driven by playwright-core (which
// downloads no browser). Each launch gets a fresh temp user-data-dir, removed by closeBrowsers().
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { ROOT } from './processes.js';

export const CHROMIUM = '/usr/bin/chromium';
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
];
export const SCREENSHOTS = join(ROOT, 'test-output/screenshots');

/** Every wait in a page (selectors, navigation, waitForFunction) gives up after this. */
export const PAGE_TIMEOUT_MS = 10_000;

const open = new Map<BrowserContext, string>();

export interface BrowserOptions {
  javaScriptEnabled?: boolean;
  /** More Chromium flags (e.g. a pinned certificate, host resolver rules). */
  args?: readonly string[];
}

/** A browser with its own fresh profile (a persistent context: the only way to choose the dir). */
export async function launchBrowser(o: BrowserOptions = {}): Promise<BrowserContext> {
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
  ctx.setDefaultTimeout(PAGE_TIMEOUT_MS);
  ctx.setDefaultNavigationTimeout(PAGE_TIMEOUT_MS);
  open.set(ctx, dir);
  return ctx;
}

/** Closes every browser launched here and removes its profile. Call from afterAll. */
export async function closeBrowsers(): Promise<void> {
  await Promise.all(
    [...open].map(async ([ctx, dir]) => {
      await Promise.race([ctx.close().catch(() => undefined), new Promise((r) => setTimeout(r, 10_000))]);
      rmSync(dir, { recursive: true, force: true });
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
