// proxy.rewriteLocation's rule (src/http/location.ts): only an absolute Location or Refresh URL
// naming the backend's own scheme, host and port is pointed at the public origin; hostile or
// foreign values pass unchanged and never throw.
import { describe, expect, it } from 'vitest';
import { answerFieldValue, locationTarget, rewrittenUrl, type LocationTarget } from '../../src/http/location.js';

const t = locationTarget({ host: '127.0.0.1', port: 8102 }, 'https', 'example.com') as LocationTarget;

describe('Location rewrite', () => {
  it.each([
    ['http://127.0.0.1:8102/internal', 'https://example.com/internal'],
    ['HTTP://127.0.0.1:8102/a?b=1#c', 'https://example.com/a?b=1#c'],
    ['http://127.0.0.1:8102', 'https://example.com'],
    ['http://127.0.0.1:8102?q', 'https://example.com?q'],
    ['http://127.0.0.1:8102/%2e%2e/x y', 'https://example.com/%2e%2e/x y'],
  ])('%s -> %s', (from, to) => expect(answerFieldValue('Location', from, t)).toBe(to));

  it.each([
    '/internal',
    'internal',
    '//127.0.0.1:8102/x',
    'http://127.0.0.1/x',
    'http://127.0.0.1:81020/x',
    'http://127.0.0.1:8103/x',
    'https://127.0.0.1:8102/x',
    'http://user@127.0.0.1:8102/x',
    'http://127.0.0.1:8102@evil.example/x',
    'http://evil.example/?http://127.0.0.1:8102/',
    'http://127.0.0.1.evil.example:8102/',
    'http://[127.0.0.1:8102/x',
    'http://127.0.0.1:8102:80/x',
    'javascript:alert(1)',
    '',
    ' ',
    'http://',
    '\u0000http://127.0.0.1:8102/',
  ])('%j stays unchanged', (value) => {
    expect(answerFieldValue('location', value, t)).toBe(value);
  });

  it('the default port of the scheme, IPv6 and names case-insensitively', () => {
    const v6 = locationTarget({ host: '::1', port: 80 }, 'http', 'a.example:8080') as LocationTarget;
    expect(rewrittenUrl('http://[::1]/x', v6)).toBe('http://a.example:8080/x');
    expect(rewrittenUrl('http://[::1]:80/x', v6)).toBe('http://a.example:8080/x');
    const name = locationTarget({ host: 'App.internal', port: 443, tls: true }, 'https', 'example.com') as LocationTarget;
    expect(rewrittenUrl('https://app.INTERNAL/x', name)).toBe('https://example.com/x');
    expect(rewrittenUrl('http://app.internal/x', name)).toBeNull();
  });

  it('Refresh: the URL after the delay, quoted or not; other fields and other Refresh forms unchanged', () => {
    expect(answerFieldValue('Refresh', '5; url=http://127.0.0.1:8102/next', t)).toBe('5; url=https://example.com/next');
    expect(answerFieldValue('refresh', "0;URL='http://127.0.0.1:8102/n'", t)).toBe("0;URL='https://example.com/n'");
    expect(answerFieldValue('Refresh', '3, http://127.0.0.1:8102/', t)).toBe('3, https://example.com/');
    expect(answerFieldValue('Refresh', '5', t)).toBe('5');
    expect(answerFieldValue('Refresh', 'soon; url=http://127.0.0.1:8102/', t)).toBe('soon; url=http://127.0.0.1:8102/');
    expect(answerFieldValue('Content-Location', 'http://127.0.0.1:8102/x', t)).toBe('http://127.0.0.1:8102/x');
    expect(answerFieldValue('Link', '<http://127.0.0.1:8102/x>', t)).toBe('<http://127.0.0.1:8102/x>');
  });

  it('no public Host, or an unusable one: no rewrite', () => {
    expect(locationTarget({ host: '127.0.0.1', port: 8102 }, 'https', undefined)).toBeNull();
    expect(locationTarget({ host: '127.0.0.1', port: 8102 }, 'https', 'a@b')).toBeNull();
    expect(locationTarget({ host: '127.0.0.1', port: 8102 }, 'https', 'a/b')).toBeNull();
  });
});
