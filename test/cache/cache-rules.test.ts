// The page cache's pure parts: which requests it may answer, what a fill forwards, the key, what
// may be stored and for how long, the byte budget with its LRU eviction, variants, purges, and
// the one byte range a hit answers.
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { byteRange } from '../../src/cache/cache-client.js';
import { CacheRules, headerRecord, keyParts, primaryKey, type CacheConfig } from '../../src/cache/request-rules.js';
import { lifetimes, policyClass, policyRequest, StoredAnswers, unstorable, type StoredAnswer } from '../../src/cache/stored-answers.js';
import { wireAnswer } from '../../src/cache/wire-answer.js';

const cacheConfig = (c: Record<string, unknown> = {}): CacheConfig => configSchema.parse({ cache: { paths: ['/'], ...c } }).cache;
const head = (method: string, url: string, ...raw: string[]) => ({ method, url, rawHeaders: raw });

describe('which requests the cache may answer', () => {
  const rules = new CacheRules(cacheConfig({ paths: ['/blog/', '~^/game/[0-9]+$'], bypassPaths: ['/blog/admin/'] }), 'roomgate_room');

  it('GET and HEAD on the paths listed; other methods, paths and bypass paths are not', () => {
    expect(rules.bypass(head('GET', '/blog/1?x=1'))).toBeNull();
    expect(rules.bypass(head('HEAD', '/game/42'))).toBeNull();
    expect(rules.bypass(head('GET', '/game/42/chat'))).toBe('path');
    expect(rules.bypass(head('GET', '/other'))).toBe('path');
    expect(rules.bypass(head('GET', '/blog/admin/x'))).toBe('path');
    // A query that looks like a path does not make a path match.
    expect(rules.bypass(head('GET', '/x?/blog/'))).toBe('path');
    expect(rules.bypass(head('POST', '/blog/1'))).toBe('method');
    expect(rules.bypass(head('OPTIONS', '/blog/1'))).toBe('method');
    // A GET with a body goes on with its body (the fuzzer found the cache answering one).
    expect(rules.bypass(head('GET', '/blog/1', 'Transfer-Encoding', 'chunked'))).toBe('body');
    expect(rules.bypass(head('GET', '/blog/1', 'content-length', '0'))).toBe('body');
  });

  it('Authorization and the session cookie (any Cookie line) bypass; a prefix pattern matches names', () => {
    expect(rules.bypass(head('GET', '/blog/1', 'authorization', 'Basic eA=='))).toBe('authorization');
    expect(rules.bypass(head('GET', '/blog/1', 'Cookie', '_ga=1', 'cookie', 'a=b; sessionid=x'))).toBe('session-cookie');
    expect(rules.bypass(head('GET', '/blog/1', 'Cookie', 'sessionidx=1'))).toBeNull();
    const pre = new CacheRules(cacheConfig({ bypassCookies: ['wp_*'] }), 'roomgate_room');
    expect(pre.bypass(head('GET', '/', 'Cookie', 'wp_logged_in=1'))).toBe('session-cookie');
    expect(pre.bypass(head('GET', '/', 'Cookie', 'sessionid=1'))).toBeNull();
  });

  it('cookies kept on a fill: none by default, an allow list or a deny list; never the room cookie; sorted for the key', () => {
    const raw = ['Cookie', 'roomgate_room=r1.sig; _ga=GA1; lang=fr', 'Cookie', 'consent=yes'];
    expect(rules.keptCookies(raw)).toBe('');
    const allow = new CacheRules(cacheConfig({ cookies: ['lang', 'roomgate_room'] }), 'roomgate_room');
    expect(allow.keptCookies(raw)).toBe('lang=fr');
    const deny = new CacheRules(cacheConfig({ cookies: ['_ga*'], cookiesMode: 'deny' }), 'roomgate_room');
    expect(deny.keptCookies(raw)).toBe('consent=yes; lang=fr');
  });

  it('a fill forwards no Cookie but the kept ones, no Range, no conditionals, no Authorization', () => {
    const fwd = ['Host', 'a', 'Cookie', 'x=1', 'Range', 'bytes=0-1', 'If-None-Match', '"e"', 'If-Modified-Since', 'd', 'Accept-Language', 'fr', 'X-Forwarded-For', '1.2.3.4'];
    expect(rules.fillHeaders(fwd, '')).toEqual(['Host', 'a', 'Accept-Language', 'fr', 'X-Forwarded-For', '1.2.3.4']);
    expect(rules.fillHeaders(fwd, 'lang=fr')).toEqual(['Host', 'a', 'Accept-Language', 'fr', 'X-Forwarded-For', '1.2.3.4', 'Cookie', 'lang=fr']);
  });

  it('the key holds the target, scheme and host, room and kept cookies, and gives them back for purges', () => {
    const k = primaryKey('/blog/1?x', 'https://example.com', '42', 'lang=fr');
    expect(keyParts(k)).toEqual({ url: '/blog/1?x', origin: 'https://example.com', room: '42' });
    expect(primaryKey('/a', 'h', null, '')).not.toBe(primaryKey('/a', 'h', '1', ''));
  });
});

