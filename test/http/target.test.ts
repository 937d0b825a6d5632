// The canonical target and the reserved paths (src/http/target.ts), pure: every spelling a client
// may use to reach the backend's push receiver comes to the one form, and is refused there.
import { describe, expect, it } from 'vitest';
import { canonicalTarget, createTargetRule } from '../../src/http/target.js';

const canon = (url: string): string => {
  const v = canonicalTarget(url);
  if (!v.ok) throw new Error(`refused ${url}: ${v.body}`);
  return v.url;
};

describe('canonicalTarget', () => {
  it('leaves an ordinary target as it is, the same string', () => {
    const url = '/game/chess/?room=a%20b&x=%2F..//';
    const v = canonicalTarget(url);
    expect(v).toEqual({ ok: true, url });
    for (const u of ['/', '/ws/live/', '/a/b.c/d', '/.well-known/x', '/a/.hidden', '/a/b..c', '/a.../']) expect(canon(u)).toBe(u);
  });

  it('decodes unreserved escapes and upper-cases the others', () => {
    expect(canon('/%61ccount/%7Euser/%2d%2E%5f')).toBe('/account/~user/-._');
    expect(canon('/caf%c3%a9/%3cx')).toBe('/caf%C3%A9/%3Cx');
    expect(canon('/_roomgate/%70ush')).toBe('/_roomgate/push');
  });

  it('merges repeated slashes and resolves dot segments, never above the root', () => {
    expect(canon('//_roomgate//push')).toBe('/_roomgate/push');
    expect(canon('/x/../_roomgate/push')).toBe('/_roomgate/push');
    expect(canon('/x/%2e%2e/_roomgate/push')).toBe('/_roomgate/push');
    expect(canon('/../../a/./b/')).toBe('/a/b/');
    expect(canon('/a/b/..')).toBe('/a/');
    expect(canon('/a/b/.')).toBe('/a/b/');
    expect(canon('/..')).toBe('/');
    expect(canon('/a/..?q=/../')).toBe('/?q=/../');
  });

  it.each([
    ['/a%2Fb', 'an encoded "/"'],
    ['/a%2fb', 'an encoded "/"'],
    ['/a%5Cb', 'an encoded "/" or "\\"'],
    ['/a%5cb', 'an encoded "/" or "\\"'],
    ['/a\\b', 'a backslash'],
    ['/a%00b', 'an encoded control character, space or DEL'],
    ['/a%zzb', 'a malformed percent-escape'],
    ['/a%2', 'a malformed percent-escape'],
    ['/a%', 'a malformed percent-escape'],
    ['/_roomgate/push#x', 'a "#"'],
    ['/a?b#c', 'a "#"'],
  ])('refuses %s with 400', (url, why) => {
    const v = canonicalTarget(url);
    expect(v.ok).toBe(false);
    if (!v.ok) {
      expect(v.status).toBe(400);
      expect(v.body).toContain(why);
    }
  });

  // Hardening 3, item 3: escapes a router may trim, match `$` before or fold (src/http/target.ts).
  it.each(['/_roomgate/push%0A', '/_roomgate/push%0a', '/_roomgate/push%20', '/_roomgate/push%09', '/a%0Db', '/a%1Fb', '/a%7Fb', '/a%7fb', '/%20', '/r/42/a%20b'])(
    '%s: an escaped control byte, space or DEL is 400',
    (url) => {
      expect(canonicalTarget(url)).toEqual({ ok: false, status: 400, body: 'an encoded control character, space or DEL in the request path\n' });
    },
  );

  it.each([
    '/_roomgate/push%C0%AF', // overlong "/"
    '/a%C1%81', // overlong "A"
    '/a%E0%80%AF', // overlong "/" in three bytes
    '/a%F0%80%80%AF', // overlong "/" in four bytes
    '/a%ED%A0%80', // a UTF-16 surrogate (U+D800)
    '/a%F4%90%80%80', // above U+10FFFF
    '/a%FF',
    '/a%80', // a continuation byte without a lead
    '/a%C3', // truncated at the end
    '/a%C3b', // truncated by a character
    '/a%C3%28', // not a continuation byte
    '/a%F0%9F%8E/b', // truncated by a slash
    '/a%E9t%E9', // Latin-1
  ])('%s: escapes that are not UTF-8 are 400', (url) => {
    expect(canonicalTarget(url)).toEqual({ ok: false, status: 400, body: 'a percent-escape in the request path that is not UTF-8\n' });
  });

  it('keeps UTF-8 escapes, %3B and %25 as sent (upper-cased); the query is not judged', () => {
    expect(canon('/caf%c3%a9/%F0%9F%8E%B2/%e2%98%83/%EF%BF%BF/%C2%80')).toBe('/caf%C3%A9/%F0%9F%8E%B2/%E2%98%83/%EF%BF%BF/%C2%80');
    expect(canon('/a%3bb/%252F')).toBe('/a%3Bb/%252F');
    expect(canon('/a?q=%20%0A%C0%AF%FF')).toBe('/a?q=%20%0A%C0%AF%FF');
  });

  it('refuses a target that is not a path', () => {
    expect(canonicalTarget('x/y').ok).toBe(false);
  });
});

