// The signed room cookie end to end. Every gateway here has room.noRoom: reject, so a cookie the
// gateway ignores shows up as a 400 on the socket, and a cookie it accepts as a socket on the
// room's ring owner (checked against `roomgate where`). Django values are made live by the real
// Django (/usr/bin/python3) as well as taken from test/fixtures/django-cookies.json. The gateways,
// demo backends and CLI runs are in the test's process (test/support/here.ts, test/cli/in-process.ts).
import { execFile } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliHere } from '../cli/in-process.js';
import { startBackendsHere, startGatewayHere, stopAllHere, type BackendHere, type GatewayHere } from '../support/here.js';
import { Client, ROOT, TEST_SECRET, backendRooms, metricValue, stopAll } from '../support/processes.js';

interface Fixture {
  secretKey: string;
  signer: { salt: string; room: string; value: string }[];
  cookie: { cookieName: string; salt: string; room: string; value: string; timestamp: number }[];
}
const FIXTURE = JSON.parse(readFileSync(`${ROOT}/test/fixtures/django-cookies.json`, 'utf8')) as Fixture;
const DJANGO_KEY = FIXTURE.secretKey;
const DJ_COOKIE = 'rg_room'; // the cookie name the fixture was made with

/** The default room.pattern. */
const VALID_ROOM = /^[A-Za-z0-9_.:-]{1,128}$/;

const OLD_SECRET = 'old-secret-0123456789abcdef';
const NEW_SECRET = 'new-secret-0123456789abcdef';
const WRONG_SECRET = 'wrong-secret-0123456789abcdef';

/** The roomgate format, as src/room/signing.ts makes it: `{room}.{ts36}.{hmac}`. */
function roomgateSign(room: string, tsS: number, secret: string, salt = ''): string {
  const payload = `${room}.${tsS.toString(36)}`;
  return `${payload}.${roomgateMac(payload, secret, salt)}`;
}
function roomgateMac(payload: string, secret: string, salt = ''): string {
  return createHmac('sha256', secret).update(`roomgate.v1|${salt}|${payload}`, 'utf8').digest('base64url');
}
/** Splits a roomgate value from the right, like the verifier. */
function parseRoomgate(value: string): { room: string; ts: number; payload: string; sig: string } {
  const m = /^(.+)\.([0-9a-z]+)\.([A-Za-z0-9_-]{43})$/.exec(value);
  if (!m) throw new Error(`not a roomgate cookie value: ${value}`);
  return { room: m[1]!, ts: parseInt(m[2]!, 36), payload: `${m[1]}.${m[2]}`, sig: m[3]! };
}

/** The value of cookie `name` in a Set-Cookie header, and the whole header. */
function setCookie(res: Response, name: string): { value: string; header: string } {
  const header = res.headers.get('set-cookie') ?? '';
  const m = new RegExp(`^${name}=([^;]*)`).exec(header);
  if (!m) throw new Error(`no ${name} cookie set; Set-Cookie: ${JSON.stringify(header)}`);
  return { value: m[1]!, header };
}

async function sign(room: string, secrets: string): Promise<string> {
  const r = await runCliHere(['sign', room], { ROOMGATE_COOKIE_SECRETS: secrets });
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim();
}

// ---- Django (the real one) ---------------------------------------------------------------------

const PYTHON = '/usr/bin/python3';
const DJANGO_SCRIPT = `
import json, sys
try:
    import django
    from django.conf import settings
except ImportError as e:
    print('DJANGO_MISSING: %s' % e, file=sys.stderr)
    sys.exit(3)
req = json.loads(sys.argv[1])
settings.configure(SECRET_KEY=req['secretKey'], DEFAULT_CHARSET='utf-8')
django.setup()
from django.core import signing
from django.http import HttpResponse
results = []
for op in req['ops']:
    out = {}
    if op['op'] == 'make':
        out['cookie'] = {}
        out['signer'] = {}
        for room in op['rooms']:
            response = HttpResponse()
            response.set_signed_cookie(op['cookieName'], room, salt=op['salt'])
            out['cookie'][room] = response.cookies[op['cookieName']].coded_value
            out['signer'][room] = signing.Signer(salt=op['salt']).sign(room)
    elif op['op'] == 'unsign-cookie':
        try:
            out['room'] = signing.get_cookie_signer(salt=op['cookieName'] + op['salt']).unsign(op['value'], max_age=op['maxAgeS'])
        except signing.BadSignature as e:
            out['error'] = type(e).__name__
    elif op['op'] == 'unsign-signer':
        try:
            out['room'] = signing.Signer(salt=op['salt']).unsign(op['value'])
        except signing.BadSignature as e:
            out['error'] = type(e).__name__
    results.append(out)
print(json.dumps(results))
`;

