// The client address a worker believes (src/http/forwarded-peer.ts): the primary's header only with
// the primary's key and only on a loopback connection; otherwise the connection's own peer. The
// same through real processes: test/integration/drain-token-workers.test.ts.
import type { IncomingMessage } from 'node:http';
import { describe, expect, it } from 'vitest';
import { clientAddress, forwardedPeerHeaders, isPeerHeader, newPeerKey, PEER_HEADER, PEER_KEY_HEADER } from '../../src/http/forwarded-peer.js';

const KEY = newPeerKey();
const request = (peer: string, headers: Record<string, string> = {}): IncomingMessage => ({ socket: { remoteAddress: peer }, headers }) as unknown as IncomingMessage;

describe('clientAddress', () => {
  it("is the forwarded address with this worker's key on a loopback connection", () => {
    expect(clientAddress(request('127.0.0.1', { [PEER_HEADER]: '10.1.2.3', [PEER_KEY_HEADER]: KEY }), KEY)).toBe('10.1.2.3');
    expect(clientAddress(request('::ffff:127.0.0.1', { [PEER_HEADER]: 'fd00::7', [PEER_KEY_HEADER]: KEY }), KEY)).toBe('fd00::7');
  });

  it('is the connection itself otherwise: no key here, a wrong or missing key, a connection not from loopback, a forwarded value that is no address', () => {
    const forwarded = { [PEER_HEADER]: '10.1.2.3', [PEER_KEY_HEADER]: KEY };
    expect(clientAddress(request('127.0.0.1', forwarded), undefined)).toBe('127.0.0.1');
    expect(clientAddress(request('127.0.0.1', { ...forwarded, [PEER_KEY_HEADER]: `${KEY}x` }), KEY)).toBe('127.0.0.1');
    expect(clientAddress(request('127.0.0.1', { [PEER_HEADER]: '10.1.2.3' }), KEY)).toBe('127.0.0.1');
    expect(clientAddress(request('10.9.9.9', forwarded), KEY)).toBe('10.9.9.9');
    expect(clientAddress(request('127.0.0.1', { ...forwarded, [PEER_HEADER]: 'evil.example' }), KEY)).toBe('127.0.0.1');
  });

  it('the primary sends the connection\'s peer and its key, and names the headers it owns', () => {
    expect(forwardedPeerHeaders(request('10.4.4.4'), KEY)).toEqual({ [PEER_HEADER]: '10.4.4.4', [PEER_KEY_HEADER]: KEY });
    expect([PEER_HEADER, PEER_KEY_HEADER, 'x-roomgate-worker'].map(isPeerHeader)).toEqual([true, true, false]);
    expect(newPeerKey()).not.toBe(KEY);
  });
});
