// docs/django.md, exercised: the Django Channels example (examples/django-channels/) under daphne
// (Debian's Django 3.2, Channels 4.0, daphne 4.0) behind real gateways, with the settings the page
// gives: the ASGI health wrapper (roomgate's HTTP health check passes, Django's ALLOWED_HOSTS never
// sees it), DJUST_TRUSTED_PROXY_COUNT=1 (the client's address, a spoofed X-Forwarded-For not
// believed), both signing choices (roomgate signs the room cookie; Django signs it and roomgate only
// verifies), the per-tab prefix, a socket without a room key refused at mount, the push receiver
// (roomgate's proof checked, the room's sockets reached and counted), collectstatic's output served
// by roomgate, and the page itself in headless Chromium. Two daphne processes, one per signing
// choice, each killed in afterAll with its temp directory.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, watchErrors } from '../support/browser.js';
import { DJANGO_APP as APP, exampleGatewayConfig, manage, pushThrough, startDaphne, stopExample, type DaphneApp as App } from '../support/daphne.js';
import { runCliHere } from '../cli/in-process.js';
import { backendEnv, Client, ROOT, startGateway, TEST_SECRET, type GatewayProc, waitFor } from '../support/processes.js';
import { EXPECTED_RECEIVER_ANSWERS, forgedPushes, signedPushHeaders } from '../support/push-receiver.js';
import { scopeTempDir } from '../support/temp-dir.js';

const TOKEN = 'push-token-0123456789abcdef';
const SECRET_KEY = 'django-secret-key-for-the-test-0123456789';
const staticRoot = scopeTempDir('roomgate-django-static-');
let roomgateSigns: App;
let djangoSigns: App;
let gw: GatewayProc;
let gwDjango: GatewayProc;

const appEnv = (id: string, cookie: 'roomgate' | 'django'): Record<string, string> => ({
  DJANGO_SECRET_KEY: SECRET_KEY,
  DJANGO_STATIC_ROOT: staticRoot,
  DJANGO_ALLOWED_HOSTS: 'localhost,127.0.0.1',
  DJUST_TRUSTED_PROXY_COUNT: '1',
  ...backendEnv(id),
  ROOMGATE_ROOM_COOKIE: cookie,
  // The page's room pin is signed with roomgate's first cookie secret: the gateway's (a Django
  // cookie format has SECRET_KEY there, which the app takes when this is unset).
  ...(cookie === 'roomgate' ? { ROOMGATE_COOKIE_SECRETS: TEST_SECRET } : {}),
});

beforeAll(async () => {
  const collected = await manage(['collectstatic', '--noinput'], appEnv('collect', 'roomgate'));
  expect(collected.code, collected.out).toBe(0);
  [roomgateSigns, djangoSigns] = await Promise.all([startDaphne(appEnv('dj-a', 'roomgate')), startDaphne(appEnv('dj-b', 'django'))]);
  // The example's roomgate.yaml with this test's backends; tokens and secrets come from the environment as the page says.
  const common = exampleGatewayConfig(staticRoot);
  const env = { ROOMGATE_PUSH_TOKENS: TOKEN };
  [gw, gwDjango] = await Promise.all([
    startGateway({ backends: [`dj-a=${roomgateSigns.url}`], config: common, env }),
    startGateway({
      backends: [`dj-b=${djangoSigns.url}`],
      config: { ...common, cookie: { format: 'django-cookie', salt: 'roomgate.room', setOnPages: false } },
      env: { ...env, ROOMGATE_COOKIE_SECRETS: SECRET_KEY },
    }),
  ]);
}, 60_000);

afterAll(() => stopExample(staticRoot));

async function get(url: string, headers: Record<string, string> = {}): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(5_000) });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** A socket of the page at `path` through the gateway, as a browser on that origin opens it. */
async function socket(g: GatewayProc, path: string, headers: Record<string, string> = {}): Promise<{ c: Client; hello: Record<string, unknown> }> {
  const c = new Client(`${g.wsUrl}${path}`, { headers: { Origin: g.url, ...headers } });
  await c.opened;
  return { c, hello: await c.next('connect') };
}

function roomCookie(setCookie: string | null): string {
  const m = /roomgate_room=([^;]+)/.exec(setCookie ?? '');
  expect(m, `Set-Cookie: ${setCookie}`).not.toBeNull();
  return `roomgate_room=${m?.[1] as string}`;
}

const push = (g: GatewayProc, room: string, body: unknown): ReturnType<typeof pushThrough> => pushThrough(g.url, TOKEN, room, body);

const stateOf = async (app: App, room: string): Promise<{ epoch: number | null; sockets: number; inbox: Record<string, unknown>[] }> =>
  JSON.parse((await get(`${app.url}/_example/rooms/${room}/`)).text) as never;

