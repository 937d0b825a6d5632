import { describe, expect, it } from 'vitest';
import { cacheControl, etagOf, evaluatePreconditions, httpDate, ifRangeHolds, parseEtagList } from '../../src/static/conditional.js';
import { contentType } from '../../src/static/content-type.js';
import { acceptedVariants } from '../../src/static/encoding.js';
import { parseRange } from '../../src/static/range.js';

const MTIME = Date.UTC(2024, 0, 15, 12, 0, 0, 750); // .750 s: dates compare in whole seconds
const LAST_MODIFIED = 'Mon, 15 Jan 2024 12:00:00 GMT';

describe('validators', () => {
  it('makes a strong ETag from size and mtime, distinct per coding', () => {
    const id = etagOf(1234, MTIME, null);
    expect(id).toMatch(/^"[0-9a-f]+-[0-9a-f]+"$/);
    expect(etagOf(1234, MTIME, 'br')).toBe(id.replace(/"$/, '-br"'));
    expect(new Set([id, etagOf(1234, MTIME, 'br'), etagOf(1234, MTIME, 'gz'), etagOf(1235, MTIME, null), etagOf(1234, MTIME + 1, null)]).size).toBe(5);
    expect(httpDate(MTIME)).toBe(LAST_MODIFIED);
  });

  it('parses entity-tag lists', () => {
    expect(parseEtagList('"a", W/"b" ,"c"')).toEqual(['"a"', 'W/"b"', '"c"']);
    expect(parseEtagList(' * ')).toEqual(['*']);
    expect(parseEtagList('garbage')).toEqual([]);
  });

  it('answers 304 for a matching If-None-Match (weak comparison) and ignores If-Modified-Since then', () => {
    const etag = etagOf(10, MTIME, null);
    expect(evaluatePreconditions({ ifNoneMatch: etag }, etag, MTIME)).toBe(304);
    expect(evaluatePreconditions({ ifNoneMatch: `"x", W/${etag}` }, etag, MTIME)).toBe(304);
    expect(evaluatePreconditions({ ifNoneMatch: '*' }, etag, MTIME)).toBe(304);
    expect(evaluatePreconditions({ ifNoneMatch: '"other"', ifModifiedSince: LAST_MODIFIED }, etag, MTIME)).toBeNull();
    expect(evaluatePreconditions({ ifNoneMatch: etagOf(10, MTIME, 'br') }, etag, MTIME)).toBeNull();
  });

  it('answers 304 when If-Modified-Since is not older than the file (whole seconds)', () => {
    const etag = etagOf(10, MTIME, null);
    expect(evaluatePreconditions({ ifModifiedSince: LAST_MODIFIED }, etag, MTIME)).toBe(304);
    expect(evaluatePreconditions({ ifModifiedSince: 'Tue, 16 Jan 2024 00:00:00 GMT' }, etag, MTIME)).toBe(304);
    expect(evaluatePreconditions({ ifModifiedSince: 'Mon, 15 Jan 2024 11:59:59 GMT' }, etag, MTIME)).toBeNull();
    expect(evaluatePreconditions({ ifModifiedSince: 'not a date' }, etag, MTIME)).toBeNull();
    expect(evaluatePreconditions({}, etag, MTIME)).toBeNull();
  });

  it('answers 412 for a failed If-Match or If-Unmodified-Since', () => {
    const etag = etagOf(10, MTIME, null);
    expect(evaluatePreconditions({ ifMatch: '"nope"' }, etag, MTIME)).toBe(412);
    expect(evaluatePreconditions({ ifMatch: `W/${etag}` }, etag, MTIME)).toBe(412); // strong comparison
    expect(evaluatePreconditions({ ifMatch: etag }, etag, MTIME)).toBeNull();
    expect(evaluatePreconditions({ ifMatch: '*' }, etag, MTIME)).toBeNull();
    expect(evaluatePreconditions({ ifUnmodifiedSince: 'Mon, 15 Jan 2024 11:59:59 GMT' }, etag, MTIME)).toBe(412);
    expect(evaluatePreconditions({ ifUnmodifiedSince: LAST_MODIFIED }, etag, MTIME)).toBeNull();
  });

  it('applies If-Range only when the validator still matches', () => {
    const etag = etagOf(10, MTIME, null);
    expect(ifRangeHolds(undefined, etag, MTIME)).toBe(true);
    expect(ifRangeHolds(etag, etag, MTIME)).toBe(true);
    expect(ifRangeHolds(`W/${etag}`, etag, MTIME)).toBe(false);
    expect(ifRangeHolds('"old"', etag, MTIME)).toBe(false);
    expect(ifRangeHolds(LAST_MODIFIED, etag, MTIME)).toBe(true);
    expect(ifRangeHolds('Mon, 15 Jan 2024 11:00:00 GMT', etag, MTIME)).toBe(false);
    expect(ifRangeHolds('garbage', etag, MTIME)).toBe(false);
  });

  it('caches hashed names for a year, immutable, and others for maxAgeS', () => {
    expect(cacheControl(true, 60)).toBe('public, max-age=31536000, immutable');
    expect(cacheControl(false, 60)).toBe('public, max-age=60');
    expect(cacheControl(false, 0)).toBe('no-cache');
  });
});

describe('parseRange', () => {
  it('reads one range in each form', () => {
    expect(parseRange('bytes=0-9', 100)).toEqual({ kind: 'partial', start: 0, end: 9 });
    expect(parseRange('bytes=90-', 100)).toEqual({ kind: 'partial', start: 90, end: 99 });
    expect(parseRange('bytes=-5', 100)).toEqual({ kind: 'partial', start: 95, end: 99 });
    expect(parseRange('bytes=-500', 100)).toEqual({ kind: 'partial', start: 0, end: 99 });
    expect(parseRange('bytes=50-5000', 100)).toEqual({ kind: 'partial', start: 50, end: 99 });
    expect(parseRange('Bytes = 1 - 2', 100)).toEqual({ kind: 'partial', start: 1, end: 2 });
  });

  it('is unsatisfiable beyond the end, for an empty suffix and for an empty file', () => {
    expect(parseRange('bytes=100-', 100)).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange('bytes=100-200', 100)).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange('bytes=-0', 100)).toEqual({ kind: 'unsatisfiable' });
    expect(parseRange('bytes=0-', 0)).toEqual({ kind: 'unsatisfiable' });
  });

  it('ignores several ranges, other units, reversed and malformed ranges (whole body)', () => {
    for (const h of [undefined, 'bytes=0-1,5-6', 'items=0-1', 'bytes=5-1', 'bytes=-', 'bytes=a-b', 'bytes 0-1', 'bytes=0-1-2', `bytes=0-${'9'.repeat(20)}`, 'bytes=--1']) {
      expect([h, parseRange(h, 100)]).toEqual([h, { kind: 'full' }]);
    }
  });
});