describe('createTargetRule: reserved paths', () => {
  const rule = createTargetRule({ reserved: ['/_roomgate/push'], pathPrefix: '/r/' });

  it.each([
    '/_roomgate/push',
    '/_roomgate/push/',
    '/_roomgate/push?room=victim',
    '/_roomgate/push/anything',
    '/_ROOMGATE/Push',
    '/_roomgate/%70ush',
    '/_roomgate/%70USH',
    '//_roomgate/push',
    '/x/../_roomgate/push',
    '/./_roomgate/./push',
    '/r/victim/_roomgate/push',
    '/r/victim/_roomgate/push/?a=1',
    '/r/not-a-valid-key!/_roomgate/push',
    '/r//victim/_roomgate/push',
    '/R/victim/_roomgate/push',
    '/_roomgate/push;x',
    '/_roomgate/push;jsessionid=1/',
    '/_roomgate;a=b/push',
    '/_roomgate/push.',
    '/_roomgate/push..',
    '/r/victim/_roomgate/push.',
    // Hardening 3, item 3: the forgiving reading sees through %3B, double encoding and Unicode folds.
    '/_roomgate/push%3B',
    '/_roomgate/Push%3b',
    '/_roomgate/push%3Bx=1/',
    '/_roomgate/pu%C5%BFh', // U+017F LONG S folds to "s"
    '/_ROOMGATE/PU%C5%BFH',
    '/_roomgate/%EF%BD%90ush', // U+FF50 FULLWIDTH p
    '/_roomgate%EF%BC%8Fpush', // U+FF0F FULLWIDTH SOLIDUS
    '/_roomgate%252Fpush',
    '/_roomgate%25252Fpush',
    '/_roomgate%255Cpush',
    '/x/%252E%252E/_roomgate/push',
    '/x/..;/_roomgate/push',
    '/_roomgate/push%2500x',
    '/_roomgate/push%C2%A0', // NO-BREAK SPACE trimmed
    '/_roomgate/push%E2%80%8B', // ZERO WIDTH SPACE trimmed
    '/_roomgate/push%252E',
    '/r/victim/_roomgate/pu%C5%BFh',
    '/r/victim/_roomgate%252Fpush',
  ])('%s: 404 as if nothing were there', (url) => {
    expect(rule(url)).toEqual({ ok: false, status: 404, body: 'not found\n' });
  });

  it.each(['/_roomgate/pushed', '/_roomgate/', '/_roomgate/api/rooms/x/messages', '/r/victim/', '/r/victim/ws/live/', '/game/_roomgate/push', '/?next=/_roomgate/push', '/a;v=1', '/_roomgate/push.html'])(
    '%s passes',
    (url) => {
      expect(rule(url)).toEqual({ ok: true, url });
    },
  );

  // Hardening 3, item 5: behind the per-tab prefix roomgate's own paths are never the app's.
  it.each([
    '/r/42/_roomgate/api/online',
    '/r/42/_roomgate',
    '/r/42/_roomgate/',
    '/r/42/_roomgate/lobby?x=1',
    '/r/42/_ROOMGATE/status',
    '/r/42/healthz',
    '/r/42/healthz?probe=1',
    '/r/42/healthz/',
    '/r/42/HEALTHZ',
    '/r/42/healthz;x',
    '/r/42/healthz.',
    '/r/42/%68ealthz',
    '/r/42/readyz',
    '/r/42/readyz/deeper',
    '/r/42/x/../healthz',
    '/r/not-a-key!/healthz',
    '/r/42/_roomgate%252Fapi/online',
    '/r/42/healthz%3B',
    '/r/42/health%EF%BD%9A',
  ])('%s: 404 behind the per-tab prefix', (url) => {
    expect(rule(url)).toEqual({ ok: false, status: 404, body: 'not found\n' });
  });

  it.each(['/healthz', '/readyz?x=1', '/_roomgate/api/online', '/_roomgate/lobby', '/r/42/healthzz', '/r/42/a/healthz', '/r/42/_roomgatex/a', '/r/42/readyz-page', '/a%3Bb', '/files/a%252Fb', '/_roomgate/pushed%3B', '/_roomgate/%C3%A9', '/caf%C3%A9'])(
    '%s passes (roomgate answers the unprefixed own paths itself)',
    (url) => {
      expect(rule(url)).toEqual({ ok: true, url });
    },
  );

  it('without the path-prefix source only the path itself is reserved', () => {
    const noPrefix = createTargetRule({ reserved: ['/_roomgate/push'], pathPrefix: null });
    expect(noPrefix('/r/victim/_roomgate/push').ok).toBe(true);
    expect(noPrefix('/_roomgate/push').ok).toBe(false);
    expect(noPrefix('/r/42/healthz').ok).toBe(true);
    expect(noPrefix('/r/42/_roomgate/api/online').ok).toBe(true);
  });

  it('a configured push path with a trailing slash reserves the same paths', () => {
    const slash = createTargetRule({ reserved: ['/hooks/push/'], pathPrefix: '/r/' });
    expect(slash('/hooks/push').ok).toBe(false);
    expect(slash('/hooks/push/').ok).toBe(false);
    expect(slash('/hooks/pushy').ok).toBe(true);
  });
});
