/**
 * MurmurHash3 x86_32 (seed 0) over the UTF-8 bytes of a string.
 *
 * Why murmur3: it is fast in pure JS (only Math.imul, shifts and xors), well
 * distributed (passes SMHasher), has published test vectors, and is easy to
 * reproduce in any other language (mmh3 in Python, Guava's murmur3_32, ...)
 * should a tool outside this process ever need to compute a room's placement.
 *
 * Why UTF-8 bytes and not UTF-16 code units: the value then equals every
 * standard murmur3 implementation fed the same text. Room keys are almost
 * always ASCII, where one code unit is one byte, so the common path reads
 * charCodeAt directly and never allocates; the first non-ASCII code unit
 * switches to encoding the whole string with TextEncoder into a reused
 * scratch buffer. Lone surrogates are encoded as U+FFFD (EF BF BD), exactly
 * like TextEncoder and Buffer.from(s, 'utf8') do.
 */

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

function scramble(k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  return Math.imul(k, C2);
}

function mixBlock(h: number, k: number): number {
  h ^= scramble(k);
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function finalize(h: number, byteLength: number): number {
  h ^= byteLength;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** MurmurHash3 x86_32, seed 0, of the first `len` bytes of `b`. */
function hashBytes(b: Uint8Array, len: number): number {
  let h = 0;
  let i = 0;
  for (; i + 4 <= len; i += 4) {
    h = mixBlock(h, b[i]! | (b[i + 1]! << 8) | (b[i + 2]! << 16) | (b[i + 3]! << 24));
  }
  // Tail: the last 1-3 bytes, little-endian, scrambled but not rotated.
  let k = 0;
  for (let shift = 0; i < len; i++, shift += 8) k |= b[i]! << shift;
  if (len & 3) h ^= scramble(k);
  return finalize(h, len);
}

const encoder = new TextEncoder();
// Reused between calls so non-ASCII keys cost one encode, not one allocation.
// Safe because hash32 is synchronous and never re-entered.
let scratch = new Uint8Array(256);

function hashNonAscii(s: string): number {
  // A UTF-16 code unit never needs more than 3 UTF-8 bytes (a surrogate pair,
  // two units, needs 4), so 3 bytes per unit is always enough.
  const need = s.length * 3;
  if (scratch.length < need) scratch = new Uint8Array(need);
  const { written } = encoder.encodeInto(s, scratch);
  return hashBytes(scratch, written);
}

/** Unsigned 32-bit MurmurHash3 (x86_32, seed 0) of the UTF-8 encoding of `s`. */
export function hash32(s: string): number {
  const n = s.length;
  let h = 0;
  let i = 0;
  // ASCII: each code unit is one byte, so four code units make one block.
  for (; i + 4 <= n; i += 4) {
    const c0 = s.charCodeAt(i);
    const c1 = s.charCodeAt(i + 1);
    const c2 = s.charCodeAt(i + 2);
    const c3 = s.charCodeAt(i + 3);
    if ((c0 | c1 | c2 | c3) >= 0x80) return hashNonAscii(s);
    h = mixBlock(h, c0 | (c1 << 8) | (c2 << 16) | (c3 << 24));
  }
  let k = 0;
  for (let shift = 0; i < n; i++, shift += 8) {
    const c = s.charCodeAt(i);
    if (c >= 0x80) return hashNonAscii(s);
    k |= c << shift;
  }
  if (n & 3) h ^= scramble(k);
  return finalize(h, n);
}
