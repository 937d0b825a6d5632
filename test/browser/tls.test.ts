// Chromium over https through roomgate's TLS port: a certificate made here with openssl is
// trusted for the test by its public key (--ignore-certificate-errors-spki-list), a.test resolves
// to 127.0.0.1. The demo game page loads over https on h2 (ALPN), opens its WebSocket as wss://
// (an h2 stream, RFC 8441) through roomgate to the room's backend, and gets a Secure room cookie; the backend saw X-Forwarded-Proto: https. With
// http2.enabled false the same page loads on HTTP/1.1, the fallback a browser takes.
import { createHash, X509Certificate } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeBrowsers, launchBrowser, watchErrors } from '../support/browser.js';
import { metricValue, startBackend, startGateway, stopAll, type GatewayProc } from '../support/processes.js';
import { scopeTempDir } from '../support/temp-dir.js';

const dir = scopeTempDir('roomgate-tls-browser-');
let gw: GatewayProc;
let gwHttp1: GatewayProc;
let browser: BrowserContext;

beforeAll(async () => {
  const cert = join(dir, 'a.crt');
  const key = join(dir, 'a.key');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '30', '-subj', '/CN=a.test', '-addext', 'subjectAltName=DNS:a.test'],
    { stdio: 'ignore', timeout: 10_000 },
  );
  const spki = createHash('sha256')
    .update(new X509Certificate(readFileSync(cert)).publicKey.export({ type: 'spki', format: 'der' }))
    .digest('base64');
  const backend = await startBackend('tb1');
  gw = await startGateway({ backends: [backend], config: { tls: { certs: [{ cert, key }], hstsMaxAgeS: 60 } } });
  gwHttp1 = await startGateway({ backends: [backend], config: { tls: { certs: [{ cert, key }] }, http2: { enabled: false } } });
  browser = await launchBrowser({ args: [`--ignore-certificate-errors-spki-list=${spki}`, '--host-resolver-rules=MAP a.test 127.0.0.1'] });
});

afterAll(async () => {
  await closeBrowsers();
  await stopAll();
});

describe('Chromium over https', () => {
  it('loads the game page, goes live over wss through roomgate, and keeps a Secure room cookie', async () => {
    const page = await browser.newPage();
    const errors = watchErrors(page);
    const res = await page.goto(`https://a.test:${gw.port}/game/tls-room/`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['strict-transport-security']).toBe('max-age=60');
    // The protocol the browser spoke to roomgate, as the browser and as roomgate saw it.
    expect(await page.evaluate("performance.getEntriesByType('navigation')[0].nextHopProtocol")).toBe('h2');
    expect(await metricValue(gw, 'roomgate_h2_connections_total')).toBeGreaterThanOrEqual(1);
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 10_000 }).toBe('Live in room tls-room on backend tb1');
    // The WebSocket went over the page's h2 connection as an extended CONNECT stream (RFC 8441).
    expect(await metricValue(gw, 'roomgate_h2_websockets_total')).toBe(1);
    const cookie = (await browser.cookies(`https://a.test:${gw.port}/`)).find((c) => c.name === 'roomgate_room');
    expect(cookie?.secure).toBe(true);
    // What the backend was told about the request roomgate received.
    const echo = await page.evaluate(async () => (await fetch('/_backend/echo')).json());
    expect((echo as { headers: Record<string, string> }).headers['x-forwarded-proto']).toBe('https');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('falls back to HTTP/1.1 when h2 is off, and the page goes live the same way', async () => {
    const page = await browser.newPage();
    const errors = watchErrors(page);
    const res = await page.goto(`https://a.test:${gwHttp1.port}/game/tls-room-1/`);
    expect(res?.status()).toBe(200);
    expect(await page.evaluate("performance.getEntriesByType('navigation')[0].nextHopProtocol")).toBe('http/1.1');
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 10_000 }).toBe('Live in room tls-room-1 on backend tb1');
    expect(await metricValue(gwHttp1, 'roomgate_h2_connections_total')).toBe(0);
    expect(errors).toEqual([]);
    await page.close();
  });
});