interface DjangoResult {
  cookie?: Record<string, string>;
  signer?: Record<string, string>;
  room?: string;
  error?: string;
}

/** Runs the ops in one Django process (starting Django costs ~0.5 s of CPU); one result per op. */
function django(ops: Record<string, unknown>[]): Promise<DjangoResult[]> {
  return new Promise((resolve, reject) => {
    execFile(PYTHON, ['-c', DJANGO_SCRIPT, JSON.stringify({ secretKey: DJANGO_KEY, ops })], { timeout: 20_000 }, (err, stdout, stderr) => {
      if (stderr.includes('DJANGO_MISSING') || (err as NodeJS.ErrnoException | null)?.code === 'ENOENT') {
        reject(new Error(`${PYTHON} cannot import django (${stderr.trim() || String(err)}): apt-get install -y python3-django`));
        return;
      }
      if (err) {
        reject(new Error(`django helper failed: ${String(err)}\n${stderr}`));
        return;
      }
      resolve(JSON.parse(stdout) as DjangoResult[]);
    });
  });
}

// ------------------------------------------------------------------------------------------------

describe('room cookies (room.noRoom: reject)', () => {
  let backends: BackendHere[];
  let backendArgs: string[];
  let gwMain: GatewayHere; // roomgate format, ROOMGATE_COOKIE_SECRETS="NEW,OLD" (mid-rotation), maxAgeS 86400
  let gwDjCookie: GatewayHere; // django-cookie, salt "roomgate", maxAgeS 3600
  let gwDjCookieNoAge: GatewayHere; // django-cookie, salt "", maxAgeS 0, verify only (setOnPages false)
  let gwDjSigner: GatewayHere; // django-signer, salt "roomgate"
  let gwPlain: GatewayHere; // cookie.signed: false
  const owners = new Map<string, string>();

  const SIGNED_ROOMS = ['cookie-a', 'room:42', 'chat.general', 'a.b:c.d'];
  const DJ_ROOMS = ['dj-lobby', 'room:42', 'chat.general'];
  const FIXTURE_ROOMS = [...new Set(FIXTURE.cookie.map((c) => c.room))].filter((r) => VALID_ROOM.test(r));

  // The runs that need no gateway start right away, next to the gateways (a Django run is a child
  // process, ~0.5 s of CPU). Awaited where used, so a failure lands on those tests only.
  let cliSigned: Promise<{ a: string; abcd: string; rotOld: string }>;
  let djangoMade: Promise<DjangoResult>;

  const reject = { noRoom: 'reject' };
  beforeAll(async () => {
    cliSigned = Promise.all([sign('cookie-a', NEW_SECRET), sign('a.b:c.d', NEW_SECRET), sign('rot-room', OLD_SECRET)]).then(
      ([a, abcd, rotOld]) => ({ a, abcd, rotOld }),
    );
    // Made now by Django: set_signed_cookie(DJ_COOKIE, room, salt="roomgate") and Signer(salt="roomgate").sign(room).
    djangoMade = django([{ op: 'make', rooms: DJ_ROOMS, cookieName: DJ_COOKIE, salt: 'roomgate' }]).then((r) => r[0]!);
    cliSigned.catch(() => undefined);
    djangoMade.catch(() => undefined);
    backends = await startBackendsHere(['c1', 'c2', 'c3']);
    backendArgs = backends.flatMap((b) => ['--backend', `${b.id}=${b.url}`]);
    const djEnv = { ROOMGATE_COOKIE_SECRETS: DJANGO_KEY };
    [gwMain, gwDjCookie, gwDjCookieNoAge, gwDjSigner, gwPlain] = await Promise.all([
      startGatewayHere({ backends, config: { room: reject }, env: { ROOMGATE_COOKIE_SECRETS: `${NEW_SECRET},${OLD_SECRET}` } }),
      startGatewayHere({ backends, env: djEnv, config: { room: reject, cookie: { format: 'django-cookie', name: DJ_COOKIE, salt: 'roomgate', maxAgeS: 3600 } } }),
      startGatewayHere({ backends, env: djEnv, config: { room: reject, cookie: { format: 'django-cookie', name: DJ_COOKIE, salt: '', maxAgeS: 0, setOnPages: false } } }),
      startGatewayHere({ backends, env: djEnv, config: { room: reject, cookie: { format: 'django-signer', name: DJ_COOKIE, salt: 'roomgate' } } }),
      startGatewayHere({ backends, config: { room: reject, cookie: { signed: false } } }),
      // Every room used below, in one `roomgate where` run.
      ownerOf(...SIGNED_ROOMS, ...DJ_ROOMS, ...FIXTURE_ROOMS, 'cookie-old', 'rot-room', 'rot-page', 'plain-room', 'plain-page'),
    ]);
  });
  afterAll(async () => {
    await stopAll();
    await stopAllHere();
  });

  /** Ring owner of each room per `roomgate where` (the same backends as the gateways), cached. */
  async function ownerOf(...rooms: string[]): Promise<string[]> {
    const missing = [...new Set(rooms.filter((r) => !owners.has(r)))];
    if (missing.length > 0) {
      const r = await runCliHere(['where', ...missing, '--json', ...backendArgs]);
      expect(r.code, r.stderr + r.stdout).toBe(0);
      for (const row of JSON.parse(r.stdout) as { room: string; backend: string }[]) owners.set(row.room, row.backend);
    }
    return rooms.map((r) => owners.get(r)!);
  }

  /** A socket whose only room key is the cookie; resolves with the backend that mounted `room`. */
  async function socketWithCookie(gw: GatewayHere, cookie: string, room: string): Promise<string> {
    const c = new Client(`${gw.wsUrl}/ws/live/`, { headers: { Cookie: cookie } });
    try {
      return await c.join(room);
    } finally {
      await c.close();
    }
  }

  async function expectRefused(gw: GatewayHere, cookie: string): Promise<void> {
    const c = new Client(`${gw.wsUrl}/ws/live/`, { headers: { Cookie: cookie } });
    await expect(c.opened, cookie).rejects.toThrow(/unexpected response 400/);
    c.ws.terminate();
  }

  async function page(gw: GatewayHere, path: string, headers: Record<string, string> = {}): Promise<Response> {
    const res = await fetch(`${gw.url}${path}`, { headers, signal: AbortSignal.timeout(5_000) });
    await res.arrayBuffer();
    expect(res.status, path).toBe(200);
    return res;
  }

  const badKeys = (gw: GatewayHere, reason: string): Promise<number> =>
    metricValue(gw, 'roomgate_bad_room_keys_total', { source: 'cookie', reason });

  describe('roomgate format', () => {
    it('a socket without any room key is refused (the gateway really rejects)', async () => {
      await expectRefused(gwMain, 'unrelated=1');
    });

    it("a cookie from `roomgate sign ROOM` routes the socket to ROOM's backend", async () => {
      const expected = await ownerOf(...SIGNED_ROOMS);
      expect(new Set(expected).size).toBeGreaterThan(1); // the rooms are spread, so routing is visible
      // Two rooms (on different backends) signed by the CLI; the others by hand, with the MAC
      // shown here to be the CLI's.
      const { a: cliA, abcd: cliB } = await cliSigned;
      expect(owners.get('cookie-a')).not.toBe(owners.get('a.b:c.d'));
      const now = Math.floor(Date.now() / 1000);
      const values = SIGNED_ROOMS.map((room) =>
        room === 'cookie-a' ? cliA : room === 'a.b:c.d' ? cliB : roomgateSign(room, now, NEW_SECRET),
      );
      const clients: Client[] = [];
      for (const [i, room] of SIGNED_ROOMS.entries()) {
        const v = parseRoomgate(values[i]!);
        expect(v.room).toBe(room);
        expect(roomgateMac(v.payload, NEW_SECRET)).toBe(v.sig);
        // Other cookies around it do not matter.
        const c = new Client(`${gwMain.wsUrl}/ws/live/`, { headers: { Cookie: `csrftoken=abc; roomgate_room=${values[i]}; sessionid=xyz` } });
        clients.push(c);
        expect(await c.join(room), room).toBe(expected[i]);
      }
      const held = await backendRooms(backends);
      for (const [i, room] of SIGNED_ROOMS.entries()) expect(held.get(expected[i]!)?.[room], room).toBe(1);
      await Promise.all(clients.map((c) => c.close()));

      // A page request with only the cookie goes to the same backend and gets no new cookie.
      const res = await page(gwMain, '/_backend/echo', { Cookie: `roomgate_room=${values[0]}` });
      expect(res.headers.get('x-backend-id')).toBe(expected[0]);
      expect(res.headers.get('set-cookie')).toBeNull();
    });

    it('forged, tampered and wrong-secret cookies are refused and counted as bad-signature', async () => {
      const now = Math.floor(Date.now() / 1000);
      const good = roomgateSign('cookie-a', now, NEW_SECRET);
      const { ts, sig } = parseRoomgate(good);
      const forged = good.slice(0, -1) + (good.endsWith('A') ? 'B' : 'A');
      const tampered = `cookie-b.${ts.toString(36)}.${sig}`;
      const wrongSecret = roomgateSign('cookie-a', now, WRONG_SECRET);
      const wrongSalt = roomgateSign('cookie-a', now, NEW_SECRET, 'other-salt');
      const shortSig = good.slice(0, -1);
      // A validly signed timestamp an hour ahead of the gateway's clock is refused too.
      const future = roomgateSign('cookie-a', now + 3600, NEW_SECRET);
      const bad = [forged, tampered, wrongSecret, wrongSalt, shortSig, future];
      const before = await badKeys(gwMain, 'bad-signature');
      for (const v of bad) await expectRefused(gwMain, `roomgate_room=${v}`);
      expect(await badKeys(gwMain, 'bad-signature')).toBe(before + bad.length);
      // The same value unaltered works (the refusals were about the changes).
      expect(await socketWithCookie(gwMain, `roomgate_room=${good}`, 'cookie-a')).toBe(owners.get('cookie-a'));
    });

    it('an expired cookie is refused and counted as expired; one just inside maxAgeS is accepted', async () => {
      const now = Math.floor(Date.now() / 1000);
      const maxAgeS = 86_400; // the default
      const expired = roomgateSign('cookie-old', now - maxAgeS - 120, NEW_SECRET);
      const fresh = roomgateSign('cookie-old', now - maxAgeS + 120, NEW_SECRET);
      const before = await badKeys(gwMain, 'expired');
      const beforeSig = await badKeys(gwMain, 'bad-signature');
      await expectRefused(gwMain, `roomgate_room=${expired}`);
      expect(await badKeys(gwMain, 'expired')).toBe(before + 1);
      expect(await badKeys(gwMain, 'bad-signature')).toBe(beforeSig); // it was the age, not the MAC
      // The same construction a few minutes younger routes.
      expect(await socketWithCookie(gwMain, `roomgate_room=${fresh}`, 'cookie-old')).toBe(owners.get('cookie-old'));
    });

    it('garbage cookies are refused and counted as malformed', async () => {
      const before = await badKeys(gwMain, 'malformed');
      const garbage = ['nonsense', 'cookie-a.', '.x.y', 'cookie-a.ZZZ!.sig', 'x'.repeat(5000)];
      for (const v of garbage) await expectRefused(gwMain, `roomgate_room=${v}`);
      expect(await badKeys(gwMain, 'malformed')).toBe(before + garbage.length);
    });
  });

  describe('secret rotation (ROOMGATE_COOKIE_SECRETS="new,old")', () => {
    it('accepts a cookie signed with the old secret (and the new one), not with another', async () => {
      const owner = owners.get('rot-room');
      const { rotOld } = await cliSigned; // `roomgate sign rot-room` with ROOMGATE_COOKIE_SECRETS=OLD
      expect(parseRoomgate(rotOld).sig).toBe(roomgateMac(parseRoomgate(rotOld).payload, OLD_SECRET));
      const now = Math.floor(Date.now() / 1000);
      expect(await socketWithCookie(gwMain, `roomgate_room=${rotOld}`, 'rot-room')).toBe(owner);
      expect(await socketWithCookie(gwMain, `roomgate_room=${roomgateSign('rot-room', now, NEW_SECRET)}`, 'rot-room')).toBe(owner);
      const before = await badKeys(gwMain, 'bad-signature');
      await expectRefused(gwMain, `roomgate_room=${roomgateSign('rot-room', now, WRONG_SECRET)}`);
      // TEST_SECRET (the harness default secret) is not one of them either.
      await expectRefused(gwMain, `roomgate_room=${roomgateSign('rot-room', now, TEST_SECRET)}`);
      expect(await badKeys(gwMain, 'bad-signature')).toBe(before + 2);
    });

    it('signs the cookies it sets on pages with the new secret only', async () => {
      // What `roomgate sign` makes with NEW is the hand-made MAC with NEW.
      const cli = parseRoomgate((await cliSigned).a);
      expect(roomgateMac(cli.payload, NEW_SECRET)).toBe(cli.sig);

      const res = await page(gwMain, '/game/rot-page/');
      const { value, header } = setCookie(res, 'roomgate_room');
      expect(header).toBe(`roomgate_room=${value}; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax`);
      const v = parseRoomgate(value);
      expect(v.room).toBe('rot-page');
      expect(Math.abs(v.ts - Date.now() / 1000)).toBeLessThan(30);
      expect(v.sig).toBe(roomgateMac(v.payload, NEW_SECRET));
      expect(v.sig).not.toBe(roomgateMac(v.payload, OLD_SECRET));
      // The cookie it set brings the socket back to the page's backend.
      expect(res.headers.get('x-backend-id')).toBe(owners.get('rot-page'));
      expect(await socketWithCookie(gwMain, `roomgate_room=${value}`, 'rot-page')).toBe(owners.get('rot-page'));
    });
  });

  describe('Django formats (real Django via /usr/bin/python3)', () => {
    // Fails (never skips) when Django is missing.
    let made: DjangoResult;
    beforeAll(async () => {
      made = await djangoMade;
    });

    it('django-cookie: values made now by set_signed_cookie route; the 2023 fixture is expired under maxAgeS 3600', async () => {
      for (const room of DJ_ROOMS) {
        const value = made.cookie![room]!;
        expect(value.startsWith(`${room}:`), value).toBe(true);
        expect(await socketWithCookie(gwDjCookie, `${DJ_COOKIE}=${value}`, room), room).toBe(owners.get(room));
      }
      const old = FIXTURE.cookie.filter((c) => c.salt === 'roomgate' && VALID_ROOM.test(c.room));
      expect(old.length).toBeGreaterThan(0);
      const before = await badKeys(gwDjCookie, 'expired');
      for (const c of old) await expectRefused(gwDjCookie, `${DJ_COOKIE}=${c.value}`);
      expect(await badKeys(gwDjCookie, 'expired')).toBe(before + old.length);
      // A roomgate-format value, or a Django value under another cookie name, does not route.
      await expectRefused(gwDjCookie, `${DJ_COOKIE}=${roomgateSign('dj-lobby', Math.floor(Date.now() / 1000), DJANGO_KEY)}`);
      await expectRefused(gwDjCookie, `roomgate_room=${made.cookie!['dj-lobby']}`);
    });

    it('django-cookie with maxAgeS 0: the fixture values (salt "") route by their room', async () => {
      const cases = FIXTURE.cookie.filter((c) => c.salt === '' && c.cookieName === DJ_COOKIE);
      const valid = cases.filter((c) => VALID_ROOM.test(c.room));
      expect(valid.length).toBeGreaterThan(3);
      for (const c of valid) {
        expect(await socketWithCookie(gwDjCookieNoAge, `${DJ_COOKIE}=${c.value}`, c.room), c.room).toBe(owners.get(c.room));
      }
      // A correctly signed room the room pattern does not allow ("~") is still not a room key.
      const beforeInvalid = await badKeys(gwDjCookieNoAge, 'invalid');
      for (const c of cases.filter((x) => !VALID_ROOM.test(x.room))) await expectRefused(gwDjCookieNoAge, `${DJ_COOKIE}=${c.value}`);
      expect(await badKeys(gwDjCookieNoAge, 'invalid')).toBe(beforeInvalid + cases.length - valid.length);
      // A salt "roomgate" value is signed differently: refused here.
      const other = FIXTURE.cookie.find((c) => c.salt === 'roomgate')!;
      const beforeSig = await badKeys(gwDjCookieNoAge, 'bad-signature');
      await expectRefused(gwDjCookieNoAge, `${DJ_COOKIE}=${other.value}`);
      expect(await badKeys(gwDjCookieNoAge, 'bad-signature')).toBe(beforeSig + 1);
    });

    it("django-signer: values made now by Signer(salt).sign(room) route; others' are refused", async () => {
      for (const room of DJ_ROOMS) {
        const value = made.signer![room]!;
        // Signer values carry no timestamp: the same as the fixture's where the room is the same.
        const fx = FIXTURE.signer.find((s) => s.salt === 'roomgate' && s.room === room);
        if (fx) expect(value).toBe(fx.value);
        expect(await socketWithCookie(gwDjSigner, `${DJ_COOKIE}=${value}`, room), room).toBe(owners.get(room));
      }
      const before = await badKeys(gwDjSigner, 'bad-signature');
      const unsalted = FIXTURE.signer.find((s) => s.salt === '' && s.room === 'room:42')!;
      await expectRefused(gwDjSigner, `${DJ_COOKIE}=${unsalted.value}`); // salt "" is not "roomgate"
      await expectRefused(gwDjSigner, `${DJ_COOKIE}=${made.signer!['dj-lobby']!.replace('dj-lobby', 'dj-lobbz')}`);
      await expectRefused(gwDjSigner, `${DJ_COOKIE}=${made.cookie!['dj-lobby']}`); // a TimestampSigner value
      expect(await badKeys(gwDjSigner, 'bad-signature')).toBe(before + 3);
    });

    it('the cookies roomgate sets on pages (both Django formats) are ones Django accepts', async () => {
      const cookieRes = await page(gwDjCookie, '/game/dj-page/');
      const signerRes = await page(gwDjSigner, '/game/dj-signed-page/');
      const c = setCookie(cookieRes, DJ_COOKIE);
      const s = setCookie(signerRes, DJ_COOKIE);
      expect(c.header).toContain('Max-Age=3600');
      const results = await django([
        { op: 'unsign-cookie', value: c.value, cookieName: DJ_COOKIE, salt: 'roomgate', maxAgeS: 3600 },
        { op: 'unsign-cookie', value: c.value, cookieName: DJ_COOKIE, salt: 'other', maxAgeS: 3600 },
        { op: 'unsign-signer', value: s.value, salt: 'roomgate' },
        { op: 'unsign-signer', value: s.value, salt: 'other' },
      ]);
      expect(results).toEqual([{ room: 'dj-page' }, { error: 'BadSignature' }, { room: 'dj-signed-page' }, { error: 'BadSignature' }]);
    });
  });

  describe('cookie.signed: false', () => {
    it('a plain roomgate_room=ROOM cookie routes, and pages set the plain room', async () => {
      expect(await socketWithCookie(gwPlain, 'roomgate_room=plain-room', 'plain-room')).toBe(owners.get('plain-room'));
      const res = await page(gwPlain, '/game/plain-page/');
      expect(res.headers.get('x-backend-id')).toBe(owners.get('plain-page'));
      expect(setCookie(res, 'roomgate_room').header).toBe('roomgate_room=plain-page; Path=/; Max-Age=86400; HttpOnly; SameSite=Lax');
    });

    it('a plain cookie that is not a valid room key is refused and counted as invalid', async () => {
      const before = await badKeys(gwPlain, 'invalid');
      await expectRefused(gwPlain, 'roomgate_room=a%20b');
      await expectRefused(gwPlain, `roomgate_room=${'y'.repeat(200)}`);
      expect(await badKeys(gwPlain, 'invalid')).toBe(before + 2);
    });
  });
});
