import { describe, it, expect } from 'vitest';
import { execFile } from 'node:child_process';
import { createHmac, randomBytes, randomInt } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRoomSigner } from '../../src/room/signing.js';
import type { CookieFormat, SigningOptions, VerifyResult } from '../../src/room/signing.js';

const T0 = Date.UTC(2025, 0, 1); // fixed "now" for deterministic tests
const FORMATS: CookieFormat[] = ['roomgate', 'django-signer', 'django-cookie'];
const TIMESTAMPED: CookieFormat[] = ['roomgate', 'django-cookie'];

function signer(over: Partial<SigningOptions> = {}) {
  return createRoomSigner({
    secrets: ['s3cret-current'],
    format: 'roomgate',
    cookieName: 'rg_room',
    salt: 'test-salt',
    maxAgeS: 3600,
    ...over,
  });
}

/** Replace the last char with a different one from the same alphabet. */
function flipLast(s: string): string {
  return s.slice(0, -1) + (s.endsWith('A') ? 'B' : 'A');
}

describe('createRoomSigner', () => {
  it('rejects an empty secret list or an empty secret', () => {
    expect(() => signer({ secrets: [] })).toThrow(/non-empty/);
    expect(() => signer({ secrets: ['ok', ''] })).toThrow(/empty string/);
  });

  it('refuses to sign an empty room or with a nonsense clock', () => {
    for (const format of FORMATS) {
      expect(() => signer({ format }).sign('', T0)).toThrow(/room/);
      expect(() => signer({ format }).sign('lobby', Number.NaN)).toThrow(/nowMs/);
    }
  });
});

describe.each(FORMATS)('%s format', (format) => {
  const s = signer({ format });

  it('round-trips rooms, including ones with "." and ":"', () => {
    for (const room of ['lobby', 'room:42', 'chat.general', 'a.b:c.d:e', ':', '.', '::..', 'x']) {
      expect(s.verify(s.sign(room, T0), T0 + 1000)).toEqual({ ok: true, room });
    }
  });

  it('accepts values signed with an old secret during rotation, and only then', () => {
    const old = signer({ format, secrets: ['old-secret'] }).sign('lobby', T0);
    expect(signer({ format, secrets: ['new-secret', 'old-secret'] }).verify(old, T0)).toEqual({ ok: true, room: 'lobby' });
    expect(signer({ format, secrets: ['new-secret'] }).verify(old, T0)).toEqual({ ok: false, reason: 'bad-signature' });
    // ...and the rotated signer signs with the new one.
    const fresh = signer({ format, secrets: ['new-secret', 'old-secret'] }).sign('lobby', T0);
    expect(signer({ format, secrets: ['new-secret'] }).verify(fresh, T0).ok).toBe(true);
  });

  it('rejects forged and tampered values', () => {
    const v = s.sign('lobby', T0);
    const bad = { ok: false, reason: 'bad-signature' };
    expect(s.verify(flipLast(v), T0)).toEqual(bad);
    expect(s.verify(v.slice(0, -1), T0)).toEqual(bad); // short signature
    expect(s.verify(v + 'A', T0)).toEqual(bad); // long signature
    expect(s.verify(v.replace('lobby', 'lobbz'), T0)).toEqual(bad); // tampered room
    expect(s.verify('admin' + v.slice('lobby'.length), T0)).toEqual(bad);
    expect(signer({ format, secrets: ['other'] }).verify(v, T0)).toEqual(bad); // wrong secret
    expect(signer({ format, salt: 'other-salt' }).verify(v, T0)).toEqual(bad); // wrong salt
  });

  it('rejects values of the other formats', () => {
    for (const other of FORMATS.filter((f) => f !== format)) {
      const v = signer({ format: other }).sign('lobby', T0);
      expect(s.verify(v, T0).ok).toBe(false);
    }
  });

  it('never throws on garbage, and calls it malformed or bad-signature', () => {
    const garbage: unknown[] = [
      '', '.', ':', '..', '::', ':::', 'lobby', '__proto__', 'constructor', '__proto__.1.x', '__proto__:x',
      'x'.repeat(10_240), 'ünïcödé.kx1.sig', 'ünï:cödé:sig', '☃:☃', '\u0000.\u0000.\u0000', '\ud800:\ud800',
      'lobby.!!.sig', 'lobby.KX1.sig', 'lobby:-1:sig', 'lobby:ä:sig', 'lobby:1.5:sig', 'lobby..sig', 'lobby::sig',
      '.kx1.sig', ':1:sig', 'a:'.repeat(2000), 'a.'.repeat(2000),
    ];
    for (const g of garbage) {
      const r = s.verify(g as string, T0);
      expect(r.ok, JSON.stringify(g).slice(0, 40)).toBe(false);
      expect(['malformed', 'bad-signature']).toContain((r as { reason: string }).reason);
    }
    for (const g of [undefined, null, 42, {}, ['a']]) {
      expect(s.verify(g as unknown as string, T0)).toEqual({ ok: false, reason: 'malformed' });
    }
  });

  it('rejects values over 4096 chars as malformed, even when validly signed', () => {
    const long = s.sign('r'.repeat(4090), T0);
    expect(long.length).toBeGreaterThan(4096);
    expect(s.verify(long, T0)).toEqual({ ok: false, reason: 'malformed' });
    const fits = s.sign('r'.repeat(4000), T0);
    expect(fits.length).toBeLessThanOrEqual(4096);
    expect(s.verify(fits, T0).ok).toBe(true);
  });
});

