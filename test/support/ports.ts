// Ports a test hands to something that binds them later (demo.basePort: the demo backends' ports
// are fixed, so the gateway cannot take port 0 for them).
import { createServer, type Server } from 'node:net';

/**
 * A base port with `n` consecutive free loopback ports. Below the Linux ephemeral range
 * (32768-60999), so no process is handed one of them by the kernel between this check and the
 * bind: a port picked inside that range was once taken meanwhile by another test's connection.
 */
export async function freePortRange(n: number): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = 20_000 + Math.floor(Math.random() * 12_000);
    const held = await Promise.all(
      Array.from(
        { length: n },
        (_, i) =>
          new Promise<Server | null>((resolve) => {
            const s = createServer();
            s.once('error', () => resolve(null));
            s.listen(base + i, '127.0.0.1', () => resolve(s));
          }),
      ),
    );
    await Promise.all(held.map((s) => (s ? new Promise((r) => s.close(r)) : null)));
    if (held.every((s) => s !== null)) return base;
  }
  throw new Error(`no ${n} consecutive free ports found`);
}
