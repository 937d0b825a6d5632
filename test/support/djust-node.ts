// The djust-faithful client (djust-client.mjs) as a Node test runs it: the `ws` package's
// WebSocket (told the Origin a browser would send by itself), Node's fetch with a timeout, and a
// page at `pagePath` on 127.0.0.1:`port`.
import { WebSocket } from 'ws';
import { DjustClient, type DjustClientOptions } from './djust-client.mjs';

export function nodeDjustClient(port: number, pagePath: string, o: Partial<DjustClientOptions> = {}): DjustClient {
  const origin = `http://127.0.0.1:${port}`;
  const WS = class extends WebSocket {
    constructor(url: string) {
      super(url, { origin });
    }
  };
  return new DjustClient({
    WebSocket: WS,
    fetch: (url, init) => fetch(url, { ...init, signal: AbortSignal.timeout(15_000) }),
    location: { protocol: 'http:', host: `127.0.0.1:${port}`, pathname: pagePath, href: `${origin}${pagePath}` },
    ...o,
  });
}
