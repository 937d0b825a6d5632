import { describe, expect, it } from 'vitest';
import { createKeyExtractor, type KeyExtractorOptions } from '../../src/room/extract.js';
import { createPinSigner, createRoomSigner } from '../../src/room/signing.js';
import { createRoomValidator } from '../../src/room/validate.js';
import { configSchema } from '../../src/config/schema.js';

const NOW = 1_800_000_000_000;
const defaults = configSchema.parse({});
const signer = createRoomSigner({ secrets: ['s'.repeat(32)], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 3600 });
const pins = createPinSigner(['s'.repeat(32)], 3600);

function extractor(over: Partial<KeyExtractorOptions> = {}) {
  return createKeyExtractor({
    sources: defaults.room.sources,
    validate: createRoomValidator(defaults.room.pattern),
    queryParam: 'room',
    pathPrefix: '/r/',
    pagePaths: ['/game/{room}/'],
    cookieName: 'roomgate_room',
    signer,
    pinParam: 'roomgate_pin',
    pinSigner: pins,
    ...over,
  });
}

const req = (url: string, cookieHeader?: string, roomHeader?: string | string[]) => ({ url, cookieHeader, roomHeader });

describe('room key extraction', () => {
  const x = extractor();

  it('reads each source', () => {
    expect(x(req('/ws/live/?room=42'), NOW)).toMatchObject({ room: '42', source: 'query', forwardUrl: '/ws/live/?room=42' });
    expect(x(req('/ws/live/?a=1&room=a%3Ab&b=2'), NOW)).toMatchObject({ room: 'a:b', source: 'query' });
    expect(x(req('/r/42/ws/live/'), NOW)).toMatchObject({ room: '42', source: 'path-prefix', forwardUrl: '/ws/live/', strippedPrefix: '/r/42' });
    expect(x(req('/game/7/'), NOW)).toMatchObject({ room: '7', source: 'page-path', forwardUrl: '/game/7/' });
    expect(x(req('/game/7/stats?x=1'), NOW)).toMatchObject({ room: '7', source: 'page-path' });
    expect(x(req('/ws/live/', `a=1; roomgate_room=${signer.sign('9', NOW)}`), NOW)).toMatchObject({ room: '9', source: 'cookie', cookieRoom: '9' });
    expect(x(req('/ws/live/', undefined, 'h1'), NOW)).toMatchObject({ room: 'h1', source: 'header' });
    expect(x(req('/ws/live/', undefined, ['h2', 'h3']), NOW)).toMatchObject({ room: 'h2', source: 'header' });
  });

  it('strips the prefix in every shape and keeps the query', () => {
    expect(x(req('/r/42'), NOW)).toMatchObject({ room: '42', forwardUrl: '/' });
    expect(x(req('/r/42/'), NOW)).toMatchObject({ room: '42', forwardUrl: '/' });
    expect(x(req('/r/42?x=1'), NOW)).toMatchObject({ room: '42', forwardUrl: '/?x=1' });
    expect(x(req('/r/42/game/42/?x=1'), NOW)).toMatchObject({ room: '42', forwardUrl: '/game/42/?x=1', strippedPrefix: '/r/42' });
    expect(x(req('/r//ws/live/'), NOW)).toMatchObject({ room: null, forwardUrl: '/r//ws/live/', strippedPrefix: null });
    expect(x(req('/rooms/42/'), NOW)).toMatchObject({ room: null, forwardUrl: '/rooms/42/' });
  });

  it('takes the first valid source in the configured order', () => {
    const cookie = `roomgate_room=${signer.sign('c', NOW)}`;
    expect(x(req('/r/p/game/g/?room=q', cookie, 'h'), NOW)).toMatchObject({ room: 'p', source: 'path-prefix' });
    expect(x(req('/game/g/?room=q', cookie, 'h'), NOW)).toMatchObject({ room: 'q', source: 'query', cookieRoom: 'c' });
    const hq = extractor({ sources: ['header', 'query'] });
    expect(hq(req('/ws/live/?room=q', cookie, 'h'), NOW)).toMatchObject({ room: 'h', source: 'header', cookieRoom: null });
    // A disabled source is not read, and a prefix source that is off strips nothing.
    expect(hq(req('/r/p/ws/live/', cookie), NOW)).toMatchObject({ room: null, forwardUrl: '/r/p/ws/live/' });
  });

  it('strips a valid prefix even when another source wins', () => {
    const q = extractor({ sources: ['query', 'path-prefix'] });
    expect(q(req('/r/p/ws/live/?room=q'), NOW)).toMatchObject({ room: 'q', forwardUrl: '/ws/live/?room=q', strippedPrefix: '/r/p' });
  });

  it('treats invalid, malformed, forged and expired keys as absent and reports them', () => {
    const long = 'a'.repeat(10_240);
    expect(x(req(`/ws/live/?room=${long}`), NOW)).toMatchObject({ room: null, rejected: [{ source: 'query', reason: 'invalid' }] });
    expect(x(req(`/r/${long}/ws/live/`), NOW)).toMatchObject({ room: null, forwardUrl: `/r/${long}/ws/live/`, rejected: [{ source: 'path-prefix', reason: 'invalid' }] });
    expect(x(req('/ws/live/?room=%E0%A4%A'), NOW).rejected).toEqual([{ source: 'query', reason: 'malformed' }]);
    expect(x(req('/ws/live/?room=a+b'), NOW).rejected).toEqual([{ source: 'query', reason: 'invalid' }]);
    const forged = signer.sign('x', NOW).replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
    expect(x(req('/ws/live/', `roomgate_room=${forged}`), NOW).rejected).toEqual([{ source: 'cookie', reason: 'bad-signature' }]);
    expect(x(req('/ws/live/', `roomgate_room=${signer.sign('x', NOW - 7200_000)}`), NOW).rejected).toEqual([{ source: 'cookie', reason: 'expired' }]);
    expect(x(req('/ws/live/', undefined, long), NOW).rejected).toEqual([{ source: 'header', reason: 'invalid' }]);
    // A bad key does not stop a later valid source.
    expect(x(req(`/ws/live/?room=${long}`, undefined, 'ok'), NOW)).toMatchObject({ room: 'ok', source: 'header', rejected: [{ source: 'query', reason: 'invalid' }] });
  });

  it('a bad cookie behind a winning source is not counted', () => {
    expect(x(req('/ws/live/?room=a', 'roomgate_room=forged.1.x'), NOW)).toMatchObject({ room: 'a', cookieRoom: null, rejected: [] });
  });

  it('prototype names are ordinary keys', () => {
    for (const k of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
      expect(x(req(`/ws/live/?room=${k}`), NOW)).toMatchObject({ room: k, source: 'query' });
    }
    expect(({} as Record<string, unknown>).value).toBeUndefined();
  });

  it('accepts a plain cookie when unsigned cookies are allowed', () => {
    const plain = extractor({ signer: null });
    expect(plain(req('/ws/live/', 'roomgate_room=room-1'), NOW)).toMatchObject({ room: 'room-1', source: 'cookie' });
    expect(plain(req('/ws/live/', 'roomgate_room=a%20b'), NOW).rejected).toEqual([{ source: 'cookie', reason: 'invalid' }]);
  });

  it('honours a custom pattern, query parameter, prefix and page paths', () => {
    const c = extractor({ validate: createRoomValidator('^[0-9]{1,4}$'), queryParam: 'game', pathPrefix: '/room/', pagePaths: ['/play/{room}', '/g/{room}/board/'] });
    expect(c(req('/x?game=12'), NOW)).toMatchObject({ room: '12' });
    expect(c(req('/x?game=abc'), NOW).rejected).toEqual([{ source: 'query', reason: 'invalid' }]);
    expect(c(req('/room/5/ws/live/'), NOW)).toMatchObject({ room: '5', forwardUrl: '/ws/live/' });
    expect(c(req('/play/77'), NOW)).toMatchObject({ room: '77', source: 'page-path' });
    expect(c(req('/g/8/board/'), NOW)).toMatchObject({ room: '8', source: 'page-path' });
    expect(c(req('/g/8/other/'), NOW)).toMatchObject({ room: null });
  });
});

