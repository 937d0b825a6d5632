import { describe, expect, it } from 'vitest';
import { hash32 } from '../../src/placement/hash.js';
import { buildRing } from '../../src/placement/ring.js';
import type { Ring, RingMember } from '../../src/placement/ring.js';

const KEYS = Array.from({ length: 100_000 }, (_, i) => `room-${i}`);

function equal(ids: string[]): RingMember[] {
  return ids.map((id) => ({ id, weight: 1 }));
}

function owners(ring: Ring, keys: readonly string[] = KEYS): string[] {
  return keys.map((k) => ring.first(k)!);
}

function shares(ring: Ring): Map<string, number> {
  const counts = new Map<string, number>();
  for (const o of owners(ring)) counts.set(o, (counts.get(o) ?? 0) + 1);
  return new Map([...counts].map(([id, n]) => [id, n / KEYS.length]));
}

describe('hash32 (MurmurHash3 x86_32, seed 0, UTF-8)', () => {
  // Values checked against Austin Appleby's reference C (smhasher
  // MurmurHash3_x86_32) run over the same UTF-8 bytes.
  const vectors: [string, number][] = [
    ['', 0x00000000],
    ['a', 0x3c2569b2],
    ['ab', 0x9bbfd75f],
    ['abc', 0xb3dd93fa],
    ['abcd', 0x43ed676a],
    ['hello', 0x248bfa47],
    ['hello, world', 0x149bbb7f],
    ['The quick brown fox jumps over the lazy dog', 0x2e4ff723],
    ['__proto__', 0x41b6a312],
    ['constructor', 0xd18db727],
    ['toString', 0x2e9978e6],
    ['héllo', 0xbc9fa068],
    ['日本語', 0xa5a47297],
    ['room-😀-x', 0x171c863a],
    ['ünïcödé-ключ', 0x1b607b33],
    // Lone surrogates hash as U+FFFD (EF BF BD), like TextEncoder.
    ['a\uD800b', 0xcb694923],
    ['\uDC00', 0xb69ca6c1],
  ];
  it.each(vectors)('hash32(%j) = %i', (s, expected) => {
    expect(hash32(s)).toBe(expected);
  });

  it('restarts from the UTF-8 bytes when non-ASCII appears after ASCII blocks', () => {
    // Non-ASCII in a full block, in the tail, and after a partial ASCII tail.
    expect(hash32('abcdefgh-é')).toBe(0xbc290911);
    expect(hash32('abcdefghé')).toBe(0x41d15ec0);
    expect(hash32('abcdefghijé')).toBe(0xd9aa0832);
  });

  it('is unsigned 32-bit', () => {
    for (const k of KEYS.slice(0, 1000)) {
      const h = hash32(k);
      expect(Number.isInteger(h) && h >= 0 && h <= 0xffffffff).toBe(true);
    }
  });
});

