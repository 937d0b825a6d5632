import { describe, expect, it } from 'vitest';
import { createRoomSigner, type RoomSigner } from '../../src/room/signing.js';
import { withVerifyCache } from '../../src/room/verify-cache.js';

const SECRET = 'verify-cache-test-secret-0123456789';

/** A real signer that counts how often it actually verifies. */
function counting(): { signer: RoomSigner; calls: () => number } {
  const inner = createRoomSigner({ secrets: [SECRET], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 60 });
  let n = 0;
  return {
    signer: { sign: (r, t) => inner.sign(r, t), verify: (v, t) => (n++, inner.verify(v, t)) },
    calls: () => n,
  };
}

describe('withVerifyCache', () => {
  const t0 = 1_800_000_000_000;

  it('verifies a good cookie once per ttl and returns the same room', () => {
    const c = counting();
    const cached = withVerifyCache(c.signer, { maxEntries: 100, ttlMs: 1_000 });
    const value = c.signer.sign('room-1', t0);
    expect(cached.verify(value, t0)).toEqual({ ok: true, room: 'room-1' });
    expect(cached.verify(value, t0 + 999)).toEqual({ ok: true, room: 'room-1' });
    expect(c.calls()).toBe(1);
    expect(cached.verify(value, t0 + 1_000)).toEqual({ ok: true, room: 'room-1' });
    expect(c.calls()).toBe(2);
  });

  it('never caches a failure: forged cookies are checked every time', () => {
    const c = counting();
    const cached = withVerifyCache(c.signer, { maxEntries: 100, ttlMs: 1_000 });
    const forged = `${c.signer.sign('room-1', t0).slice(0, -2)}xx`;
    for (let i = 0; i < 3; i++) expect(cached.verify(forged, t0).ok).toBe(false);
    expect(c.calls()).toBe(3);
  });

  it('an expired cookie is refused once the ttl since its last success has passed', () => {
    const c = counting();
    const cached = withVerifyCache(c.signer, { maxEntries: 100, ttlMs: 1_000 });
    const value = c.signer.sign('room-1', t0);
    expect(cached.verify(value, t0 + 59_500).ok).toBe(true);
    expect(cached.verify(value, t0 + 61_000)).toMatchObject({ ok: false });
  });

  it('a clock that went backwards re-verifies', () => {
    const c = counting();
    const cached = withVerifyCache(c.signer, { maxEntries: 100, ttlMs: 1_000 });
    const value = c.signer.sign('room-1', t0);
    cached.verify(value, t0 + 500);
    cached.verify(value, t0);
    expect(c.calls()).toBe(2);
  });

  it('stays bounded: a full cache starts over', () => {
    const c = counting();
    const cached = withVerifyCache(c.signer, { maxEntries: 10, ttlMs: 60_000 });
    const values = Array.from({ length: 25 }, (_, i) => c.signer.sign(`room-${i}`, t0));
    for (const v of values) cached.verify(v, t0);
    expect(c.calls()).toBe(25);
    // The last ones are still cached, the first were dropped with the reset.
    cached.verify(values[24]!, t0);
    expect(c.calls()).toBe(25);
    cached.verify(values[0]!, t0);
    expect(c.calls()).toBe(26);
  });
});
