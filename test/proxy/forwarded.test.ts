import { describe, expect, it } from 'vitest';
import { Forwarding, normalizeAddress } from '../../src/forward/forwarded.js';

const ctx = (peer: string, over = {}) => ({ peer, encrypted: false, strippedPrefix: null, ...over });
const pairs = (flat: string[]) => {
  const out: [string, string][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i]!.toLowerCase(), flat[i + 1]!]);
  return out;
};
const get = (flat: string[], name: string) => pairs(flat).filter(([k]) => k === name).map(([, v]) => v);

describe('forwarded headers', () => {
  const raw = ['Host', 'game.example', 'Origin', 'https://game.example', 'X-Forwarded-For', '6.6.6.6', 'X-Forwarded-Proto', 'https', 'X-Real-IP', '6.6.6.6', 'Forwarded', 'for=6.6.6.6'];

  it('replaces client claims from an untrusted peer; Host and Origin unchanged', () => {
    const f = new Forwarding([]);
    const h = f.headers(raw, ctx('::ffff:198.51.100.9'), false);
    expect(get(h, 'x-forwarded-for')).toEqual(['198.51.100.9']);
    expect(get(h, 'x-forwarded-proto')).toEqual(['http']);
    expect(get(h, 'x-forwarded-host')).toEqual(['game.example']);
    expect(get(h, 'host')).toEqual(['game.example']);
    expect(get(h, 'origin')).toEqual(['https://game.example']);
    expect(get(h, 'x-real-ip')).toEqual([]);
    expect(get(h, 'forwarded')).toEqual([]);
  });

  it('appends to a trusted proxy chain (DJUST_TRUSTED_PROXY_COUNT=1 reads the last entry)', () => {
    const f = new Forwarding(['10.0.0.0/8']);
    const h = f.headers([...raw, 'x-forwarded-for', '7.7.7.7'], ctx('10.1.2.3'), false);
    expect(get(h, 'x-forwarded-for')).toEqual(['6.6.6.6, 7.7.7.7, 10.1.2.3']);
    expect(get(h, 'x-forwarded-proto')).toEqual(['https']);
    expect(f.proto(raw, ctx('10.1.2.3'))).toBe('https');
    expect(f.proto(raw, ctx('11.1.2.3'))).toBe('http');
    expect(f.proto([], ctx('11.1.2.3', { encrypted: true }))).toBe('https');
  });

  it('drops hop-by-hop headers on HTTP but keeps Upgrade on handshakes', () => {
    const f = new Forwarding([]);
    const hs = ['Connection', 'Upgrade, X-Secret', 'Upgrade', 'websocket', 'X-Secret', '1', 'Keep-Alive', '5', 'Sec-WebSocket-Key', 'k'];
    const http = f.headers(hs, ctx('127.0.0.1'), false);
    expect(pairs(http).map(([k]) => k)).toEqual(['sec-websocket-key', 'x-forwarded-for', 'x-forwarded-proto']);
    const ws = f.headers(hs, ctx('127.0.0.1'), true);
    expect(get(ws, 'upgrade')).toEqual(['websocket']);
    expect(get(ws, 'connection')).toEqual(['Upgrade']);
    expect(get(ws, 'x-secret')).toEqual([]);
    expect(get(ws, 'keep-alive')).toEqual([]);
    // Every Connection line names hop-by-hop headers, not only the first.
    const two = f.headers(['Connection', 'keep-alive', 'Connection', 'X-Custom', 'X-Custom', '1', 'X-Other', '2'], ctx('127.0.0.1'), false);
    expect(pairs(two).map(([k]) => k)).toEqual(['x-other', 'x-forwarded-for', 'x-forwarded-proto']);
  });

  it('never lets Connection take away framing, Host or the forwarding headers roomgate sets', () => {
    const f = new Forwarding([]);
    const h = f.headers(
      ['Host', 'x', 'Connection', 'Content-Length, Host, X-Forwarded-For, x-forwarded-proto, X-Other', 'Content-Length', '35', 'X-Other', '1'],
      ctx('127.0.0.1'),
      false,
    );
    expect(get(h, 'content-length')).toEqual(['35']);
    expect(get(h, 'host')).toEqual(['x']);
    expect(get(h, 'x-forwarded-for')).toEqual(['127.0.0.1']);
    expect(get(h, 'x-forwarded-proto')).toEqual(['http']);
    expect(get(h, 'x-other')).toEqual([]);
  });

  it('drops underscore spellings of forwarding headers, which WSGI and ASGI apps read as the real ones', () => {
    for (const trusted of [[], ['127.0.0.1']]) {
      const f = new Forwarding(trusted);
      const h = f.headers(
        ['X_Forwarded_For', '6.6.6.6', 'x_forwarded_proto', 'https', 'X-Forwarded_Host', 'evil', 'X_REAL_IP', '6.6.6.6', 'X_Other', 'kept'],
        ctx('127.0.0.1'),
        false,
      );
      expect(pairs(h)).toEqual([
        ['x_other', 'kept'],
        ['x-forwarded-for', '127.0.0.1'],
        ['x-forwarded-proto', 'http'],
      ]);
    }
  });

  it('announces a stripped prefix', () => {
    const f = new Forwarding(['127.0.0.1']);
    expect(get(f.headers([], ctx('127.0.0.1', { strippedPrefix: '/r/42' }), false), 'x-forwarded-prefix')).toEqual(['/r/42']);
    expect(get(f.headers(['X-Forwarded-Prefix', '/app'], ctx('127.0.0.1', { strippedPrefix: '/r/42' }), false), 'x-forwarded-prefix')).toEqual(['/app/r/42']);
    expect(get(new Forwarding([]).headers(['X-Forwarded-Prefix', '/evil'], ctx('127.0.0.2'), false), 'x-forwarded-prefix')).toEqual([]);
  });

  it('normalizes IPv4-mapped addresses and trusts IPv6 ranges', () => {
    expect(normalizeAddress('::ffff:10.0.0.1')).toBe('10.0.0.1');
    expect(normalizeAddress('::1')).toBe('::1');
    expect(normalizeAddress(undefined)).toBe('unknown');
    const f = new Forwarding(['fd00::/8', '::1']);
    expect(f.isTrusted('fd12::1')).toBe(true);
    expect(f.isTrusted('::1')).toBe(true);
    expect(f.isTrusted('fe80::1')).toBe(false);
    expect(f.isTrusted('unknown')).toBe(false);
  });
});