describe('buildRing', () => {
  it('spreads 100k keys over 3 equal members within a few % of 1/3', () => {
    const s = shares(buildRing(equal(['backend-a', 'backend-b', 'backend-c'])));
    expect(s.size).toBe(3);
    for (const share of s.values()) expect(Math.abs(share - 1 / 3)).toBeLessThan(0.03);
  });

  it('gives a weight-2 member about twice the keys of a weight-1 member', () => {
    const s = shares(
      buildRing([
        { id: 'backend-a', weight: 2 },
        { id: 'backend-b', weight: 1 },
        { id: 'backend-c', weight: 1 },
      ]),
    );
    const ratio = s.get('backend-a')! / ((s.get('backend-b')! + s.get('backend-c')!) / 2);
    expect(ratio).toBeGreaterThan(1.7);
    expect(ratio).toBeLessThan(2.3);
  });

  it('supports fractional weights and gives weight > 0 at least one point', () => {
    const ring = buildRing(
      [
        { id: 'big', weight: 1 },
        { id: 'tiny', weight: 0.0001 },
      ],
      { pointsPerWeight: 160 },
    );
    expect(new Set(owners(ring)).has('tiny')).toBe(true);
    expect(ring.walk('x').sort()).toEqual(['big', 'tiny']);
  });

  it('matches a brute-force scan of the sorted points, including wrap-around', () => {
    const members: RingMember[] = [
      { id: 'backend-a', weight: 1 },
      { id: 'backend-b', weight: 0.3 },
      { id: 'backend-c', weight: 2 },
      { id: 'backend-d', weight: 0.01 },
    ];
    for (const pointsPerWeight of [1, 7, 160]) {
      const ring = buildRing(members, { pointsPerWeight });
      const pts = members
        .flatMap((m) =>
          Array.from({ length: Math.max(1, Math.round(pointsPerWeight * m.weight)) }, (_, i) => ({
            at: hash32(`${m.id}#${i}`),
            id: m.id,
          })),
        )
        .sort((x, y) => x.at - y.at || (x.id < y.id ? -1 : 1));
      const top = pts[pts.length - 1]!.at;
      const keys = [...KEYS.slice(0, 3000)];
      // Keys hashing above the last point must wrap to the first one.
      for (let i = 0; keys.length < 3100 && i < 1e6; i++) if (hash32(`wrap-${i}`) > top) keys.push(`wrap-${i}`);
      for (const k of keys) {
        const h = hash32(k);
        const expected = (pts.find((p) => p.at >= h) ?? pts[0]!).id;
        if (ring.first(k) !== expected) expect.fail(`ppw ${pointsPerWeight}, key ${k}: ${ring.first(k)} != ${expected}`);
      }
    }
  });

  it('depends on the set of members, not their order', () => {
    const members: RingMember[] = [
      { id: 'backend-c', weight: 1 },
      { id: 'backend-a', weight: 2.5 },
      { id: 'backend-b', weight: 0.5 },
      { id: 'backend-d', weight: 1 },
    ];
    const a = buildRing(members);
    const b = buildRing([...members].reverse());
    const c = buildRing([members[2]!, members[0]!, members[3]!, members[1]!]);
    const sample = KEYS.slice(0, 2000);
    expect(sample.map((k) => b.walk(k))).toEqual(sample.map((k) => a.walk(k)));
    expect(sample.map((k) => c.walk(k))).toEqual(sample.map((k) => a.walk(k)));
    expect(b.members).toEqual(a.members);
  });

  it('breaks ties between equal points by id, whatever the input order', () => {
    // A real murmur3 collision: hash32('m8961#0') === hash32('m70373#0'),
    // so with one point each both members sit on the same point.
    expect(hash32('m8961#0')).toBe(hash32('m70373#0'));
    for (const list of [equal(['m8961', 'm70373']), equal(['m70373', 'm8961'])]) {
      const ring = buildRing(list, { pointsPerWeight: 1 });
      for (const k of ['a', 'b', 'room-1', '']) {
        expect(ring.walk(k)).toEqual(['m70373', 'm8961']); // '7' < '8'
        expect(ring.first(k)).toBe('m70373');
      }
    }
  });

  it('moves about 1/4 of keys when a 4th member joins, all of them to the new member', () => {
    const before = owners(buildRing(equal(['backend-a', 'backend-b', 'backend-c'])));
    const after = owners(buildRing(equal(['backend-a', 'backend-b', 'backend-c', 'backend-d'])));
    const movedTo = after.filter((o, i) => o !== before[i]);
    expect(new Set(movedTo)).toEqual(new Set(['backend-d']));
    const moved = movedTo.length;
    expect(moved / KEYS.length).toBeGreaterThan(0.18);
    expect(moved / KEYS.length).toBeLessThan(0.32);
  });

  it('moves only the removed member keys when a member leaves', () => {
    const before = owners(buildRing(equal(['backend-a', 'backend-b', 'backend-c', 'backend-d'])));
    const after = owners(buildRing(equal(['backend-a', 'backend-c', 'backend-d'])));
    const stayedPut = (i: number): boolean => after[i] === before[i];
    const othersMoved = KEYS.filter((_, i) => before[i] !== 'backend-b' && !stayedPut(i));
    expect(othersMoved).toEqual([]);
    expect(after).not.toContain('backend-b');
    expect(before.filter((o) => o === 'backend-b').length).toBeGreaterThan(KEYS.length / 8);
  });

  it('treats weight 0 as "not on the ring" but keeps the member listed', () => {
    const ring = buildRing([
      { id: 'backend-a', weight: 1 },
      { id: 'drained', weight: 0 },
      { id: 'backend-b', weight: 1 },
    ]);
    expect(ring.members.map((m) => m.id)).toEqual(['backend-a', 'backend-b', 'drained']);
    expect(new Set(owners(ring, KEYS.slice(0, 5000)))).toEqual(new Set(['backend-a', 'backend-b']));
    expect(ring.walk('room-1').sort()).toEqual(['backend-a', 'backend-b']);
    expect(ring.first('room-1', (id) => id === 'drained')).toBeUndefined();
  });

  it('rejects duplicate ids and bad weights with a clear error', () => {
    expect(() => buildRing(equal(['a', 'b', 'a']))).toThrow(/duplicate member id "a"/);
    expect(() => buildRing([{ id: 'a', weight: -1 }])).toThrow(/"a" has invalid weight -1/);
    expect(() => buildRing([{ id: 'a', weight: Number.NaN }])).toThrow(/invalid weight NaN/);
    expect(() => buildRing([{ id: 'a', weight: Infinity }])).toThrow(/invalid weight/);
    expect(() => buildRing([{ id: '', weight: 1 }])).toThrow(/non-empty string/);
    expect(() => buildRing(equal(['a']), { pointsPerWeight: 0 })).toThrow(/pointsPerWeight/);
    expect(() => buildRing([{ id: 'a', weight: 1e9 }])).toThrow(/exceeds the limit/);
  });

  it('returns undefined and [] on an empty ring', () => {
    for (const ring of [buildRing([]), buildRing([{ id: 'drained', weight: 0 }])]) {
      expect(ring.first('room-1')).toBeUndefined();
      expect(ring.first('room-1', () => true)).toBeUndefined();
      expect(ring.walk('room-1')).toEqual([]);
    }
  });
});