describe('what is stored, and for how long', () => {
  const clock = { t: 1_000_000 };
  const Policy = policyClass(() => clock.t);
  const c = cacheConfig({ graceMs: 5_000 });
  /** headers: by name, or [name, value, ...] as received (a name may come twice). */
  const judge = (status: number, headers: Record<string, string> | string[], bytes: number | null = 10, config = c) => {
    const fields = Array.isArray(headers) ? headers : Object.entries(headers).flat();
    const rec = headerRecord(fields);
    const policy = new Policy(policyRequest('/x', 'h', {}), { status, headers: rec }, { shared: true });
    return { why: unstorable(policy, status, fields, rec, config, bytes), life: lifetimes(policy, rec, config, clock.t) };
  };

  it('stores 200/203/301/404/410 with explicit freshness and nothing personal', () => {
    for (const s of [200, 203, 301, 404, 410]) expect(judge(s, { 'cache-control': 'max-age=5' }).why, String(s)).toBeNull();
    expect(judge(302, { 'cache-control': 'max-age=5' }).why).toBe('status');
    expect(judge(500, { 'cache-control': 'max-age=5' }).why).toBe('status');
    expect(judge(200, { 'cache-control': 'max-age=5', 'set-cookie': 'a=b' }).why).toBe('set-cookie');
    expect(judge(200, { 'cache-control': 'private, max-age=5' }).why).toBe('not-storable');
    expect(judge(200, { 'cache-control': 'no-store' }).why).toBe('not-storable');
    expect(judge(200, { 'cache-control': 'no-cache, max-age=5' }).why).toBe('no-cache');
    expect(judge(200, { 'cache-control': 'max-age=5', vary: 'Accept, *' }).why).toBe('vary-star');
    // Heuristic freshness (Last-Modified only) is not enough: the operator's default TTL is.
    expect(judge(200, { 'last-modified': 'Mon, 01 Jan 2024 00:00:00 GMT' }).why).toBe('no-freshness');
    expect(judge(200, {}, 10, cacheConfig({ defaultTtlMs: 5_000 })).why).toBeNull();
    expect(judge(200, { 'cache-control': 'max-age=5' }, c.maxObjectBytes + 1).why).toBe('too-large');
    expect(judge(200, { expires: new Date(clock.t + 60_000).toUTCString() }).why).toBeNull();
  });

  it('an answer with a field meant once, twice, is never stored (relayed as sent on HTTP/1.1, but no copy for everybody)', () => {
    const fresh = ['Cache-Control', 'max-age=60'];
    expect(judge(200, [...fresh, 'ETag', '"a"', 'ETag', '"b"']).why).toBe('field-twice');
    // Any spelling of the name, and any field HTTP/2 carries once (src/http/response-rules.ts).
    expect(judge(200, [...fresh, 'etag', '"a"', 'ETAG', '"a"']).why).toBe('field-twice');
    expect(judge(200, [...fresh, 'Content-Type', 'text/html', 'Content-Type', 'text/plain']).why).toBe('field-twice');
    expect(judge(200, [...fresh, 'Last-Modified', 'Mon, 01 Jan 2024 00:00:00 GMT', 'Location', '/a', 'Location', '/b']).why).toBe('field-twice');
    // Fields that may come more than once are stored as they came; one of each single-value one too.
    expect(judge(200, [...fresh, 'Link', '</a.css>', 'Link', '</b.css>', 'Vary', 'Accept', 'Vary', 'Accept-Language', 'ETag', '"a"']).why).toBeNull();
  });

  it('s-maxage wins over max-age (a shared cache); grace and the answer\'s own windows add up as the larger', () => {
    expect(judge(200, { 'cache-control': 'max-age=5, s-maxage=20' }).life.freshUntil).toBe(clock.t + 20_000);
    expect(judge(200, { 'cache-control': 'max-age=5' }).life).toEqual({ freshUntil: clock.t + 5_000, swrUntil: clock.t + 10_000, sieUntil: clock.t + 10_000 });
    expect(judge(200, { 'cache-control': 'max-age=5, stale-while-revalidate=60, stale-if-error=1' }).life).toEqual({
      freshUntil: clock.t + 5_000,
      swrUntil: clock.t + 65_000,
      sieUntil: clock.t + 10_000,
    });
    expect(judge(200, { 'cache-control': 'max-age=5, must-revalidate' }).life).toEqual({ freshUntil: clock.t + 5_000, swrUntil: clock.t + 5_000, sieUntil: clock.t + 5_000 });
    // http-cache-semantics reads proxy-revalidate strictly for a shared cache: never fresh, so
    // every request asks the backend (with the copy's validators), and never stale either.
    expect(judge(200, { 'cache-control': 'max-age=5, proxy-revalidate' }).life).toEqual({ freshUntil: clock.t, swrUntil: clock.t, sieUntil: clock.t });
  });
});

