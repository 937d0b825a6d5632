// The fault injector itself (test/support/fault-proxy.ts), against a real echo server on
// loopback: each mode does what the chaos tests rely on, and close() leaves nothing open.
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FaultProxy, closeAllFaultProxies } from '../support/fault-proxy.js';
import { waitFor } from '../support/processes.js';

let echo: net.Server;
const serverSide = new Set<net.Socket>();

beforeAll(async () => {
  echo = net.createServer((s) => {
    serverSide.add(s);
    s.on('error', () => undefined);
    s.on('close', () => serverSide.delete(s));
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
});

afterAll(async () => {
  await closeAllFaultProxies();
  for (const s of serverSide) s.destroy();
  await new Promise((r) => echo.close(r));
});

/** A client connection and everything it received, with the time each byte count was reached. */
function connect(port: number): { socket: net.Socket; got: () => string; events: string[] } {
  const socket = net.connect({ host: '127.0.0.1', port });
  let data = '';
  const events: string[] = [];
  socket.on('data', (c: Buffer) => {
    data += c.toString();
  });
  socket.on('end', () => events.push('end'));
  socket.on('error', (err: NodeJS.ErrnoException) => events.push(err.code ?? err.message));
  socket.on('close', () => events.push('close'));
  return { socket, got: () => data, events };
}

const echoPort = (): number => (echo.address() as net.AddressInfo).port;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('FaultProxy', () => {
  it('passes, delays (in order), stalls and black-holes (holding, then delivering on restore), resets, and closes clean', async () => {
    const p = await FaultProxy.start(echoPort());
    const a = connect(p.port);
    a.socket.write('one');
    await waitFor('echo through pass', 5_000, () => a.got() === 'one');

    await p.delay(300);
    const t0 = Date.now();
    a.socket.write('two');
    a.socket.write('three');
    await waitFor('delayed echo', 5_000, () => a.got() === 'onetwothree');
    // Held 300 ms each way.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(550);

    await p.stall();
    a.socket.write('four');
    const b = connect(p.port); // accepted and connected to the target, but stalled too
    b.socket.write('bee');
    await waitFor('the echo server sees the stalled connection', 5_000, () => serverSide.size === 2);
    await sleep(300);
    expect([a.got(), b.got()]).toEqual(['onetwothree', '']);

    await p.blackhole();
    const c = connect(p.port); // accepted, never connected to the target
    c.socket.write('sea');
    await waitFor('three connections accepted', 5_000, async () => (await p.stats()).accepted === 3);
    await sleep(300);
    expect(serverSide.size, 'a black-holed connection never reaches the target').toBe(2);
    expect([a.got(), b.got(), c.got()]).toEqual(['onetwothree', '', '']);
    expect([a.events, b.events, c.events].flat(), 'no FIN, no RST').toEqual([]);

    await p.restore();
    await waitFor('held bytes delivered in order', 5_000, () => a.got() === 'onetwothreefour' && b.got() === 'bee' && c.got() === 'sea');

    await p.reset();
    await waitFor('every live connection reset', 5_000, () => [a, b, c].every((x) => x.events.includes('ECONNRESET')));
    const d = connect(p.port);
    await waitFor('a new connection is reset too', 5_000, () => d.events.includes('ECONNRESET'));
    await waitFor('the target lost its connections', 5_000, () => serverSide.size === 0);

    await p.restore();
    const e = connect(p.port);
    e.socket.write('again');
    await waitFor('echo after restore', 5_000, () => e.got() === 'again');

    await p.close();
    await waitFor('closed: connection ended', 5_000, () => e.events.includes('close'));
    const f = connect(p.port);
    await waitFor('closed: port no longer listening', 5_000, () => f.events.includes('ECONNREFUSED'));
  });
});
