// An in-process HTTP server as a test's backend: listening on a free loopback port, and closed with
// every connection it still has (a test leaves no port behind).
import type http from 'node:http';
import type { AddressInfo } from 'node:net';

/** Listens on 127.0.0.1, any free port; resolves with its base URL. */
export async function listenOnLoopback(server: http.Server): Promise<string> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Closes the server and its open connections. */
export async function closeServer(server: http.Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
}
