// The pages over plain HTTP through real processes: who may see the status page on each port
// (status.public off / token / open), the lobby page and its "New room" redirect, the security
// headers and CSP hashes, escaping of hostile room names and metadata, and the config check.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backendArgs, startBackendsHere, stopBackendsHere, type BackendHere } from '../support/backends-here.js';
import { Client, runCli, startGateway, stopAll, waitFor, withTimeout, writeConfig, type GatewayProc } from '../support/processes.js';

const ADMIN_TOKEN = 'pages-admin-token-0123456789';
const API_TOKEN = 'pages-api-token-0123456789abc';
// Markup as a room name. No whitespace and no "/": the name is in API paths, where an escaped
// space or slash is refused (400) on every front. Unescaped, it would make an <img> and an <svg>.
const XSS = '<img>"&<svg>';
const XSS_HTML = '&lt;img&gt;&quot;&amp;&lt;svg&gt;';
const FAST = { placement: { heartbeatMs: 200, gatewayTtlMs: 1000 }, presence: { ttlMs: 1000 }, api: { streamIntervalMs: 100, tokens: [API_TOKEN] } };

let backends: BackendHere[];
let gwOff: GatewayProc;
let gwToken: GatewayProc;
let gwOpen: GatewayProc;

beforeAll(async () => {
  // Demo backends in this process (test/support/backends-here.ts): none is signalled.
  backends = await startBackendsHere(['b1', 'b2']);
  const backendList = backendArgs(backends);
  [gwOff, gwToken, gwOpen] = await Promise.all([
    // A permissive room pattern, so a room can be named like markup.
    startGateway({ backends: backendList, config: { ...FAST, room: { pattern: '^.{1,128}$' } }, env: { ROOMGATE_ADMIN_TOKEN: ADMIN_TOKEN } }),
    startGateway({ backends: backendList, config: { ...FAST, status: { public: 'token' } }, env: { ROOMGATE_ADMIN_TOKEN: ADMIN_TOKEN } }),
    startGateway({ backends: backendList, config: { ...FAST, status: { public: 'open' }, api: { enabled: false } } }),
  ]);
});

afterAll(async () => {
  await stopAll();
  await stopBackendsHere();
});

interface Got {
  status: number;
  headers: Headers;
  text: string;
}

async function get(url: string, init: RequestInit = {}): Promise<Got> {
  const res = await fetch(url, { redirect: 'manual', ...init, signal: AbortSignal.timeout(10_000) });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

const basic = (user: string, pass: string): string => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
const admin = (gw: GatewayProc): string => `http://127.0.0.1:${gw.adminPort}`;

/** The first SSE event of a stream, then the connection is dropped. */
async function firstEvent(url: string, headers: Record<string, string> = {}): Promise<{ status: number; type: string; event: string; data: unknown }> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), 10_000);
  try {
    const res = await fetch(url, { headers, signal: ctl.signal });
    const type = res.headers.get('content-type') ?? '';
    if (!res.ok || !res.body) return { status: res.status, type, event: '', data: null };
    const reader = res.body.getReader();
    let text = '';
    for (;;) {
      const m = /event: (\w+)\ndata: (.*)\n\n/.exec(text);
      if (m) return { status: res.status, type, event: m[1] as string, data: JSON.parse(m[2] as string) };
      const { value, done } = await reader.read();
      if (done) throw new Error(`stream ended before an event: ${text}`);
      text += Buffer.from(value).toString();
    }
  } finally {
    clearTimeout(timer);
    ctl.abort();
  }
}

/** Every inline <style>/<script> is allowed by the CSP by its hash, and nothing else is. */
function expectHashedCsp(page: Got): void {
  const csp = page.headers.get('content-security-policy') ?? '';
  expect(csp).toMatch(/default-src 'none'/);
  expect(csp).toMatch(/frame-ancestors 'none'/);
  expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*/);
  const blocks = [...page.text.matchAll(/<(style|script)>([\s\S]*?)<\/\1>/g)];
  expect(blocks.length).toBe(2);
  for (const [, tag, body] of blocks) {
    const hash = `'sha256-${createHash('sha256').update(body as string).digest('base64')}'`;
    expect(csp).toContain(`${tag}-src ${hash}`);
  }
  expect(page.text).not.toMatch(/<(script|link|img)[^>]+(src|href)="(?!data:)/); // no external assets
  expect(page.text).not.toMatch(/ style=| on[a-z]+=/); // no inline styles or handlers
  expect(page.headers.get('x-content-type-options')).toBe('nosniff');
  expect(page.headers.get('x-frame-options')).toBe('DENY');
  expect(page.headers.get('cache-control')).toBe('no-store');
  expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
}

