// An HTTP/2 client session to a gateway's TLS port, resolved once the server's settings arrived
// (extended CONNECT needs them); rejected after `timeoutMs`.
import http2, { type ClientHttp2Session } from 'node:http2';
import type { Duplex } from 'node:stream';
import tls from 'node:tls';

/** A session to `authority` over the connection `createConnection` makes. */
export function openH2(authority: string, createConnection: () => Duplex, timeoutMs = 5_000, options: http2.ClientSessionOptions = {}): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = http2.connect(authority, { ...options, createConnection });
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error('h2 connect timed out'));
    }, timeoutMs);
    s.once('remoteSettings', () => {
      clearTimeout(t);
      resolve(s);
    });
    s.once('error', (err) => {
      clearTimeout(t);
      reject(err);
    });
  });
}

/** A session to the gateway on 127.0.0.1:`port` as a.test (the name only for SNI and :authority). */
export function h2Session(port: number, ca: Buffer): Promise<ClientHttp2Session> {
  return openH2(`https://a.test:${port}`, () => tls.connect({ host: '127.0.0.1', port, servername: 'a.test', ca, ALPNProtocols: ['h2'] }));
}
