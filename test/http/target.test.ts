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
    expect(canon('/caf%c3%a9/%20x')).toBe('/caf%C3%A9/%20x');
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
    ['/a%00b', 'an encoded NUL'],
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
  ])('%s: 404 as if nothing were there', (url) => {
    expect(rule(url)).toEqual({ ok: false, status: 404, body: 'not found\n' });
  });

  it.each(['/_roomgate/pushed', '/_roomgate/', '/_roomgate/api/rooms/x/messages', '/r/victim/', '/r/victim/ws/live/', '/game/_roomgate/push', '/?next=/_roomgate/push', '/a;v=1', '/_roomgate/push.html'])(
    '%s passes',
    (url) => {
      expect(rule(url)).toEqual({ ok: true, url });
    },
  );

  it('without the path-prefix source only the path itself is reserved', () => {
    const noPrefix = createTargetRule({ reserved: ['/_roomgate/push'], pathPrefix: null });
    expect(noPrefix('/r/victim/_roomgate/push').ok).toBe(true);
    expect(noPrefix('/_roomgate/push').ok).toBe(false);
  });

  it('a configured push path with a trailing slash reserves the same paths', () => {
    const slash = createTargetRule({ reserved: ['/hooks/push/'], pathPrefix: '/r/' });
    expect(slash('/hooks/push').ok).toBe(false);
    expect(slash('/hooks/push/').ok).toBe(false);
    expect(slash('/hooks/pushy').ok).toBe(true);
  });
});