describe('status page on the admin port', () => {
  it('is served with every backend, its state and bars, the events and the mode', async () => {
    const page = await get(`${admin(gwOff)}/_roomgate/`);
    expect(page.status).toBe(200);
    expectHashedCsp(page);
    expect(page.text).toContain('<html lang="en">');
    for (const b of backends) {
      expect(page.text).toContain(`<tr data-backend="${b.id}">`);
      expect(page.text).toContain(b.url);
    }
    expect(page.text.match(/class="state state-up"/g)).toHaveLength(2);
    expect(page.text.match(/class="fill rooms p\d+"/g)).toHaveLength(2);
    expect(page.text.match(/class="fill sockets p\d+"/g)).toHaveLength(2);
    expect(page.text).toMatch(/<td data-label="Event">joined<\/td>\n<th scope="row" class="mono" data-label="Backend">b1<\/th>/);
    expect(page.text).toContain('in memory (this gateway only)');
    const gatewayId = /<code id="gateway-id">([^<]+)<\/code>/.exec(page.text)?.[1];
    const status = (await (await fetch(`${admin(gwOff)}/status`, { signal: AbortSignal.timeout(5_000) })).json()) as { gatewayId: string };
    expect(gatewayId).toBe(status.gatewayId);
  });

  it('streams snapshots, leads / to the page, refuses writes, answers HEAD', async () => {
    const ev = await firstEvent(`${admin(gwOff)}/_roomgate/status/stream`);
    expect(ev.type).toMatch(/^text\/event-stream/);
    expect(ev.event).toBe('status');
    const snap = ev.data as { backends: { id: string; url: string; state: string }[]; store: string };
    expect(snap.backends.map((b) => [b.id, b.url, b.state])).toEqual(backends.map((b) => [b.id, b.url, 'up']));
    expect(snap.store).toBe('memory');

    const root = await get(`${admin(gwOff)}/`);
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/_roomgate/');
    const post = await get(`${admin(gwOff)}/_roomgate/`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    const head = await get(`${admin(gwOff)}/_roomgate/`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    // The JSON routes are unchanged.
    expect((await get(`${admin(gwOff)}/backends`)).status).toBe(200);
  });
});

describe('status page on the public port', () => {
  it('off (default): not served by roomgate; the path goes to the app', async () => {
    for (const path of ['/_roomgate/', '/_roomgate/status/stream']) {
      const r = await get(`${gwOff.url}${path}`);
      expect(r.status).toBe(404);
      expect(r.headers.get('x-backend-id')).toMatch(/^b[12]$/);
    }
  });

  it('token: 401 with a Basic prompt; the admin token as Basic password or bearer lets in', async () => {
    const none = await get(`${gwToken.url}/_roomgate/`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Basic realm="roomgate status", charset="UTF-8"');
    expect(none.text).not.toContain('<table');
    for (const auth of [basic('admin', 'wrong-token-0123456789'), `Bearer wrong`, basic(ADMIN_TOKEN, ''), `Basic ${ADMIN_TOKEN}`]) {
      expect((await get(`${gwToken.url}/_roomgate/`, { headers: { Authorization: auth } })).status, auth).toBe(401);
    }
    for (const auth of [basic('anyone', ADMIN_TOKEN), basic('', ADMIN_TOKEN), `Bearer ${ADMIN_TOKEN}`]) {
      const ok = await get(`${gwToken.url}/_roomgate/`, { headers: { Authorization: auth } });
      expect(ok.status, auth).toBe(200);
      expectHashedCsp(ok);
      expect(ok.text).toContain('<tr data-backend="b1">');
      expect(ok.text).not.toContain('127.0.0.1'); // backend URLs stay on the admin port
    }
    expect((await firstEvent(`${gwToken.url}/_roomgate/status/stream`)).status).toBe(401);
    const ev = await firstEvent(`${gwToken.url}/_roomgate/status/stream`, { Authorization: basic('x', ADMIN_TOKEN) });
    expect(ev.event).toBe('status');
    expect((ev.data as { backends: { url: unknown }[] }).backends.every((b) => b.url === null)).toBe(true);
  });

  it('open: served to anyone, without backend URLs', async () => {
    const page = await get(`${gwOpen.url}/_roomgate/`);
    expect(page.status).toBe(200);
    expectHashedCsp(page);
    expect(page.text).toContain('<tr data-backend="b2">');
    expect(page.text).not.toContain('127.0.0.1');
    expect((await firstEvent(`${gwOpen.url}/_roomgate/status/stream`)).event).toBe('status');
  });
});

describe('lobby page', () => {
  it('is served on the public port with its CSP; "New room" redirects to a fresh room page', async () => {
    const page = await get(`${gwOff.url}/_roomgate/lobby`);
    expect(page.status).toBe(200);
    expectHashedCsp(page);
    expect(page.text).toContain('<h1>Lobby</h1>');
    expect(page.text).toContain('data-stream="/_roomgate/api/lobby/stream"');
    expect(page.text).toContain('<h2 id="board-h">Leaderboard <code>global</code></h2>');
    const a = await get(`${gwOff.url}/_roomgate/lobby/new`);
    const b = await get(`${gwOff.url}/_roomgate/lobby/new`);
    expect(a.status).toBe(303);
    const loc = a.headers.get('location') ?? '';
    expect(loc).toMatch(/^\/game\/[a-z]+-[a-z]+-\d{4}\/$/);
    expect(b.headers.get('location')).not.toBe(loc);
    const game = await get(`${gwOff.url}${loc}`);
    expect(game.status).toBe(200);
    expect(game.text).toContain(`Served by backend <strong>${game.headers.get('x-backend-id')}</strong>`);
  });

  it('refuses bad input and writes; not served without the API (the app gets the path)', async () => {
    expect((await get(`${gwOff.url}/_roomgate/lobby?board=no%20spaces`)).status).toBe(400);
    expect((await get(`${gwOff.url}/_roomgate/lobby?board=a&board=b`)).status).toBe(400);
    expect((await get(`${gwOff.url}/_roomgate/lobby?board=weekly`)).text).toContain('Leaderboard <code>weekly</code>');
    expect((await get(`${gwOff.url}/_roomgate/lobby`, { method: 'POST', body: 'x' })).status).toBe(405);
    const off = await get(`${gwOpen.url}/_roomgate/lobby`);
    expect(off.status).toBe(404);
    expect(off.headers.get('x-backend-id')).toMatch(/^b[12]$/);
  });

  it('escapes room names, metadata and leaderboard members that look like markup', async () => {
    const c = new Client(`${gwOff.wsUrl}/ws/live/?room=${encodeURIComponent(XSS)}`);
    await withTimeout(c.opened, 10_000, 'socket of the hostile room');
    const meta = { title: XSS, status: '"><svg onload=alert(2)>', note: '</script><script>alert(3)</script>' };
    const put = await get(`${gwOff.url}/_roomgate/api/rooms/${encodeURIComponent(XSS)}/meta`, {
      method: 'PUT',
      headers: { Authorization: `Bearer ${API_TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(meta),
    });
    expect(put.status).toBe(200);
    const score = await get(`${gwOff.url}/_roomgate/api/leaderboards/global/scores`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${API_TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ member: XSS, score: 7 }),
    });
    expect(score.status).toBe(200);
    const page = await waitFor('the hostile room in the lobby page', 10_000, async () => {
      const p = await get(`${gwOff.url}/_roomgate/lobby`);
      return p.text.includes('data-room="&lt;img') ? p : null;
    }, 100);
    expect(page.text).not.toMatch(/<img|<svg|<script>alert/);
    expect(page.text).toContain(`<a href="/game/${encodeURIComponent(XSS)}/">${XSS_HTML}</a>`);
    expect(page.text).toContain(`<td data-col="title" data-label="Title">${XSS_HTML}</td>`);
    expect(page.text).toContain('<td data-col="status" data-label="Status">&quot;&gt;&lt;svg onload=alert(2)&gt;</td>');
    expect(page.text).toContain('note: &lt;/script&gt;&lt;script&gt;alert(3)&lt;/script&gt;');
    expect(page.text).toContain(`<th scope="row">${XSS_HTML}</th><td class="num">7</td>`);
    await c.close();
  });
});

describe('configuration', () => {
  it('status.public must be off, token or open; token needs admin.token', async () => {
    const [bad, noToken, ok] = await Promise.all([
      runCli(['check-config', '--config', writeConfig({ status: { public: 'yes' } })]),
      runCli(['check-config', '--config', writeConfig({ status: { public: 'token' } })]),
      runCli(['check-config', '--config', writeConfig({ status: { public: 'token' } })], { ROOMGATE_ADMIN_TOKEN: ADMIN_TOKEN }),
    ]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/status\.public: got "yes"; expected .*off.*token.*open/);
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toContain('status.public: got "token" while admin.token is empty; expected "off" or "open", or set admin.token');
    expect(ok.code).toBe(0);
  });
});
