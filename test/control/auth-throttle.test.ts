// Failed token attempts per client address (issue 26 item 8): the throttle alone with a clock in
// the test's hand (window, Retry-After, only wrong tokens count, the table's bound), then every
// surface that takes a token through the control plane's apps (inject(), each request from the
// address the test gives): admin writes, API writes, pushes and the token-protected status page,
// all sharing one table; 429 with Retry-After and the token unread, counted; other addresses and
// reads unaffected.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenCheck } from '../../src/http/auth.js';
import { AuthThrottle, throttledVerdict } from '../../src/http/auth-throttle.js';
import type { ControlPlane } from '../../src/control/control-plane.js';
import { MemorySharedDataStore } from '../../src/shared-data/memory-store.js';
import { makeControl } from '../support/control.js';

describe('AuthThrottle', () => {
  let t = 1_000_000;
  const now = (): number => t;

  it('after maxFailures wrong tokens in the window: 429 with the seconds left, the token unread; the window ends; missing tokens do not count', () => {
    const throttled: string[] = [];
    const throttle = new AuthThrottle({ maxFailures: 3, windowMs: 60_000, maxAddresses: 100, now, onThrottled: (s) => throttled.push(s) });
    const tokens = new TokenCheck(['right-token-0123456789']);
    const verdict = (auth: string | undefined, address = '10.0.0.1') => throttledVerdict(tokens, throttle, 'api', auth, address);
    for (let i = 0; i < 5; i++) expect(verdict(undefined)).toBe('missing');
    expect(verdict('Bearer wrong-1')).toBe('wrong');
    t += 10_000;
    expect(verdict('Bearer wrong-2')).toBe('wrong');
    expect(verdict('Bearer wrong-3')).toBe('wrong');
    t += 5_000; // 15 s into the window: 45 s left
    const refused = verdict('Bearer right-token-0123456789');
    expect(typeof refused).toBe('object');
    expect(refused).toMatchObject({ status: 429, code: 'too_many_requests', headers: { 'Retry-After': '45' } });
    expect(throttled).toEqual(['api']);
    // Another address is not affected.
    expect(verdict('Bearer right-token-0123456789', '10.0.0.2')).toBe('ok');
    // The window ends: the right token passes again.
    t += 45_000;
    expect(verdict('Bearer right-token-0123456789')).toBe('ok');
    expect(throttle.size).toBe(0); // the ended window is forgotten
  });

  it('remembers at most maxAddresses addresses (the oldest window dropped first); maxFailures 0 never refuses', () => {
    const throttle = new AuthThrottle({ maxFailures: 1, windowMs: 60_000, maxAddresses: 3, now });
    for (const a of ['a', 'b', 'c', 'd']) throttle.failed(a);
    expect(throttle.size).toBe(3);
    expect(throttle.refusal('a', 'api')).toBeNull(); // forgotten
    expect(throttle.refusal('d', 'api')).not.toBeNull();
    const off = new AuthThrottle({ maxFailures: 0, windowMs: 60_000, maxAddresses: 3, now });
    for (let i = 0; i < 100; i++) off.failed('a');
    expect(off.refusal('a', 'api')).toBeNull();
    expect(off.size).toBe(0);
  });
});

// --- every surface ----------------------------------------------------------------------------

const ADMIN = 'admin-token-0123456789abcdef';
const API = 'api-token-0123456789abcdef';
const PUSH = 'push-token-0123456789abcdef';
let control: ControlPlane;
const throttled: string[] = [];

beforeAll(async () => {
  const store = new MemorySharedDataStore('gw-throttle', { presenceTtlMs: 60_000 });
  ({ control } = makeControl(
    store,
    { admin: { token: ADMIN }, api: { tokens: [API] }, push: { tokens: [PUSH] }, status: { public: 'token' }, auth: { maxFailures: 3, windowMs: 60_000 } },
    { onAuthThrottled: (s) => throttled.push(s) },
  ));
  await control.ready();
});

afterAll(async () => {
  await control.close();
});

type Surface = { name: string; admin: boolean; method: 'GET' | 'POST' | 'PUT'; url: string; token: string; body?: string };
const SURFACES: Surface[] = [
  { name: 'admin', admin: true, method: 'POST', url: '/backends/b1/drain', token: ADMIN, body: '{}' },
  { name: 'api', admin: false, method: 'PUT', url: '/_roomgate/api/rooms/r1/meta', token: API, body: '{"a":1}' },
  { name: 'push', admin: false, method: 'POST', url: '/_roomgate/api/rooms/r1/messages', token: PUSH, body: '{"a":1}' },
  { name: 'status', admin: false, method: 'GET', url: '/_roomgate/', token: ADMIN },
];

function send(s: Surface, token: string, remoteAddress: string) {
  const app = s.admin ? control.adminApp! : control.publicApp;
  return app.inject({
    method: s.method,
    url: s.url,
    remoteAddress,
    headers: { host: '127.0.0.1', authorization: `Bearer ${token}`, ...(s.body ? { 'content-type': 'application/json' } : {}) },
    ...(s.body ? { payload: s.body } : {}),
  });
}

describe('failed tokens are limited per client address on every surface', () => {
  for (const [i, s] of SURFACES.entries()) {
    it(`${s.name}: 401 for three wrong tokens, then 429 with Retry-After even for the right one; another address passes`, async () => {
      const address = `192.0.2.${i + 1}`;
      for (let n = 0; n < 3; n++) expect((await send(s, 'wrong-token-xxxxxxxxxxxxxxxx', address)).statusCode).toBe(401);
      const r = await send(s, s.token, address);
      expect(r.statusCode).toBe(429);
      expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(59);
      expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(60);
      // The one error shape on the API and admin ports; the status page (a page) says it in plain text.
      if (s.name === 'status') expect(r.body).toContain('too many wrong tokens');
      else expect(r.json()).toEqual({ error: { code: 'too_many_requests', message: expect.stringContaining('too many wrong tokens') } });
      expect(throttled.at(-1)).toBe(s.name);
      const other = await send(s, s.token, `198.51.100.${i + 1}`);
      expect(other.statusCode).not.toBe(429);
      expect(other.statusCode).not.toBe(401);
    });
  }

  it('one table for all surfaces: wrong admin tokens on the admin port lock the address out of API writes too', async () => {
    const address = '203.0.113.9';
    for (let n = 0; n < 3; n++) expect((await send(SURFACES[0]!, 'wrong-token-xxxxxxxxxxxxxxxx', address)).statusCode).toBe(401);
    expect((await send(SURFACES[1]!, API, address)).statusCode).toBe(429);
  });
});
