// The djust-faithful client (djust-client.mjs) as a Node test runs it: the `ws` package's
// WebSocket (told the Origin a browser would send by itself), Node's fetch with a timeout, and a
// page at `pagePath` on 127.0.0.1:`port`. `cookie`: the page's cookies, as the browser holds them
// after the page load set them (djust's session cookie); the browser, not djust's client, sends
// them with the socket's handshake and with every fetch of the page's origin, and so does this.
import { WebSocket } from 'ws';
import { DjustClient, type DjustClientOptions } from './djust-client.mjs';

export function nodeDjustClient(port: number, pagePath: string, o: Partial<DjustClientOptions> & { cookie?: string } = {}): DjustClient {
  const origin = `http://127.0.0.1:${port}`;
  const { cookie, ...options } = o;
  const jar: Record<string, string> = cookie === undefined ? {} : { cookie };
  const WS = class extends WebSocket {
    constructor(url: string) {
      super(url, { origin, headers: jar });
    }
  };
  return new DjustClient({
    WebSocket: WS,
    fetch: (url, init) => fetch(url, { ...init, headers: { ...init.headers, ...jar }, signal: AbortSignal.timeout(15_000) }),
    location: { protocol: 'http:', host: `127.0.0.1:${port}`, pathname: pagePath, href: `${origin}${pagePath}` },
    ...options,
  });
}
