// The Range header of a GET (RFC 9110 section 14): one byte range, or the whole body.
// Several ranges are answered with the whole body (allowed; multipart/byteranges is rarely worth
// it for static files); anything unparseable or in another unit is ignored likewise.

export type RangeResult =
  /** 200 with the whole body: no Range, or one that is ignored. */
  | { readonly kind: 'full' }
  /** 206 with bytes start..end (inclusive). */
  | { readonly kind: 'partial'; readonly start: number; readonly end: number }
  // 416, with Content-Range: bytes */size (the size only).
  | { readonly kind: 'unsatisfiable' };

const FULL: RangeResult = { kind: 'full' };
const UNSATISFIABLE: RangeResult = { kind: 'unsatisfiable' };
// At most 15 digits: every value stays an exact integer; longer numbers are refused as garbage.
const SPEC = /^\s*(\d{0,15})\s*-\s*(\d{0,15})\s*$/;

/** The range of a body of `size` bytes that `header` asks for. */
export function parseRange(header: string | undefined, size: number): RangeResult {
  if (header === undefined || header.length > 1024) return FULL;
  const eq = header.indexOf('=');
  if (eq < 0 || header.slice(0, eq).trim().toLowerCase() !== 'bytes') return FULL;
  const spec = header.slice(eq + 1);
  if (spec.includes(',')) return FULL;
  const m = SPEC.exec(spec);
  if (!m) return FULL;
  const [, first = '', last = ''] = m;
  if (first === '' && last === '') return FULL;
  if (first === '') {
    // Suffix range: the last n bytes.
    const n = Number(last);
    if (n === 0 || size === 0) return UNSATISFIABLE;
    return { kind: 'partial', start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return FULL; // invalid: ignored
  if (start >= size) return UNSATISFIABLE;
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  return { kind: 'partial', start, end };
}