describe('the per-tab room pin', () => {
  const x = extractor();
  const cookie = `roomgate_room=${signer.sign('c', NOW)}`;
  const pin = (room: string, at = NOW): string => encodeURIComponent(pins.sign(room, at));

  it('wins over the cookie (and every other source) and is removed before forwarding', () => {
    expect(x(req(`/ws/live/?roomgate_pin=${pin('p')}`, cookie), NOW)).toMatchObject({ room: 'p', source: 'pin', forwardUrl: '/ws/live/', cookieRoom: 'c', pinRefused: null });
    expect(x(req(`/r/r1/ws/live/?a=1&roomgate_pin=${pin('p')}&room=q&b=2`, cookie, 'h'), NOW)).toMatchObject({ room: 'p', source: 'pin', forwardUrl: '/ws/live/?a=1&room=q&b=2', strippedPrefix: '/r/r1' });
    // Every copy is removed; the first one counts.
    expect(x(req(`/ws/live/?roomgate_pin=${pin('p')}&roomgate_pin=${pin('z')}`), NOW)).toMatchObject({ room: 'p', forwardUrl: '/ws/live/' });
    // A parameter that only ends with the name is the app's.
    expect(x(req(`/ws/live/?xroomgate_pin=${pin('p')}`, cookie), NOW)).toMatchObject({ room: 'c', source: 'cookie', forwardUrl: `/ws/live/?xroomgate_pin=${pin('p')}` });
  });

  it('refuses a forged, expired, malformed or unchecked pin, whatever the order of the sources', () => {
    const forged = pins.sign('p', NOW).replace(/.$/, (c) => (c === 'A' ? 'B' : 'A'));
    expect(x(req(`/ws/live/?roomgate_pin=${forged}`, cookie), NOW)).toMatchObject({ room: null, pinRefused: 'bad-signature', forwardUrl: '/ws/live/', rejected: [{ source: 'pin', reason: 'bad-signature' }] });
    expect(x(req(`/ws/live/?roomgate_pin=${pin('p', NOW - 7200_000)}`, cookie), NOW)).toMatchObject({ room: null, pinRefused: 'expired' });
    expect(x(req('/ws/live/?roomgate_pin=', cookie), NOW)).toMatchObject({ pinRefused: 'malformed' });
    expect(x(req('/ws/live/?roomgate_pin=%E0%A4%A'), NOW)).toMatchObject({ pinRefused: 'malformed' });
    expect(x(req('/ws/live/?roomgate_pin=p.1.x'), NOW)).toMatchObject({ pinRefused: 'bad-signature' });
    // A signed room that room.pattern refuses.
    expect(x(req(`/ws/live/?roomgate_pin=${pin('a b')}`), NOW)).toMatchObject({ pinRefused: 'invalid' });
    // A room cookie's value is no pin (and a pin no cookie): each is MAC'd under its own purpose.
    expect(x(req(`/ws/live/?roomgate_pin=${signer.sign('p', NOW)}`), NOW)).toMatchObject({ pinRefused: 'bad-signature' });
    expect(x(req('/ws/live/', `roomgate_room=${pins.sign('p', NOW)}`), NOW)).toMatchObject({ room: null, rejected: [{ source: 'cookie', reason: 'bad-signature' }] });
    // Behind a winning source it is still checked.
    const late = extractor({ sources: ['query', 'pin', 'cookie'] });
    expect(late(req(`/ws/live/?room=q&roomgate_pin=${forged}`), NOW)).toMatchObject({ pinRefused: 'bad-signature' });
    expect(late(req(`/ws/live/?room=q&roomgate_pin=${pin('p')}`), NOW)).toMatchObject({ room: 'q', source: 'query', forwardUrl: '/ws/live/?room=q', pinRefused: null });
    // No secret to check it with: refused, never trusted.
    expect(extractor({ pinSigner: null })(req(`/ws/live/?roomgate_pin=${pin('p')}`), NOW)).toMatchObject({ pinRefused: 'bad-signature' });
  });

  it('is not read when the pin source is off, and then reaches the app untouched', () => {
    const off = extractor({ sources: ['query', 'cookie'] });
    expect(off(req(`/ws/live/?roomgate_pin=${pin('p')}`, cookie), NOW)).toMatchObject({ room: 'c', forwardUrl: `/ws/live/?roomgate_pin=${pin('p')}`, pinRefused: null });
  });

  it('keeps the URL as it came when there is nothing to remove', () => {
    expect(x(req('/ws/live/?'), NOW)).toMatchObject({ forwardUrl: '/ws/live/?' });
    expect(x(req('/r/1/a?'), NOW)).toMatchObject({ forwardUrl: '/a?' });
    expect(x(req(`/a?roomgate_pin=${pin('p')}&`), NOW)).toMatchObject({ forwardUrl: '/a' });
    expect(x(req(`/a?b=&roomgate_pin=${pin('p')}`), NOW)).toMatchObject({ forwardUrl: '/a?b=' });
  });
});
