// A 503 for "no backend can take this" says why, in the answer and (throttled) in the log, so the
// operator reading one response knows what to fix.
import net, { type AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { startGateway, stopAll, waitFor } from '../support/processes.js';

afterAll(stopAll);

/** A loopback port nothing listens on (bound, then closed). */
async function deadPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

describe('no backend available', () => {
  it('the 503 tells the client to retry, with a request id; the log names each backend and why it takes nothing', async () => {
    const gw = await startGateway({ backends: [`solo=http://127.0.0.1:${await deadPort()}`], config: { health: { path: null } } });
    const page = await fetch(`${gw.url}/game/r1/`, { signal: AbortSignal.timeout(10_000) });
    expect(page.status).toBe(503);
    expect(page.headers.get('retry-after')).not.toBeNull();
    const id = page.headers.get('x-request-id');
    expect(await page.text()).toBe(`the service is unavailable, retry shortly\nrequest id: ${id}\n`);
    const raw = await new Promise<string>((resolve) => {
      const s = net.connect(gw.port, '127.0.0.1', () =>
        s.write('GET /ws/live/?room=r2 HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n'),
      );
      let out = '';
      s.on('data', (d: Buffer) => (out += d.toString('latin1')));
      s.on('close', () => resolve(out));
      s.setTimeout(10_000, () => s.destroy());
    });
    expect(raw).toMatch(/^HTTP\/1\.1 503 [^]*\r\n\r\nthe service is unavailable, retry shortly\nrequest id: [0-9a-f]{16}\n$/);
    expect(raw).not.toContain('solo');
    const line = await waitFor('the 503 warning', 5_000, () => gw.logs().find((l) => l.msg === 'no backend available: answering 503'));
    expect(String(line.why)).toMatch(/solo: failed a connection \(refused\)/);
    // The refusal's own line carries the same detail under the request id the client was given.
    const refused = await waitFor('the refusal line', 5_000, () => gw.logs().find((l) => l.msg === 'request refused' && l.requestId === id));
    expect(String(refused.detail)).toContain('solo');
  });
});