describe('walk and first', () => {
  const ids = Array.from({ length: 7 }, (_, i) => `backend-${i}`);
  const ring = buildRing(ids.map((id, i) => ({ id, weight: 0.5 + i / 4 })));
  const sample = KEYS.slice(0, 3000);

  it('walk lists every member exactly once, owner first', () => {
    for (const k of sample) {
      const w = ring.walk(k);
      expect(w.length).toBe(ids.length);
      expect(new Set(w).size).toBe(ids.length);
      expect(w[0]).toBe(ring.first(k));
    }
  });

  it('first(key, accept) equals the first accepted entry of walk(key)', () => {
    const down = new Set(['backend-1', 'backend-4', 'backend-5']);
    const accept = (id: string): boolean => !down.has(id);
    for (const k of sample) {
      expect(ring.first(k, accept)).toBe(ring.walk(k).filter(accept)[0]);
    }
    expect(ring.first('room-1', () => false)).toBeUndefined();
  });

  it('calls accept at most once per member, in walk order', () => {
    for (const k of sample.slice(0, 200)) {
      const calls: string[] = [];
      ring.first(k, (id) => {
        calls.push(id);
        return false;
      });
      expect(calls).toEqual(ring.walk(k));
    }
  });

  it('stays correct when accept calls first on the same ring', () => {
    for (const k of sample.slice(0, 200)) {
      const calls: string[] = [];
      const got = ring.first(k, (id) => {
        calls.push(id);
        ring.first(`${k}/nested`, () => false); // scans the whole ring
        return false;
      });
      expect(got).toBeUndefined();
      expect(calls).toEqual(ring.walk(k));
    }
  });
});

describe('keys are only hashed, never used as property names', () => {
  const ring = buildRing(equal(['backend-a', 'backend-b', 'backend-c']));
  const members = new Set(['backend-a', 'backend-b', 'backend-c']);
  const hostile = [
    '__proto__',
    'constructor',
    'toString',
    'valueOf',
    'hasOwnProperty',
    '__defineGetter__',
    'prototype',
    '',
    'x'.repeat(10 * 1024),
    'é'.repeat(10 * 1024),
    '\uD800',
  ];

  it('returns a member for each and leaves Object.prototype untouched', () => {
    const protoKeys = Reflect.ownKeys(Object.prototype);
    for (const k of hostile) {
      expect(members.has(ring.first(k)!)).toBe(true);
      expect(ring.walk(k)).toHaveLength(3);
      expect(members.has(ring.first(k, (id) => id !== ring.first(k))!)).toBe(true);
    }
    expect(({} as Record<string, unknown>)['value']).toBeUndefined();
    expect(({} as Record<string, unknown>)['server']).toBeUndefined();
    expect(Reflect.ownKeys(Object.prototype)).toEqual(protoKeys);
    expect(Object.getPrototypeOf({})).toBe(Object.prototype);
  });

  it('places them by hash like any other key', () => {
    // '__proto__' and 'constructor' must not all land on one "special" member.
    const placed = hostile.map((k) => ring.first(k));
    expect(new Set(placed).size).toBeGreaterThan(1);
    expect(ring.first('__proto__')).toBe(ring.first('__proto__'));
  });
});