describe.each(TIMESTAMPED)('%s expiry', (format) => {
  it('expires after maxAgeS (age == maxAgeS is still valid, like Django)', () => {
    const s = signer({ format, maxAgeS: 60 });
    const v = s.sign('lobby', T0);
    expect(s.verify(v, T0 + 60_000)).toEqual({ ok: true, room: 'lobby' });
    expect(s.verify(v, T0 + 60_500)).toEqual({ ok: false, reason: 'expired' });
    expect(s.verify(v, T0 + 86_400_000)).toEqual({ ok: false, reason: 'expired' });
  });

  it('never expires with maxAgeS 0', () => {
    const s = signer({ format, maxAgeS: 0 });
    expect(s.verify(s.sign('lobby', T0), T0 + 10 * 365 * 86_400_000)).toEqual({ ok: true, room: 'lobby' });
  });

  it('reports a tampered old value as bad-signature, not expired', () => {
    const s = signer({ format, maxAgeS: 60 });
    expect(s.verify(flipLast(s.sign('lobby', T0)), T0 + 3_600_000)).toEqual({ ok: false, reason: 'bad-signature' });
  });

  it('rejects a tampered timestamp', () => {
    const s = signer({ format });
    const v = s.sign('lobby', T0);
    const parts = v.split(format === 'roomgate' ? '.' : ':');
    parts[1] = parts[1]!.slice(0, -1) + (parts[1]!.endsWith('1') ? '2' : '1');
    expect(s.verify(parts.join(format === 'roomgate' ? '.' : ':'), T0)).toEqual({ ok: false, reason: 'bad-signature' });
  });
});

