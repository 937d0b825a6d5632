// A bounded run of the differential fuzzer (test/conformance/fuzz.ts) against the real gateway:
// a few thousand mutated requests and backend answers from many loopback addresses at once.
// Silent on success; a failure names the invariant, the case and the command that replays it.
// The long run: `npm run fuzz -- --cases 200000 --seed 123`.
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, stopAll, type GatewayProc } from '../support/processes.js';
import { startRawBackend, type RawBackend } from './backend.js';
import { FUZZ_GATEWAY_CONFIG, FUZZ_PIN_INJECT, runFuzz } from './fuzz.js';
import { aliveProblem } from './raw.js';

let gw: GatewayProc;
let be: RawBackend;
/** The same with room.pinInject on (its own backend: a run replaces its backend's answers). */
let pinGw: GatewayProc;
let pinBe: RawBackend;

beforeAll(async () => {
  [be, pinBe] = await Promise.all([startRawBackend({ keepBytes: false }), startRawBackend({ keepBytes: false })]);
  [gw, pinGw] = await Promise.all([
    startGateway({ backends: [`b1=${be.url}`], config: FUZZ_GATEWAY_CONFIG, env: { ROOMGATE_LOG_LEVEL: 'info' } }),
    startGateway({ backends: [`b1=${pinBe.url}`], config: { ...FUZZ_GATEWAY_CONFIG, ...FUZZ_PIN_INJECT }, env: { ROOMGATE_LOG_LEVEL: 'info' } }),
  ]);
});

afterAll(async () => {
  await stopAll();
  await Promise.all([be?.close(), pinBe?.close()]);
});

describe('differential fuzzer, bounded run', () => {
  it('3,000 cases of a fixed seed keep every invariant', async () => {
    const report = await runFuzz({ port: gw.port, alive: () => aliveProblem(gw) }, be, { seed: 20_261_203, cases: 3_000 });
    expect(report.failures.map((f) => `(${f.invariant}) ${f.detail}\n${f.replay}`)).toEqual([]);
    // The run reached the backend (a fuzzer whose requests all bounce proves little).
    expect(report.backendRequests).toBeGreaterThan(500);
  });

  it('1,500 cases with room.pinInject on keep every invariant', async () => {
    const report = await runFuzz({ port: pinGw.port, alive: () => aliveProblem(pinGw) }, pinBe, { seed: 20_261_206, cases: 1_500 });
    expect(report.failures.map((f) => `(${f.invariant}) ${f.detail}\n${f.replay}`)).toEqual([]);
    expect(report.backendRequests).toBeGreaterThan(250);
  });
});

describe('the fuzzer can fail', () => {
  it('catches a pass-through TCP proxy: the backend parses requests without the client\'s X-Forwarded-For', async () => {
    const open = new Set<net.Socket>();
    const relay = net.createServer((client) => {
      const upstream = net.connect(be.port, '127.0.0.1');
      for (const s of [client, upstream]) {
        open.add(s);
        s.on('close', () => {
          open.delete(s);
          client.destroy();
          upstream.destroy();
        });
        s.on('error', () => s.destroy());
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    try {
      const port = (relay.address() as AddressInfo).port;
      const report = await runFuzz({ port, alive: async () => null }, be, { seed: 5, cases: 60, maxFailures: 500 });
      // (a) at the backend: requests with no X-Forwarded-For; (b) at the clients: echoes of an empty one.
      expect(report.failures.filter((f) => f.invariant === 'a' && /SMUGGLED/.test(f.detail)).length).toBeGreaterThan(0);
      expect(report.failures.filter((f) => f.invariant === 'b').length).toBeGreaterThan(0);
    } finally {
      for (const s of open) s.destroy();
      await new Promise((r) => relay.close(r));
    }
  });
});