function answer(body: string, size = 0): StoredAnswer {
  const wire = wireAnswer(200, 'OK', [], Buffer.from(body));
  const Policy = policyClass(() => 0);
  return {
    status: 200,
    reason: 'OK',
    headers: [],
    body: wire.body,
    wire,
    policy: new Policy(policyRequest('/', 'h', {}), { status: 200, headers: { 'cache-control': 'max-age=5' } }, { shared: true }),
    freshUntil: 5_000,
    swrUntil: 5_000,
    sieUntil: 5_000,
    receivedAt: 0,
    initialAge: 0,
    size: size || StoredAnswers.sizeOf([], wire),
    refreshing: false,
    failedStatus: null,
  };
}

describe('the store', () => {
  it('keeps within its byte budget (keys counted), dropping the least recently used first', () => {
    let evicted = 0;
    const k = (n: number): string => primaryKey(`/${n}`, 'h', null, '');
    // Each entry: its size, and its key twice (the slot is the key, a separator and the variant '').
    const each = 1_000 + 2 * (k(1).length + 1);
    const s = new StoredAnswers(3 * each, () => evicted++);
    s.put(k(1), {}, {}, answer('one', 1_000));
    s.put(k(2), {}, {}, answer('two', 1_000));
    s.put(k(3), {}, {}, answer('three', 1_000));
    expect(s.find(k(1), {}).answer?.body.toString()).toBe('one'); // 1 is now the most recent
    s.put(k(4), {}, {}, answer('four', 1_000));
    expect(evicted).toBe(1);
    expect(s.find(k(2), {}).answer).toBeUndefined();
    expect(s.find(k(1), {}).answer).toBeDefined();
    expect(s.stats(3 * each)).toEqual({ objects: 3, bytes: 3 * each, maxBytes: 3 * each });
    // Larger than the whole budget: not stored, nothing else lost.
    expect(s.put(k(5), {}, {}, answer('huge', 5_000))).toBe(false);
    expect(s.stats(3 * each).objects).toBe(3);
  });

  it('one slot per variant of the fields the answer Varies on; a new Vary replaces the old variants', () => {
    const s = new StoredAnswers(1_000_000, () => undefined);
    const k = primaryKey('/v', 'h', null, '');
    s.put(k, { 'accept-language': 'fr' }, { vary: 'Accept-Language' }, answer('fr'));
    s.put(k, { 'accept-language': 'en' }, { vary: 'accept-language' }, answer('en'));
    expect(s.find(k, { 'accept-language': 'fr' }).answer?.body.toString()).toBe('fr');
    expect(s.find(k, { 'accept-language': 'en' }).answer?.body.toString()).toBe('en');
    expect(s.find(k, { 'accept-language': 'de' })).toEqual({ answer: undefined, known: true });
    expect(s.find(k, {}).answer).toBeUndefined();
    s.put(k, { accept: 'a' }, { vary: 'Accept' }, answer('by accept'));
    expect(s.find(k, { 'accept-language': 'fr', accept: 'b' }).answer).toBeUndefined();
    expect(s.stats(1).objects).toBe(1);
  });

  it('purges by exact URL, by prefix and by room', () => {
    const s = new StoredAnswers(1_000_000, () => undefined);
    s.put(primaryKey('/blog/1', 'h', '1', ''), {}, {}, answer('a'));
    s.put(primaryKey('/blog/1', 'h', '2', ''), {}, {}, answer('b'));
    s.put(primaryKey('/blog/10', 'h', '1', ''), {}, {}, answer('c'));
    s.put(primaryKey('/news', 'h', '1', ''), {}, {}, answer('d'));
    expect(s.purge((url) => url === '/blog/1')).toBe(2);
    expect(s.purge((_url, room) => room === '1')).toBe(2);
    expect(s.stats(1).objects).toBe(0);
  });
});

describe('the one byte range a hit answers', () => {
  const r = (value: string, size = 100, more: string[] = []) => byteRange(['Range', value, ...more], size);
  it('a-b, a-, -n; anything else gets the whole body', () => {
    expect(r('bytes=0-3')).toEqual({ from: 0, to: 3 });
    expect(r('bytes=90-200')).toEqual({ from: 90, to: 99 });
    expect(r('bytes=10-')).toEqual({ from: 10, to: 99 });
    expect(r('bytes=-10')).toEqual({ from: 90, to: 99 });
    expect(r('bytes=-200')).toEqual({ from: 0, to: 99 });
    for (const bad of ['bytes=0-1,5-6', 'bytes=5-1', 'bytes=100-', 'bytes=-0', 'items=0-1', 'bytes=-', 'bytes=1e3-']) expect(r(bad), bad).toBeNull();
    expect(r('bytes=0-1', 100, ['If-Range', '"e"'])).toBeNull();
    expect(byteRange(['Range', 'bytes=0-1', 'range', 'bytes=2-3'], 100)).toBeNull();
    expect(byteRange([], 100)).toBeNull();
  });
});