describe('roomgate format details', () => {
  it('is {room}.{base36 seconds}.{base64url HMAC-SHA256 of "roomgate.v1|salt|room.ts"}', () => {
    const v = signer({ secrets: ['k'], salt: 'NaCl' }).sign('a.b:c', T0);
    const ts = Math.floor(T0 / 1000).toString(36);
    const sig = createHmac('sha256', 'k').update(`roomgate.v1|NaCl|a.b:c.${ts}`).digest('base64url');
    expect(v).toBe(`a.b:c.${ts}.${sig}`);
    expect(sig).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('accepts up to 60 s of clock skew into the future, and rejects more as bad-signature', () => {
    const s = signer({ maxAgeS: 0 });
    expect(s.verify(s.sign('lobby', T0 + 60_000), T0)).toEqual({ ok: true, room: 'lobby' });
    expect(s.verify(s.sign('lobby', T0 + 61_000), T0)).toEqual({ ok: false, reason: 'bad-signature' });
    expect(signer().verify(signer().sign('lobby', T0 + 3_600_000), T0)).toEqual({ ok: false, reason: 'bad-signature' });
  });
});

describe('django-cookie format details', () => {
  it('accepts future timestamps, as Django does (no skew check)', () => {
    const s = signer({ format: 'django-cookie' });
    expect(s.verify(s.sign('lobby', T0 + 3_600_000), T0)).toEqual({ ok: true, room: 'lobby' });
  });
});

// ---------------------------------------------------------------------------------------------
// Fixtures produced by the real Django: scripts/make-django-fixtures.py

interface Fixture {
  django: string;
  secretKey: string;
  signer: { salt: string; room: string; value: string }[];
  cookie: {
    cookieName: string;
    salt: string;
    room: string;
    value: string;
    timestamp: number;
    checks: { nowMs: number; maxAgeS: number; expect: VerifyResult }[];
  }[];
}
const fixture = JSON.parse(
  readFileSync(new URL('../fixtures/django-cookies.json', import.meta.url), 'utf8'),
) as Fixture;

describe(`Django ${fixture.django} fixtures`, () => {
  const base = { secrets: [fixture.secretKey], maxAgeS: 0 };

  it('covers rooms with ":" and ".", both salts, and both expiry outcomes', () => {
    const rooms = fixture.cookie.map((c) => c.room);
    expect(rooms.some((r) => r.includes(':'))).toBe(true);
    expect(rooms.some((r) => r.includes('.'))).toBe(true);
    expect(new Set(fixture.signer.map((c) => c.salt))).toEqual(new Set(['', 'roomgate']));
    const reasons = fixture.cookie.flatMap((c) => c.checks.map((k) => (k.expect.ok ? 'ok' : k.expect.reason)));
    expect(new Set(reasons)).toEqual(new Set(['ok', 'expired']));
  });

  it.each(fixture.signer)('Signer(salt=$salt): $room', ({ salt, room, value }) => {
    const s = createRoomSigner({ ...base, format: 'django-signer', cookieName: 'unused', salt });
    expect(s.sign(room, T0)).toBe(value);
    expect(s.verify(value, T0)).toEqual({ ok: true, room });
    expect(s.verify(flipLast(value), T0)).toEqual({ ok: false, reason: 'bad-signature' });
    const rotated = createRoomSigner({ ...base, secrets: ['newer', fixture.secretKey], format: 'django-signer', cookieName: 'x', salt });
    expect(rotated.verify(value, T0)).toEqual({ ok: true, room });
  });

  it.each(fixture.cookie)('set_signed_cookie($cookieName, salt=$salt): $room', (c) => {
    const opts = { ...base, format: 'django-cookie' as const, cookieName: c.cookieName, salt: c.salt };
    expect(createRoomSigner(opts).sign(c.room, c.timestamp * 1000)).toBe(c.value);
    // Same verdict as Django's get_signed_cookie(max_age=...) at each recorded clock.
    for (const check of c.checks) {
      expect(createRoomSigner({ ...opts, maxAgeS: check.maxAgeS }).verify(c.value, check.nowMs), `now=${check.nowMs}`).toEqual(
        check.expect,
      );
    }
    // The cookie name is part of the salt: the same value under another name does not verify.
    expect(createRoomSigner({ ...opts, cookieName: 'other' }).verify(c.value, c.timestamp * 1000)).toEqual({
      ok: false,
      reason: 'bad-signature',
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Live cross-check against the installed Django. Deliberately never skipped: if Django is missing
// this must fail loudly, or the compatibility claim silently stops being tested.

const PYTHON = '/usr/bin/python3';
const INSTALL_HINT = `${PYTHON} cannot import django; install it with: apt-get install -y python3-django`;
const LIVE_SCRIPT = String.raw`
import json, sys
try:
    import django
    from django.conf import settings
except ImportError:
    print('NO_DJANGO')
    sys.exit(3)
inp = json.loads(sys.argv[1])
settings.configure(SECRET_KEY=inp['secret'], DEFAULT_CHARSET='utf-8')
django.setup()
from django.core import signing
from django.http import HttpResponse

name, salt, max_age = inp['cookieName'], inp['salt'], inp['maxAgeS']

def attempt(f):
    try:
        return {'ok': True, 'room': f()}
    except signing.SignatureExpired:
        return {'ok': False, 'reason': 'expired'}
    except signing.BadSignature:
        return {'ok': False, 'reason': 'bad-signature'}

def set_signed_cookie(room):
    response = HttpResponse()
    response.set_signed_cookie(name, room, salt=salt)
    return response.cookies[name].value

print(json.dumps({
    'signerVerdicts': [attempt(lambda v=v: signing.Signer(salt=salt).unsign(v)) for v in inp['signerValues']],
    'cookieVerdicts': [attempt(lambda v=v: signing.get_cookie_signer(salt=name + salt).unsign(v, max_age=max_age))
                       for v in inp['cookieValues']],
    'signerValues': [signing.Signer(salt=salt).sign(r) for r in inp['rooms']],
    'cookieValues': [set_signed_cookie(r) for r in inp['rooms']],
}))
`;

interface LiveOutput {
  signerVerdicts: VerifyResult[];
  cookieVerdicts: VerifyResult[];
  signerValues: string[];
  cookieValues: string[];
}

function runDjango(input: unknown): Promise<LiveOutput> {
  return new Promise((resolve, reject) => {
    execFile(PYTHON, ['-c', LIVE_SCRIPT, JSON.stringify(input)], { timeout: 20_000 }, (err, stdout, stderr) => {
      if (stdout.includes('NO_DJANGO') || (err as NodeJS.ErrnoException | null)?.code === 'ENOENT') {
        reject(new Error(INSTALL_HINT));
      } else if (err) {
        reject(new Error(`${PYTHON} failed: ${err.message}\n${stderr}`));
      } else {
        resolve(JSON.parse(stdout) as LiveOutput);
      }
    });
  });
}

/** Random cookie-safe room keys (chars SimpleCookie leaves unquoted), always with ':' and '.'. */
function randomRooms(n: number): string[] {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._:~';
  const rooms = ['room:42', 'chat.general', 'a.b:c.d:e'];
  while (rooms.length < n) {
    const len = randomInt(1, 40);
    rooms.push([...randomBytes(len)].map((b) => alphabet[b % alphabet.length]).join(''));
  }
  return rooms;
}

describe('live cross-check with Django', () => {
  it('roomgate-signed values verify in Django and Django-signed values verify in roomgate', async () => {
    // Non-ASCII secret: both sides must UTF-8 encode it the same way.
    const secret = `live-sécret-☃-${randomBytes(8).toString('hex')}`;
    const common = { secrets: [secret], cookieName: 'rg_room', salt: 'live-salt', maxAgeS: 300 };
    const djSigner = createRoomSigner({ ...common, format: 'django-signer' });
    const djCookie = createRoomSigner({ ...common, format: 'django-cookie' });
    const rooms = randomRooms(12);
    const now = Date.now();

    const signerValues = [...rooms, 'café'].map((r) => djSigner.sign(r, now));
    const cookieValues = rooms.map((r) => djCookie.sign(r, now));
    // Controls, so a Django that accepted anything would be caught: tampered and expired values.
    signerValues.push(flipLast(djSigner.sign('lobby', now)));
    cookieValues.push(flipLast(djCookie.sign('lobby', now)), djCookie.sign('lobby', now - 3_600_000));

    let out: LiveOutput;
    try {
      out = await runDjango({ ...common, secret, rooms, signerValues, cookieValues });
    } catch (e) {
      expect.fail((e as Error).message);
    }

    expect(out.signerVerdicts).toEqual([
      ...[...rooms, 'café'].map((room) => ({ ok: true, room })),
      { ok: false, reason: 'bad-signature' },
    ]);
    expect(out.cookieVerdicts).toEqual([
      ...rooms.map((room) => ({ ok: true, room })),
      { ok: false, reason: 'bad-signature' },
      { ok: false, reason: 'expired' },
    ]);

    const later = Date.now();
    expect(out.signerValues).toHaveLength(rooms.length);
    expect(out.cookieValues).toHaveLength(rooms.length);
    rooms.forEach((room, i) => {
      expect(djSigner.sign(room, later)).toBe(out.signerValues[i]); // Signer has no timestamp: identical
      expect(djSigner.verify(out.signerValues[i]!, later)).toEqual({ ok: true, room });
      expect(djCookie.verify(out.cookieValues[i]!, later)).toEqual({ ok: true, room });
    });
  });
});
