// withHsts: the ServerResponse of the TLS port adds Strict-Transport-Security to every answer that
// has none, however its head is written, and never duplicates or replaces a backend's own. A real
// node:http server and client (the class does not care whether the socket is TLS).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withHsts } from '../../src/server/hsts.js';

let server: http.Server;
let port: number;

beforeAll(async () => {
  server = http.createServer({ ServerResponse: withHsts(http.ServerResponse, 'max-age=60') }, (req, res) => {
    switch (req.url) {
      case '/array': // the proxy's form: a raw list, several Set-Cookie lines
        return res.writeHead(200, 'OK', ['Set-Cookie', 'a=1', 'Set-Cookie', 'b=2', 'Content-Length', '0']).end();
      case '/array-own': // a backend's own header wins, in any spelling
        return res.writeHead(200, ['strict-transport-security', 'max-age=5', 'Content-Length', '0']).end();
      case '/object':
        return res.writeHead(404, { 'Content-Length': '0' }).end();
      case '/set-before':
        res.setHeader('Strict-Transport-Security', 'max-age=7');
        return res.writeHead(200, { 'Content-Length': '0' }).end();
      default: // an implicit head: end() alone
        res.statusCode = 204;
        return res.end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

function get(path: string): Promise<{ status: number; raw: string[] }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent: false, timeout: 5_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, raw: res.rawHeaders }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
  });
}

const values = (raw: string[], name: string): string[] => raw.filter((_, i) => i % 2 === 1 && raw[i - 1]!.toLowerCase() === name);

describe('withHsts', () => {
  it('adds the header to a raw header list and keeps every Set-Cookie line', async () => {
    const r = await get('/array');
    expect(values(r.raw, 'strict-transport-security')).toEqual(['max-age=60']);
    expect(values(r.raw, 'set-cookie')).toEqual(['a=1', 'b=2']);
  });

  it("keeps a backend's own header, once", async () => {
    expect(values((await get('/array-own')).raw, 'strict-transport-security')).toEqual(['max-age=5']);
    expect(values((await get('/set-before')).raw, 'strict-transport-security')).toEqual(['max-age=7']);
  });

  it('adds it to an object head and to an implicit head', async () => {
    const o = await get('/object');
    expect(o.status).toBe(404);
    expect(values(o.raw, 'strict-transport-security')).toEqual(['max-age=60']);
    const i = await get('/implicit');
    expect(i.status).toBe(204);
    expect(values(i.raw, 'strict-transport-security')).toEqual(['max-age=60']);
  });
});
