// The proof on roomgate's calls to a backend (src/http/call-proof.ts): made with every configured
// secret, verified with any; bound to its purpose, message id, room, epoch, time and body.
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signCall, verifyCall, type CallClaims } from '../../src/http/call-proof.js';

const A = 'a'.repeat(32);
const B = 'b'.repeat(32);
const NOW = 1_800_000_000_000;
const claims: CallClaims = { purpose: 'push', id: 'm-1', room: 'chess', epoch: '7', sender: 'job:t', body: Buffer.from('{"hi":1}') };

function fields(list: string[]): { timestamp: string | undefined; signature: string | undefined } {
  const get = (n: string): string | undefined => {
    const i = list.indexOf(n);
    return i === -1 ? undefined : list[i + 1];
  };
  return { timestamp: get('X-Roomgate-Timestamp'), signature: get('X-Roomgate-Signature') };
}

describe('call proof', () => {
  it('is the documented HMAC, so a receiver in any language can check it', () => {
    const f = fields(signCall([A], claims, NOW));
    expect(f.timestamp).toBe(String(NOW / 1000));
    const digest = createHash('sha256').update(claims.body).digest('hex');
    const text = `roomgate-call-v1\npush\nm-1\nchess\n7\njob:t\n${NOW / 1000}\n${digest}`;
    expect(f.signature).toBe(`v1=${createHmac('sha256', A).update(text).digest('hex')}`);
  });

  it('passes with the secret it was made with', () => {
    const f = fields(signCall([A], claims, NOW));
    expect(verifyCall([A], claims, f, NOW)).toEqual({ ok: true, proof: f.signature?.slice(3) });
  });

  it('is signed with every secret while one rotates: a receiver holding either accepts it', () => {
    const f = fields(signCall([A, B], claims, NOW));
    expect(f.signature?.split(',')).toHaveLength(2);
    expect(verifyCall([A], claims, f, NOW).ok).toBe(true);
    expect(verifyCall([B], claims, f, NOW).ok).toBe(true);
    expect(verifyCall(['c'.repeat(32)], claims, f, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
  });

  it.each<[string, Partial<CallClaims>]>([
    ['another purpose', { purpose: 'push-fanout' }],
    ['another message id', { id: 'm-2' }],
    ['another room', { room: 'checkers' }],
    ['another epoch', { epoch: '8' }],
    ['another sender', { sender: 'someone:else' }],
    ['another body', { body: Buffer.from('{"hi":2}') }],
  ])('refuses a proof replayed for %s', (_what, change) => {
    const f = fields(signCall([A], claims, NOW));
    expect(verifyCall([A], { ...claims, ...change }, f, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
  });

  it('refuses a call outside the replay window, either way', () => {
    const f = fields(signCall([A], claims, NOW));
    expect(verifyCall([A], claims, f, NOW + 60_000).ok).toBe(true);
    expect(verifyCall([A], claims, f, NOW + 61_000)).toEqual({ ok: false, reason: 'stale' });
    expect(verifyCall([A], claims, f, NOW - 61_000)).toEqual({ ok: false, reason: 'stale' });
    expect(verifyCall([A], claims, f, NOW + 200_000, 300).ok).toBe(true);
    expect(verifyCall([A], claims, { ...f, timestamp: '1e9' }, NOW)).toEqual({ ok: false, reason: 'stale' });
  });

  it('refuses an unsigned call, and every call when the receiver has no secret', () => {
    expect(verifyCall([A], claims, { timestamp: undefined, signature: undefined }, NOW)).toEqual({ ok: false, reason: 'unsigned' });
    expect(verifyCall([], claims, fields(signCall([A], claims, NOW)), NOW)).toEqual({ ok: false, reason: 'unsigned' });
    expect(verifyCall([A], claims, { timestamp: String(NOW / 1000), signature: 'v1=' }, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
    expect(verifyCall([A], claims, { timestamp: String(NOW / 1000), signature: 'garbage' }, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
  });
});
