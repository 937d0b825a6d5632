/**
 * Weighted consistent-hash ring: places each room key on one backend.
 *
 * Replaces the `hashring` package (unmaintained; its LRU cache is a plain
 * object, so `get('__proto__')` pollutes Object.prototype and keys such as
 * 'constructor' return wrong servers; md5 per lookup is slow). Here a key is
 * only ever hashed, never used as a property name, and there is no cache: a
 * murmur3 hash plus a bucketed search of a typed array is cheaper than one.
 *
 * The ring depends only on the set of (id, weight), never on list order, so
 * every gateway that is given the same members computes the same placement.
 */
import { hash32 } from './hash.js';

export interface RingMember {
  readonly id: string;
  /** > 0, may be fractional; 0 means "a member, but not on the ring" (e.g. drained). */
  readonly weight: number;
}

export interface Ring {
  /** The members given, sorted by id (including weight-0 ones). */
  readonly members: readonly RingMember[];
  /** Distinct member ids in ring order starting at the key's point: [owner, next, ...]; each id once. */
  walk(key: string): string[];
  /**
   * First member id in walk order for which accept(id) is true; undefined if
   * none (or ring empty). accept is called at most once per member. Does not
   * allocate per call.
   */
  first(key: string, accept?: (id: string) => boolean): string | undefined;
}

export interface RingOptions {
  /** Points per 1.0 of weight (default 160, as in ketama); a member with weight > 0 gets at least 1. */
  readonly pointsPerWeight?: number;
}

export const DEFAULT_POINTS_PER_WEIGHT = 160;

// During the build each point is packed with its member index into one
// float64, `point * INDEX_SPAN + index`, so a single numeric typed-array sort
// orders by point and then by index. Indexes follow id order, so equal points
// are broken by id. point < 2^32 and index < 2^20 keeps the value below 2^52,
// where float64 is exact.
const INDEX_SPAN = 2 ** 20;
// 2^24 points is 16 million, ~200 MiB during the build: far beyond any real
// fleet, so reaching it means a weight typo (1e9 instead of 1.0), not intent.
const MAX_POINTS = 2 ** 24;

export function buildRing(members: readonly RingMember[], opts: RingOptions = {}): Ring {
  const perWeight = opts.pointsPerWeight ?? DEFAULT_POINTS_PER_WEIGHT;
  if (typeof perWeight !== 'number' || !Number.isFinite(perWeight) || perWeight <= 0) {
    throw new Error(`ring: pointsPerWeight must be a positive finite number, got ${String(perWeight)}`);
  }
  const sorted = normalize(members);
  if (sorted.length > INDEX_SPAN) {
    throw new Error(`ring: at most ${INDEX_SPAN} members are supported, got ${sorted.length}`);
  }

  const counts = sorted.map((m) => (m.weight > 0 ? Math.max(1, Math.round(perWeight * m.weight)) : 0));
  const total = counts.reduce((a, b) => a + b, 0);
  if (total > MAX_POINTS) {
    throw new Error(`ring: ${total} points exceeds the limit of ${MAX_POINTS}; check member weights and pointsPerWeight`);
  }

  const packed = new Float64Array(total);
  let j = 0;
  for (let m = 0; m < sorted.length; m++) {
    const id = sorted[m]!.id;
    const count = counts[m]!;
    // `${id}#${i}` strings never repeat across members: the part after the
    // last '#' is a number, so the string alone tells id and i apart.
    for (let i = 0; i < count; i++) packed[j++] = hash32(`${id}#${i}`) * INDEX_SPAN + m;
  }
  packed.sort();

  const points = new Uint32Array(total);
  const owners = new Int32Array(total);
  for (let i = 0; i < total; i++) {
    const v = packed[i]!;
    const point = Math.floor(v / INDEX_SPAN);
    points[i] = point;
    owners[i] = v - point * INDEX_SPAN;
  }
  const active = counts.filter((c) => c > 0).length;
  return new TypedArrayRing(sorted, points, owners, active);
}

/** Validates and returns frozen copies sorted by id. */
function normalize(members: readonly RingMember[]): RingMember[] {
  if (!Array.isArray(members)) throw new Error('ring: members must be an array');
  const out: RingMember[] = [];
  for (const m of members) {
    const id: unknown = m?.id;
    const weight: unknown = m?.weight;
    if (typeof id !== 'string' || id === '') {
      throw new Error(`ring: member id must be a non-empty string, got ${JSON.stringify(id)}`);
    }
    if (typeof weight !== 'number' || !Number.isFinite(weight) || weight < 0) {
      throw new Error(`ring: member "${id}" has invalid weight ${String(weight)}; expected a finite number >= 0`);
    }
    out.push(Object.freeze({ id, weight }));
  }
  // Plain code-unit comparison, not localeCompare: the order (and so the tie
  // break) must not depend on the locale or ICU data of the host.
  out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (let i = 1; i < out.length; i++) {
    if (out[i]!.id === out[i - 1]!.id) throw new Error(`ring: duplicate member id "${out[i]!.id}"`);
  }
  return out;
}

