// A reload (SIGHUP) that changes the cache settings: the gateway keeps the settings it started
// with and says so, in the reload's answer and on the status page's cache line; set back, the
// note goes (it is on the admin port's page only). The page counts the stored pages and their size in words.
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, type LoadedConfig } from '../../src/config/load.js';
import { Gateway } from '../../src/gateway.js';
import { createLogger } from '../../src/observability/logger.js';
import { CACHE_RESTART_NOTE, STATUS_PATH } from '../../src/pages/status-page.js';

let dir: string;
let backend: http.Server;
let gw: Gateway;

function config(cache: Record<string, unknown>): LoadedConfig {
  const file = join(dir, `c-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(
    file,
    JSON.stringify({
      listen: { host: '127.0.0.1', port: 0 },
      admin: { host: '127.0.0.1', port: 0 },
      backends: [{ id: 'b1', url: `http://127.0.0.1:${(backend.address() as AddressInfo).port}` }],
      cookie: { secrets: ['0123456789abcdef0123456789abcdef'] },
      shutdown: { graceMs: 0 },
      log: { level: 'silent' },
      cache: { paths: ['/'], ...cache },
      status: { public: 'open' },
    }),
  );
  return loadConfig({ env: {}, file });
}

function get(port: number, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, agent: false, timeout: 5_000 }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve(body));
      })
      .on('timeout', function (this: http.ClientRequest) {
        this.destroy(new Error(`GET ${path} timed out`));
      })
      .on('error', reject);
  });
}

/** The status page's cache line (its <dd id="cache">), on the admin port or the public one. */
async function cacheLine(port = gw.adminPort as number): Promise<string> {
  const page = await get(port, STATUS_PATH);
  return /<dd id="cache">([^<]*)<\/dd>/.exec(page)?.[1] ?? '(no cache line)';
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'roomgate-reload-note-'));
  backend = http.createServer((_req, res) => {
    res.writeHead(200, { 'Cache-Control': 'max-age=600', 'Content-Type': 'text/plain' });
    res.end('x'.repeat(1200));
  });
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  gw = new Gateway(config({}), { logger: createLogger('silent') });
  await gw.start();
});

afterAll(async () => {
  await gw?.stop();
  backend.closeAllConnections();
  await new Promise<void>((r) => backend.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

describe('a reload that changes the cache settings', () => {
  it('is answered and shown as needing a restart, until the settings are set back', async () => {
    for (const path of ['/game/a/', '/game/b/', '/game/a/']) await get(gw.port, path);
    const before = await cacheLine();
    expect(before).toMatch(/^\d+\.\d % hits \(1 of 3\); 2 stored pages, \d(\.\d)? KB of 64 MiB$/);

    const changed = gw.reload(config({ maxBytes: 32 * 1_048_576 }));
    expect(changed.needsRestart).toEqual(['cache']);
    // The settings in use stay: still 64 MiB, and the note says why.
    expect(await cacheLine()).toBe(`${before}; ${CACHE_RESTART_NOTE}`);
    // The public page (status.public: open) shows the figures, not the operators' note.
    expect(await cacheLine(gw.port)).toBe(before);

    const back = gw.reload(config({}));
    expect(back.needsRestart).toEqual([]);
    expect(await cacheLine()).toBe(before);
  });
});
