// Demo backends started in this process with their call keys (SECRETS), and `ws` clients of them;
// everything started through these is closed after each test of the file that calls
// `demoInProcess()` (at its top level: it registers the afterEach).
import { afterEach } from 'vitest';
import { startDemoBackend, type DemoBackend, type DemoBackendOptions } from '../../examples/demo-backend/server.js';
import { backendKeys } from '../../src/http/call-proof.js';
import { connect, SECRETS, type Client } from '../backend-kit/clients.js';

export function demoInProcess(): {
  demo(id: string, o?: Partial<DemoBackendOptions>): Promise<DemoBackend>;
  open(port: number, headers: Record<string, string>): Client;
} {
  const started: DemoBackend[] = [];
  const clients: Client[] = [];
  afterEach(async () => {
    for (const c of clients.splice(0)) c.ws.terminate();
    await Promise.all(started.splice(0).map((b) => b.close()));
  });
  return {
    async demo(id, o = {}) {
      const b = await startDemoBackend({ port: 0, id, callKeys: backendKeys(SECRETS, id), ...o });
      started.push(b);
      return b;
    },
    open(port, headers) {
      const c = connect(port, headers);
      clients.push(c);
      return c;
    },
  };
}