class TypedArrayRing implements Ring {
  readonly members: readonly RingMember[];
  private readonly ids: readonly string[];
  /** Per member: the stamp of the last first() scan that visited it. */
  private readonly seen: Uint32Array;
  private stamp = 0;
  /** True while first() runs a caller's accept(); a nested call must not reuse `seen`. */
  private scanning = false;
  /** Sorted point values, and the member index owning each. */
  private readonly points: Uint32Array;
  private readonly owners: Int32Array;
  /** Members with at least one point: a walk is complete once it has seen this many. */
  private readonly active: number;
  /**
   * buckets[b] = index of the first point >= b * 2^shift (so buckets[2^bits] =
   * points.length). With 2-4 buckets per point a key's bucket holds ~0-1
   * points, so a lookup is a hash plus an almost empty search instead of a
   * ~log2(points) binary search whose branches the CPU cannot predict.
   */
  private readonly buckets: Uint32Array;
  private readonly shift: number;

  constructor(members: RingMember[], points: Uint32Array, owners: Int32Array, active: number) {
    this.members = Object.freeze(members);
    this.points = points;
    this.owners = owners;
    this.active = active;
    this.ids = members.map((m) => m.id);
    this.seen = new Uint32Array(members.length);

    const bits = Math.min(20, 33 - Math.clz32(points.length)); // 2^bits in (2n, 4n], at most 1M
    this.shift = 32 - bits;
    this.buckets = bucketIndex(points, bits);
  }

  /** Index of the first point >= hash(key), wrapping past the end to 0. Ring must be non-empty. */
  private start(key: string): number {
    const h = hash32(key);
    const points = this.points;
    const b = h >>> this.shift;
    // The answer lies in [buckets[b], buckets[b + 1]]: earlier points are below
    // this bucket, later ones above it.
    let lo = this.buckets[b]!;
    let hi = this.buckets[b + 1]!;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (points[mid]! < h) lo = mid + 1;
      else hi = mid;
    }
    return lo === points.length ? 0 : lo;
  }

  walk(key: string): string[] {
    const out: string[] = [];
    const n = this.points.length;
    if (n === 0) return out;
    const seen = new Uint8Array(this.ids.length);
    for (let step = 0, i = this.start(key); step < n && out.length < this.active; step++) {
      const m = this.owners[i]!;
      if (seen[m] === 0) {
        seen[m] = 1;
        out.push(this.ids[m]!);
      }
      if (++i === n) i = 0;
    }
    return out;
  }

  first(key: string, accept?: (id: string) => boolean): string | undefined {
    if (this.points.length === 0) return undefined;
    const start = this.start(key);
    if (accept === undefined) return this.ids[this.owners[start]!];
    // accept() may itself call first() on this ring; such a nested call gets
    // its own marks instead of clobbering the outer scan's.
    if (this.scanning) return this.scan(start, accept, new Uint32Array(this.ids.length), 1);
    this.scanning = true;
    try {
      return this.scan(start, accept, this.seen, this.nextStamp());
    } finally {
      this.scanning = false;
    }
  }

  /** Stamps instead of clearing `seen` on every call; clear only when the counter wraps. */
  private nextStamp(): number {
    this.stamp = (this.stamp + 1) >>> 0;
    if (this.stamp === 0) {
      this.seen.fill(0);
      this.stamp = 1;
    }
    return this.stamp;
  }

  private scan(start: number, accept: (id: string) => boolean, seen: Uint32Array, stamp: number): string | undefined {
    const n = this.points.length;
    let left = this.active;
    for (let step = 0, i = start; step < n && left > 0; step++) {
      const m = this.owners[i]!;
      if (seen[m] !== stamp) {
        seen[m] = stamp;
        left--;
        const id = this.ids[m]!;
        if (accept(id)) return id;
      }
      if (++i === n) i = 0;
    }
    return undefined;
  }
}

/** buckets[b] = index of the first point >= b * 2^(32 - bits), for b in [0, 2^bits]. */
function bucketIndex(points: Uint32Array, bits: number): Uint32Array {
  const size = 2 ** bits;
  const width = 2 ** (32 - bits);
  const buckets = new Uint32Array(size + 1);
  const n = points.length;
  let i = 0;
  for (let b = 0; b <= size; b++) {
    const lowest = b * width;
    while (i < n && points[i]! < lowest) i++;
    buckets[b] = i;
  }
  return buckets;
}