describe('acceptedVariants', () => {
  const codings = (h: string | undefined): string[] => acceptedVariants(h).map((v) => v.coding);

  it('prefers brotli, then gzip, honouring q-values and *', () => {
    expect(codings('gzip, deflate, br')).toEqual(['br', 'gzip']);
    expect(codings('gzip')).toEqual(['gzip']);
    expect(codings('x-gzip')).toEqual(['gzip']);
    expect(codings('br;q=0, gzip')).toEqual(['gzip']);
    expect(codings('br;q=0.5, gzip;q=0.8')).toEqual(['gzip', 'br']);
    expect(codings('*')).toEqual(['br', 'gzip']);
    expect(codings('*, br;q=0')).toEqual(['gzip']);
    expect(codings('BR')).toEqual(['br']);
  });

  it('offers nothing for identity, deflate, empty or absent', () => {
    for (const h of [undefined, '', 'identity', 'deflate', 'gzip;q=0', '*;q=0']) expect([h, codings(h)]).toEqual([h, []]);
  });
});

describe('contentType', () => {
  it('maps common static extensions and defaults to octet-stream', () => {
    expect(contentType('app.js')).toBe('text/javascript; charset=utf-8');
    expect(contentType('css/base.5af66c1b1797.css')).toBe('text/css; charset=utf-8');
    expect(contentType('LOGO.PNG')).toBe('image/png');
    expect(contentType('fonts/x.woff2')).toBe('font/woff2');
    expect(contentType('x.svg')).toBe('image/svg+xml; charset=utf-8');
    expect(contentType('README')).toBe('application/octet-stream');
    expect(contentType('dir.d/file')).toBe('application/octet-stream');
    expect(contentType('x.unknown')).toBe('application/octet-stream');
  });
});
