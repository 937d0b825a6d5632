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
  it('the 503 body and the log name each backend and why it takes nothing', async () => {
    const gw = await startGateway({ backends: [`solo=http://127.0.0.1:${await deadPort()}`], config: { health: { path: null } } });
    const page = await fetch(`${gw.url}/game/r1/`, { signal: AbortSignal.timeout(10_000) });
    expect(page.status).toBe(503);
    expect(page.headers.get('retry-after')).not.toBeNull();
    expect(await page.text()).toMatch(/^no backend available: .*solo: failed a connection \(refused\)/);
    const raw = await new Promise<string>((resolve) => {
      const s = net.connect(gw.port, '127.0.0.1', () =>
        s.write('GET /ws/live/?room=r2 HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n'),
      );
      let out = '';
      s.on('data', (d: Buffer) => (out += d.toString('latin1')));
      s.on('close', () => resolve(out));
      s.setTimeout(10_000, () => s.destroy());
    });
    expect(raw).toMatch(/^HTTP\/1\.1 503 [^]*\r\n\r\nno backend available: .*solo: /);
    const line = await waitFor('the 503 warning', 5_000, () => gw.logs().find((l) => l.msg === 'no backend available: answering 503'));
    expect(String(line.why)).toContain('solo');
  });
});
