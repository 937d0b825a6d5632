// The proof on roomgate's calls to a backend (src/http/call-proof.ts): each backend holds only its
// own keys, derived from the call secrets and its id; a call is signed with the destination's key
// for every secret, verified with any of the receiver's keys; bound to its purpose, destination,
// message id, room, epoch, time and body.
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { backendKey, backendKeys, keyIdOf, keyProblem, signCall, verifyCall, type CallClaims, type ProofFields } from '../../src/http/call-proof.js';

const A = 'a'.repeat(32);
const B = 'b'.repeat(32);
const NOW = 1_800_000_000_000;
const claims: CallClaims = { purpose: 'push', destination: 'b1', id: 'm-1', room: 'chess', epoch: '7', sender: 'job:t', body: Buffer.from('{"hi":1}') };

function fields(list: string[]): ProofFields {
  const get = (n: string): string | undefined => {
    const i = list.indexOf(n);
    return i === -1 ? undefined : list[i + 1];
  };
  return { timestamp: get('X-Roomgate-Timestamp'), signature: get('X-Roomgate-Signature'), destination: get('X-Roomgate-Destination') };
}

describe('backend keys', () => {
  it('are the documented derivation, so any language can check a printed key', () => {
    const kid = createHmac('sha256', A).update('roomgate-key-id-v1').digest('hex').slice(0, 8);
    expect(keyIdOf(A)).toBe(kid);
    const mac = createHmac('sha256', A).update('roomgate-backend-key-v1\nb1').digest('base64url');
    expect(backendKey(A, 'b1')).toBe(`rgk1.${kid}.${mac}`);
    expect(keyProblem(backendKey(A, 'b1'))).toBeNull();
  });

  it('differ per backend and per secret, and name the secret they come from', () => {
    const [a1, b1] = backendKeys([A, B], 'b1');
    expect(a1).not.toBe(backendKey(A, 'b2'));
    expect(a1?.split('.')[1]).toBe(keyIdOf(A));
    expect(b1?.split('.')[1]).toBe(keyIdOf(B));
    expect(keyIdOf(A)).not.toBe(keyIdOf(B));
  });

  it('refuses a text that is not a key (a call secret given to a backend by mistake)', () => {
    expect(keyProblem(A)).toMatch(/roomgate backend-key ID/);
    expect(keyProblem(`${backendKey(A, 'b1')}x`)).not.toBeNull();
  });
});

describe('call proof', () => {
  it('is the documented HMAC under the destination backend key, so a receiver in any language can check it', () => {
    const f = fields(signCall([A], claims, NOW));
    expect(f.timestamp).toBe(String(NOW / 1000));
    expect(f.destination).toBe('b1');
    const digest = createHash('sha256').update(claims.body).digest('hex');
    const text = `roomgate-call-v2\npush\nb1\nm-1\nchess\n7\njob:t\n${NOW / 1000}\n${digest}`;
    const key = backendKey(A, 'b1');
    expect(f.signature).toBe(`v2=${keyIdOf(A)}:${createHmac('sha256', key).update(text).digest('hex')}`);
  });

  it("passes with the destination's own key, naming the key that matched", () => {
    const f = fields(signCall([A], claims, NOW));
    const verdict = verifyCall([backendKey(A, 'b1')], claims, f, NOW);
    expect(verdict).toEqual({ ok: true, proof: f.signature?.split(':')[1], keyId: keyIdOf(A) });
  });

  it('is signed once per secret while one rotates: a receiver holding either key accepts it', () => {
    const f = fields(signCall([A, B], claims, NOW));
    expect(f.signature?.split(',')).toHaveLength(2);
    expect(verifyCall([backendKey(A, 'b1')], claims, f, NOW).ok).toBe(true);
    expect(verifyCall([backendKey(B, 'b1')], claims, f, NOW).ok).toBe(true);
    expect(verifyCall([backendKey('c'.repeat(32), 'b1')], claims, f, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
  });

  it('never passes at another backend: a call made for b1 and replayed to b2, or signed with b1\'s key naming b2', () => {
    const toB1 = fields(signCall([A], claims, NOW));
    const b2 = { ...claims, destination: 'b2' };
    // Replayed as captured: the field names b1, b2 refuses it for that.
    expect(verifyCall([backendKey(A, 'b2')], b2, toB1, NOW)).toEqual({ ok: false, reason: 'wrong-destination' });
    // The field rewritten to b2: the proof was made with b1's key, b2's key does not match it.
    expect(verifyCall([backendKey(A, 'b2')], b2, { ...toB1, destination: 'b2' }, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
    // What b1 can make with its own key, naming b2 (a compromised pod): refused at b2.
    const digest = createHash('sha256').update(claims.body).digest('hex');
    const forgedText = `roomgate-call-v2\npush\nb2\nm-1\nchess\n7\njob:t\n${NOW / 1000}\n${digest}`;
    const forged = `v2=${keyIdOf(A)}:${createHmac('sha256', backendKey(A, 'b1')).update(forgedText).digest('hex')}`;
    expect(verifyCall([backendKey(A, 'b2')], b2, { timestamp: toB1.timestamp, signature: forged, destination: 'b2' }, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
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
    expect(verifyCall([backendKey(A, 'b1')], { ...claims, ...change }, f, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
  });

  it('refuses a call outside the replay window, either way', () => {
    const key = [backendKey(A, 'b1')];
    const f = fields(signCall([A], claims, NOW));
    expect(verifyCall(key, claims, f, NOW + 60_000).ok).toBe(true);
    expect(verifyCall(key, claims, f, NOW + 61_000)).toEqual({ ok: false, reason: 'stale' });
    expect(verifyCall(key, claims, f, NOW - 61_000)).toEqual({ ok: false, reason: 'stale' });
    expect(verifyCall(key, claims, f, NOW + 200_000, 300).ok).toBe(true);
    expect(verifyCall(key, claims, { ...f, timestamp: '1e9' }, NOW)).toEqual({ ok: false, reason: 'stale' });
  });

  it('refuses an unsigned call, one naming no destination, and every call when the receiver has no key', () => {
    const key = [backendKey(A, 'b1')];
    const ts = String(NOW / 1000);
    expect(verifyCall(key, claims, { timestamp: undefined, signature: undefined, destination: 'b1' }, NOW)).toEqual({ ok: false, reason: 'unsigned' });
    expect(verifyCall([], claims, fields(signCall([A], claims, NOW)), NOW)).toEqual({ ok: false, reason: 'unsigned' });
    expect(verifyCall(key, claims, { ...fields(signCall([A], claims, NOW)), destination: undefined }, NOW)).toEqual({ ok: false, reason: 'wrong-destination' });
    expect(verifyCall(key, claims, { timestamp: ts, signature: 'v2=', destination: 'b1' }, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
    expect(verifyCall(key, claims, { timestamp: ts, signature: 'garbage', destination: 'b1' }, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
    // The version-1 proof (under the call secret itself) is no longer taken.
    const v1 = createHmac('sha256', A).update(`roomgate-call-v1\npush\nm-1\nchess\n7\njob:t\n${ts}\n${createHash('sha256').update(claims.body).digest('hex')}`).digest('hex');
    expect(verifyCall(key, claims, { timestamp: ts, signature: `v1=${v1}`, destination: 'b1' }, NOW)).toEqual({ ok: false, reason: 'bad-signature' });
  });
});
