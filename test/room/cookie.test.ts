import { describe, it, expect } from 'vitest';
import { getCookie, serializeRoomCookie } from '../../src/room/cookie.js';

describe('getCookie', () => {
  it('finds a cookie among several', () => {
    const h = 'sessionid=abc; csrftoken=def; room=lobby.kx1.sig; theme=dark';
    expect(getCookie(h, 'room')).toBe('lobby.kx1.sig');
    expect(getCookie(h, 'sessionid')).toBe('abc');
    expect(getCookie(h, 'theme')).toBe('dark');
    expect(getCookie(h, 'missing')).toBeUndefined();
  });

  it('tolerates missing and extra spaces/tabs', () => {
    expect(getCookie('a=1;b=2', 'a')).toBe('1');
    expect(getCookie('a=1;b=2', 'b')).toBe('2');
    expect(getCookie('  a = 1 ;\tb=  2  ;  ', 'b')).toBe('2');
    expect(getCookie(' a = 1 ', 'a')).toBe('1');
  });

  it('returns the first of duplicate names', () => {
    expect(getCookie('room=first; other=x; room=second', 'room')).toBe('first');
  });

  it('does not match a name that merely ends (or starts) with the wanted name', () => {
    expect(getCookie('xroom=1; room=2', 'room')).toBe('2');
    expect(getCookie('roomx=1; room=2', 'room')).toBe('2');
    expect(getCookie('xroom=1; roomx=3', 'room')).toBeUndefined();
  });

  it('is case-sensitive', () => {
    expect(getCookie('Room=1; room=2', 'room')).toBe('2');
  });

  it('strips one pair of surrounding double quotes', () => {
    expect(getCookie('room="lobby:abc"; a=1', 'room')).toBe('lobby:abc');
    expect(getCookie('room=""', 'room')).toBe('');
    expect(getCookie('room="', 'room')).toBe('"'); // a lone quote is not a quoted value
    expect(getCookie('room="a', 'room')).toBe('"a');
  });

  it('keeps "=" inside values', () => {
    expect(getCookie('a=b=c; room=x=y', 'room')).toBe('x=y');
    expect(getCookie('a=b=c; room=x=y', 'a')).toBe('b=c');
  });

  it('handles missing values and valueless pairs', () => {
    expect(getCookie('room=; a=1', 'room')).toBe('');
    expect(getCookie('room; a=1', 'room')).toBeUndefined(); // no '=': not a cookie named room
    expect(getCookie('room; room=2', 'room')).toBe('2');
    expect(getCookie('=x; room=2', 'room')).toBe('2');
  });

  it('handles no header, an empty header and garbage', () => {
    expect(getCookie(undefined, 'room')).toBeUndefined();
    expect(getCookie('', 'room')).toBeUndefined();
    expect(getCookie(';;;', 'room')).toBeUndefined();
    expect(getCookie('===;;=;', 'room')).toBeUndefined();
    expect(getCookie('room', 'room')).toBeUndefined();
    expect(getCookie('ünï=cödé; room=ok', 'room')).toBe('ok');
    expect(getCookie('__proto__=1', '__proto__')).toBe('1');
    expect(getCookie('a=1', '')).toBeUndefined();
    expect(getCookie('a;'.repeat(50_000) + 'room=late', 'room')).toBe('late');
    expect(getCookie('a;'.repeat(50_000), 'room')).toBeUndefined();
  });
});

describe('serializeRoomCookie', () => {
  it('writes the attributes in order, with Max-Age', () => {
    expect(serializeRoomCookie('rg_room', 'lobby.kx1.sig', { maxAgeS: 3600, secure: false })).toBe(
      'rg_room=lobby.kx1.sig; Path=/; Max-Age=3600; HttpOnly; SameSite=Lax',
    );
  });

  it('adds Secure when asked', () => {
    expect(serializeRoomCookie('rg_room', 'v', { maxAgeS: 60, secure: true })).toBe(
      'rg_room=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure',
    );
  });

  it('omits Max-Age for a session cookie (maxAgeS 0)', () => {
    expect(serializeRoomCookie('rg_room', 'room:42:1hZz:sig', { maxAgeS: 0, secure: true })).toBe(
      'rg_room=room:42:1hZz:sig; Path=/; HttpOnly; SameSite=Lax; Secure',
    );
  });

  it('refuses names and values that would break or inject into the header', () => {
    const o = { maxAgeS: 0, secure: false };
    expect(() => serializeRoomCookie('rg room', 'v', o)).toThrow(TypeError);
    expect(() => serializeRoomCookie('', 'v', o)).toThrow(TypeError);
    expect(() => serializeRoomCookie('a=b', 'v', o)).toThrow(TypeError);
    expect(() => serializeRoomCookie('rg', 'x; Domain=evil.example', o)).toThrow(TypeError);
    expect(() => serializeRoomCookie('rg', 'a\r\nSet-Cookie: x=1', o)).toThrow(TypeError);
    expect(() => serializeRoomCookie('rg', 'café', o)).toThrow(TypeError);
    expect(() => serializeRoomCookie('rg', 'v', { maxAgeS: -1, secure: false })).toThrow(TypeError);
    expect(() => serializeRoomCookie('rg', 'v', { maxAgeS: 1.5, secure: false })).toThrow(TypeError);
  });

  it('round-trips through getCookie', () => {
    const set = serializeRoomCookie('rg_room', 'a.b:c.1x.Zz-_', { maxAgeS: 10, secure: false });
    const pair = set.slice(0, set.indexOf(';'));
    expect(getCookie(`other=1; ${pair}`, 'rg_room')).toBe('a.b:c.1x.Zz-_');
  });
});
