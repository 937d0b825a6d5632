// The kit's proof check (src/backend-kit/proofs.ts) against proofs made by roomgate's own signer
// (BackendCalls, src/runtime/backend-calls.ts): taken once, refused for a replay, another purpose,
// another destination, a stale timestamp, a key that is not the backend's; keys rotate per call.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { backendKeys } from '../../src/http/call-proof.js';
import { createVerifier, KeyFormatError, keysFromEnv, parseKeys, ReplayCache } from '../../src/backend-kit/index.js';
import { SECRETS, signed } from './clients.js';
import { ROOT } from '../support/processes.js';

/** The proof vectors both kits check (test/python/proof-vectors.ts writes them; the Python kit's tests read the same file). */
const VECTORS = JSON.parse(readFileSync(join(ROOT, 'python/tests/fixtures/call-proofs.json'), 'utf8')) as { name: string; backendId: string; keys: string[]; purpose: string; headers: Record<string, string>; body: string; nowS: number }[];

const lower = (h: Record<string, string>): Record<string, string> => Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));
const call = { id: 'm-1', room: 'r1', epoch: '7', body: '{"a":1}' };

describe('backend kit: proofs', () => {
  it.each(VECTORS.map((v) => [v.name, v] as const))('takes the shared proof vector: %s', (_, v) => {
    const verify = () => createVerifier({ backendId: v.backendId, keys: () => v.keys, now: () => v.nowS * 1000 });
    const h = lower(v.headers);
    // The resume handshake's message id is its handoff id (X-Roomgate-Resume), as upgrade.ts passes it.
    const fields = h['x-roomgate-resume'] === undefined ? {} : { id: h['x-roomgate-resume'] };
    const purpose = v.purpose as Parameters<ReturnType<typeof verify>>[2];
    expect(verify()(h, Buffer.from(v.body, 'utf8'), purpose, fields)).toBeNull();
    expect(verify()(h, Buffer.from(`${v.body} `, 'utf8'), purpose, fields)).toBe('bad-signature');
    expect(verify()(h, Buffer.from(v.body, 'utf8'), purpose === 'push' ? 'handoff-resume-socket' : 'push', fields)).toBe('bad-signature');
  });

  it('the shared vectors include the resume handshake', () => {
    expect(VECTORS.map((v) => v.purpose)).toContain('handoff-resume-socket');
  });

  it('takes roomgate\'s proof once; a replay (also with the header varied) is refused', () => {
    const verify = createVerifier({ backendId: 'b1', keys: () => backendKeys(SECRETS, 'b1') });
    const h = lower(signed(SECRETS, 'push', 'b1', call));
    expect(verify(h, Buffer.from(call.body), 'push')).toBeNull();
    expect(verify(h, Buffer.from(call.body), 'push')).toBe('replayed');
    expect(verify({ ...h, 'x-roomgate-signature': ` ${h['x-roomgate-signature']},v2=00000000:00` }, Buffer.from(call.body), 'push')).toBe('replayed');
  });

  it('refuses another purpose, another body, another destination, a stale proof, no keys', () => {
    const verify = createVerifier({ backendId: 'b1', keys: () => backendKeys(SECRETS, 'b1') });
    const h = lower(signed(SECRETS, 'push', 'b1', call));
    expect(verify(h, Buffer.from(call.body), 'handoff-import')).toBe('bad-signature');
    expect(verify(h, Buffer.from('{"a":2}'), 'push')).toBe('bad-signature');
    expect(verify(lower(signed(SECRETS, 'push', 'b2', call)), Buffer.from(call.body), 'push')).toBe('wrong-destination');
    // Made for b2 but naming b1: b2's key signed it, b1's keys do not pass it.
    expect(verify({ ...lower(signed(SECRETS, 'push', 'b2', call)), 'x-roomgate-destination': 'b1' }, Buffer.from(call.body), 'push')).toBe('bad-signature');
    const later = createVerifier({ backendId: 'b1', keys: () => backendKeys(SECRETS, 'b1'), now: () => Date.now() + 61_000 });
    expect(later(h, Buffer.from(call.body), 'push')).toBe('stale');
    expect(createVerifier({ backendId: 'b1', keys: () => [] })(h, Buffer.from(call.body), 'push')).toBe('unsigned');
    const { 'x-roomgate-signature': _, ...bare } = h;
    expect(verify(bare, Buffer.from(call.body), 'push')).toBe('unsigned');
  });

  it('rotation: keys are read per call; both overlap while roomgate signs with both, the old one then fails', () => {
    const next = 'kit-test-secret-two-fedcba9876543210';
    let keys = backendKeys(SECRETS, 'b1');
    const verify = createVerifier({ backendId: 'b1', keys: () => keys });
    const byNew = lower(signed([next], 'push', 'b1', { ...call, id: 'n-1' }));
    expect(verify(byNew, Buffer.from(call.body), 'push')).toBe('bad-signature');
    keys = backendKeys([...SECRETS, next], 'b1');
    expect(verify(lower(signed([next], 'push', 'b1', { ...call, id: 'n-2' })), Buffer.from(call.body), 'push')).toBeNull();
    expect(verify(lower(signed([...SECRETS, next], 'push', 'b1', { ...call, id: 'n-3' })), Buffer.from(call.body), 'push')).toBeNull();
    keys = backendKeys([next], 'b1');
    expect(verify(lower(signed(SECRETS, 'push', 'b1', { ...call, id: 'n-4' })), Buffer.from(call.body), 'push')).toBe('bad-signature');
  });

  it('keys: a text that is not a key is refused naming its place, never its text; the file wins over the variable', () => {
    const [key] = backendKeys(SECRETS, 'b1') as [string];
    expect(parseKeys(`${key},\n${key}`)).toEqual([key, key]);
    expect(() => parseKeys(`${key},secret-text`)).toThrow(KeyFormatError);
    expect(() => parseKeys(`${key},secret-text`)).toThrow(/key 2 of 2/);
    expect(() => parseKeys('secret-text')).not.toThrow(/secret-text/);
    expect(keysFromEnv({ ROOMGATE_BACKEND_KEYS: key })).toEqual([key]);
    expect(keysFromEnv({})).toEqual([]);
  });

  it('the replay cache is bounded and forgets past its ttl', () => {
    const cache = new ReplayCache(1_000, 2);
    expect([cache.take('a', 0), cache.take('b', 0), cache.take('a', 10)]).toEqual([true, true, false]);
    expect(cache.take('c', 20)).toBe(true);
    expect(cache.size).toBe(2);
    expect(cache.take('a', 30)).toBe(true); // pushed out by the bound
    expect(cache.take('b', 2_000)).toBe(true); // past the ttl
  });
});
