// The one token check (src/http/auth.ts) as a table: what an Authorization header carries, and
// which headers pass. Each listener that uses it is tested with real requests in
// test/integration/auth.test.ts.
import { describe, expect, it } from 'vitest';
import { TokenCheck, credential } from '../../src/http/auth.js';

const basic = (userPass: string): string => `Basic ${Buffer.from(userPass, 'utf8').toString('base64')}`;
const T1 = 'first-token-0123456789abcdef';
const T2 = 'second-token-0123456789abcdef';

describe('credential', () => {
  it('reads a Bearer token or a Basic password; the scheme in any case, optional whitespace around', () => {
    expect(credential('Bearer abc')).toBe('abc');
    expect(credential('bearer abc')).toBe('abc');
    expect(credential('BEARER abc')).toBe('abc');
    expect(credential(' \tBearer \t abc \t')).toBe('abc');
    expect(credential(basic('admin:s3cret:with:colons'))).toBe('s3cret:with:colons');
    expect(credential(basic(':tok'))).toBe('tok');
    expect(credential(basic('user:pässwörd'))).toBe('pässwörd');
    expect(credential(`bAsIc ${Buffer.from('u:tok').toString('base64')}`)).toBe('tok');
    // Unpadded base64 is still base64.
    expect(credential(`Basic ${Buffer.from('u:tok').toString('base64').replace(/=+$/, '')}`)).toBe('tok');
  });

  it('nothing for no header, another scheme, no or empty credential, and Basic that is not base64 of user:password in UTF-8', () => {
    for (const h of [
      undefined,
      '',
      'Bearer',
      'Bearer ',
      'Bearer \t ',
      'Bearerabc',
      'abc',
      'Digest abc',
      'Token abc',
      'Basic',
      'Basic !!!',
      'Basic abc$def',
      'Basic a',
      'Basic abcde', // a lone last base64 character
      'Basic ===',
      basic('nocolon'),
      basic('user:'),
      `Basic ${Buffer.from([0x75, 0x3a, 0xff, 0xfe]).toString('base64')}`, // not UTF-8
    ]) {
      expect(credential(h), String(h)).toBeNull();
    }
  });

  it('reads a header of 256 KiB of whitespace in linear time (no backtracking)', () => {
    // Not a speed figure (that is bench/'s): the bound is about 200 times what one linear pass takes
    // here (about 5 ms for the three) and an eighth of what a backtracking (quadratic) pass takes
    // (0.16 s at 16 KiB, so about 40 s at 256 KiB): no slow machine reaches it, a backtracking scan does.
    const n = 256 * 1024;
    const t0 = performance.now();
    const got = [`Bearer${' '.repeat(n)}x`, `Bearer x${' '.repeat(n)}y`, `Basic ${'A'.repeat(n)}!`].map((h) => credential(h));
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(got).toEqual(['x', `x${' '.repeat(n)}y`, null]);
  });
});

describe('TokenCheck', () => {
  const check = new TokenCheck([T1, T2]);

  it('accepts every configured token, as Bearer in any case or as a Basic password with any user name', () => {
    for (const t of [T1, T2]) {
      for (const h of [`Bearer ${t}`, `bearer ${t}`, `BEARER ${t}`, basic(`anyone:${t}`), basic(`:${t}`), `Basic  ${Buffer.from(`x:${t}`).toString('base64')} `]) {
        expect(check.verdict(h), h).toBe('ok');
        expect(check.accepts(h), h).toBe(true);
      }
    }
  });

  it("refuses near misses, other schemes, garbage and empty credentials; 'missing' only without a header", () => {
    expect(check.verdict(undefined)).toBe('missing');
    expect(check.verdict('')).toBe('missing');
    for (const h of [
      `Bearer ${T1.slice(0, -1)}`,
      `Bearer ${T1}x`,
      `Bearer x${T1.slice(1)}`,
      `Bearer ${T1.toUpperCase()}`,
      `Bearer ${T1},${T2}`,
      `Bearer ${T1} ${T2}`,
      T1,
      `Token ${T1}`,
      `Basic ${T1}`, // the token itself, not base64 of user:token
      basic(T1), // no colon: no password
      basic(`${T1}:`), // the token as user name
      'Basic !!!garbage!!!',
      'Bearer ',
      'Bearer',
      ' ',
    ]) {
      expect(check.verdict(h), h).toBe('wrong');
    }
  });

  it('an empty list, or only empty strings, is not configured and accepts nothing', () => {
    for (const none of [new TokenCheck([]), new TokenCheck(['']), new TokenCheck(['', ''])]) {
      expect(none.configured).toBe(false);
      for (const h of ['Bearer ', 'Bearer', basic('u:'), basic(':'), 'Bearer x']) expect(none.accepts(h), h).toBe(false);
    }
    expect(new TokenCheck(['', T1]).configured).toBe(true);
  });
});