describe('docs/django.md against the Channels example under daphne', () => {
  it("every python, django and yaml block of docs/django.md is in the example's files as written", () => {
    const doc = readFileSync(join(ROOT, 'docs/django.md'), 'utf8');
    const blocks = [...doc.matchAll(/```(python|django|yaml)\n([\s\S]*?)```/g)].map((m) => m[2] as string);
    expect(blocks.length).toBeGreaterThanOrEqual(10);
    const names = ['liveapp/settings.py', 'liveapp/asgi.py', 'liveapp/urls.py', 'rooms/views.py', 'rooms/consumers.py', 'rooms/state.py', 'rooms/handoff.py', 'rooms/templates/rooms/game.html', 'roomgate.yaml'];
    const files = names.map((f) => readFileSync(join(APP, f), 'utf8'));
    for (const block of blocks) expect(files.some((f) => f.includes(block)), block).toBe(true);
  });

  it('the page and its socket (by the room cookie roomgate signs) reach the room; a push reaches the socket and is counted', async () => {
    const page = await waitFor('the page through roomgate', 10_000, async () => {
      const p = await get(`${gw.url}/game/dj-chess/`);
      return p.status === 200 ? p : undefined;
    });
    const epoch = Number(/under epoch <span id="epoch">(\d+)<\/span>/.exec(page.text)?.[1]);
    expect(epoch).toBeGreaterThan(0);
    const { c, hello } = await socket(gw, '/ws/live/', { Cookie: roomCookie(page.headers.get('set-cookie')) });
    // djust's shape: the server speaks first, then the client mounts.
    expect(hello).toMatchObject({ type: 'connect', backend: 'dj-a', room: 'dj-chess' });
    c.send({ type: 'mount', url: '/game/dj-chess/' });
    expect(await c.next('mounted')).toMatchObject({ room: 'dj-chess', backend: 'dj-a', members: 1 });

    const a = await push(gw, 'dj-chess', { text: 'final round' });
    expect(a).toMatchObject({ status: 202, json: { room: 'dj-chess', backend: 'dj-a', epoch, sockets: 1 } });
    expect(await c.next('push')).toMatchObject({ room: 'dj-chess', sender: 'job:test', id: a.json.id, message: { text: 'final round' } });
    expect(await stateOf(roomgateSigns, 'dj-chess')).toMatchObject({ epoch, sockets: 1 });

    // A fan-out reaches the live room (presence) and counts its socket.
    await expect
      .poll(
        async () => {
          const res = await fetch(`${gw.url}/_roomgate/api/messages?prefix=dj-`, { method: 'POST', headers: { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' }, body: '{"n":1}', signal: AbortSignal.timeout(5_000) });
          return res.json();
        },
        { timeout: 5_000 },
      )
      .toMatchObject({ rooms: 1, backends: { 'dj-a': { result: 'delivered', sockets: 1 } } });
    await c.close();
  });

  it('DJUST_TRUSTED_PROXY_COUNT=1: the app sees the address roomgate saw, never a client-sent X-Forwarded-For', async () => {
    const page = await get(`${gw.url}/game/dj-ip/`);
    // From 127.0.0.2, so the client's address differs from roomgate's own (127.0.0.1, daphne's peer).
    const c = new Client(`${gw.wsUrl}/ws/live/`, { localAddress: '127.0.0.2', headers: { Origin: gw.url, Cookie: roomCookie(page.headers.get('set-cookie')), 'X-Forwarded-For': '203.0.113.9' } });
    await c.opened;
    expect((await c.next('connect')).client).toBe('127.0.0.2');
    await c.close();
  });

  it('per-tab prefix: the page under /r/ROOM/ points its socket there; the app sees /ws/live/ and the room', async () => {
    const page = await get(`${gw.url}/r/dj-tab/game/dj-tab/`);
    expect(page.status).toBe(200);
    expect(page.text).toContain('<meta name="djust-ws-path" content="/r/dj-tab/ws/live/">');
    const { c, hello } = await socket(gw, '/r/dj-tab/ws/live/');
    expect(hello).toMatchObject({ room: 'dj-tab', backend: 'dj-a' });
    c.send({ type: 'mount', url: '/game/dj-tab/' });
    expect(await c.next('mounted')).toMatchObject({ room: 'dj-tab' });
    await c.close();
  });

  it('a socket without a room key goes to the least-loaded backend without X-Roomgate-Room, and its mount is refused (4400); so is a mount of another room', async () => {
    const keyless = await socket(gw, '/ws/live/');
    expect(keyless.hello).toMatchObject({ type: 'connect', room: null });
    keyless.c.send({ type: 'mount', url: '/game/dj-chess/' });
    expect((await keyless.c.next('error')).message).toMatch(/without a room key/);
    expect(await keyless.c.closed).toBe(4400);
    const other = await socket(gw, '/ws/live/?room=dj-one');
    other.c.send({ type: 'mount', url: '/game/dj-two/' });
    expect(await other.c.closed).toBe(4400);
  });

  it("the receiver checks roomgate's proof: forged, stale, replayed and re-purposed pushes get 403; an older epoch 409; no client reaches it through roomgate", async () => {
    expect(await forgedPushes(`${roomgateSigns.url}/_roomgate/push`, 'dj-a', 'dj-forged', 1)).toEqual(EXPECTED_RECEIVER_ANSWERS);
    expect((await stateOf(roomgateSigns, 'dj-forged')).inbox.map((m) => m.message)).toEqual([{ genuine: true }]);
    const signed = async (epoch: number, id: string): Promise<number> =>
      (await fetch(`${roomgateSigns.url}/_roomgate/push`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...signedPushHeaders('dj-a', 'dj-forged', epoch, id, '{}') }, body: '{}', signal: AbortSignal.timeout(5_000) })).status;
    expect(await signed(5, 'm-newer')).toBe(204); // a newer epoch is noted
    expect(await signed(4, 'm-older')).toBe(409); // an older one is for a copy that is gone
    const through = await fetch(`${gw.url}/_roomgate/push`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Roomgate-Room': 'dj-forged' }, body: '{}', signal: AbortSignal.timeout(5_000) });
    expect(through.status).toBe(404);
  });

  it('roomgate check-backend passes every check against the example: its receiver and its hooks, as a new user checks them', async () => {
    const r = await runCliHere(['check-backend', roomgateSigns.url, '--id', 'dj-a'], { ROOMGATE_BACKEND_KEYS: backendEnv('dj-a').ROOMGATE_BACKEND_KEYS as string });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('33 of 33 checks passed');
  });

  it("the ASGI health wrapper answers before Django (any Host), so roomgate's HTTP check passes without health.host", async () => {
    const direct = (path: string): Promise<number> =>
      new Promise((resolve, reject) => {
        // fetch cannot set Host: a raw request with the Host a health check of 10.0.0.5:8000 sends.
        const s = net.connect(roomgateSigns.port, '127.0.0.1', () => s.write(`GET ${path} HTTP/1.1\r\nHost: 10.0.0.5:8000\r\nConnection: close\r\n\r\n`));
        let text = '';
        s.on('data', (d: Buffer) => (text += d.toString('latin1')));
        s.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0)));
        s.on('error', reject);
      });
    expect(await direct('/healthz')).toBe(200);
    expect(await direct('/game/x/')).toBe(400); // Django: Host not in ALLOWED_HOSTS
    const backends = JSON.parse((await get(`http://127.0.0.1:${gw.adminPort}/backends`)).text) as { backends: { id: string; state: string }[] };
    expect(backends.backends.find((b) => b.id === 'dj-a')?.state).toBe('up');
  });

  it("static files: collectstatic's hashed output served by roomgate as immutable, never by Django", async () => {
    const page = await get(`${gw.url}/game/dj-static/`);
    const src = /<script src="(\/static\/rooms\/live\.[0-9a-f]{12}\.js)"/.exec(page.text)?.[1];
    expect(src, page.text).toBeDefined();
    const js = await get(`${gw.url}${src as string}`);
    expect(js.status).toBe(200);
    expect(js.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(js.text).toContain("ws.send(JSON.stringify({ type: 'mount'");
    // Django itself does not serve them (DEBUG = False): the answer came from roomgate.
    expect((await get(`${roomgateSigns.url}${src as string}`)).status).toBe(404);
  });

  it('Django signs the room cookie (set_signed_cookie, salt roomgate.room); roomgate verifies it and routes the socket by it', async () => {
    const page = await waitFor('the page through the second gateway', 10_000, async () => {
      const p = await get(`${gwDjango.url}/game/dj-signed/`);
      return p.status === 200 ? p : undefined;
    });
    const setCookies = page.headers.getSetCookie();
    // One cookie, Django's (roomgate sets none with setOnPages: false): room:timestamp:signature.
    expect(setCookies).toHaveLength(1);
    expect(setCookies[0]).toMatch(/^roomgate_room="?dj-signed:[A-Za-z0-9]+:[A-Za-z0-9_-]+"?;/);
    const { c, hello } = await socket(gwDjango, '/ws/live/', { Cookie: roomCookie(setCookies[0] as string) });
    expect(hello).toMatchObject({ backend: 'dj-b', room: 'dj-signed' });
    await c.close();
    // A cookie Django did not sign is no key at all.
    const forged = await socket(gwDjango, '/ws/live/', { Cookie: 'roomgate_room=dj-signed:1abcde:forgedsignature' });
    expect(forged.hello.room).toBeNull();
    await forged.c.close();
  });

  it('the page in headless Chromium: live in its room, and a push shows on it', async () => {
    const browser = await launchBrowser();
    const page = await browser.newPage();
    const errors = watchErrors(page);
    await page.goto(`${gw.url}/game/dj-browser/`);
    await expect.poll(() => page.locator('#status').textContent(), { timeout: 10_000 }).toBe('Live in room dj-browser on dj-a');
    expect(await push(gw, 'dj-browser', { text: 'hello, browser' })).toMatchObject({ status: 202, json: { sockets: 1 } });
    await expect.poll(() => page.locator('#pushed li').allTextContents(), { timeout: 5_000 }).toEqual(['job:test: hello, browser']);
    expect(errors).toEqual([]);
  });
});

