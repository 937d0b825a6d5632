// The admin listener's guard against DNS rebinding: a page on evil.example whose name an attacker
// re-points at 127.0.0.1 makes the browser send its requests to the admin port with
// `Host: evil.example`, and reads the answers as same-origin. So the admin port answers only
// requests whose Host is an IP literal (IPv4, or IPv6 in brackets), `localhost`, or a name listed
// in admin.allowedHosts, each with an optional port; others get 421 Misdirected Request. A request
// without Host (HTTP/1.0) passes: a browser always sends one.
import type { ServerResponse } from 'node:http';
import { isIPv4, isIPv6 } from 'node:net';

/** Longest Host value echoed back in the 421 answer. */
const MAX_SHOWN = 100;

/** Whether `host` (a Host header) may reach the admin listener. `allowed`: lower-case names. */
export function adminHostAllowed(host: string | undefined, allowed: ReadonlySet<string>): boolean {
  if (host === undefined) return true;
  const m = /^(\[[^\]]*\]|[^:[\]]*)(?::(\d{1,5}))?$/.exec(host);
  if (!m) return false;
  const name = (m[1] as string).toLowerCase();
  if (name.startsWith('[')) return isIPv6(name.slice(1, -1));
  return isIPv4(name) || name === 'localhost' || allowed.has(name);
}

/** The set adminHostAllowed compares with, from admin.allowedHosts. */
export function allowedHostSet(names: readonly string[]): ReadonlySet<string> {
  return new Set(names.map((n) => n.toLowerCase()));
}

/** 421 with a JSON body naming the config key that lets the name in. */
export function sendMisdirected(res: ServerResponse, host: string): void {
  const shown = host.length > MAX_SHOWN ? `${host.slice(0, MAX_SHOWN)}...` : host;
  const body = `${JSON.stringify(
    {
      error: `Host ${JSON.stringify(shown)} is not accepted on the admin port (a guard against DNS rebinding): use an IP address or localhost, or add the name to admin.allowedHosts`,
    },
    null,
    2,
  )}\n`;
  res.writeHead(421, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
  res.end(body);
}
