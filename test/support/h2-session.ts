// An HTTP/2 client session to a gateway's TLS port (the name a.test, only for SNI and :authority),
// resolved once the server's settings arrived; rejected after 5 s.
import http2, { type ClientHttp2Session } from 'node:http2';
import tls from 'node:tls';

export function h2Session(port: number, ca: Buffer): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const s = http2.connect(`https://a.test:${port}`, { createConnection: () => tls.connect({ host: '127.0.0.1', port, servername: 'a.test', ca, ALPNProtocols: ['h2'] }) });
    const t = setTimeout(() => {
      s.destroy();
      reject(new Error('h2 connect timed out'));
    }, 5_000);
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
