// The admin listener's guard against DNS rebinding: a page on evil.example whose name an attacker
// re-points at 127.0.0.1 makes the browser send its requests to the admin port with
// `Host: evil.example`, and reads the answers as same-origin. So the admin port answers only
// requests whose Host is an IP literal (IPv4, or IPv6 in brackets), `localhost`, or a name listed
// in admin.allowedHosts, each with an optional port; others get 421 misdirected_request. A request
// without Host (HTTP/1.0) passes: a browser always sends one.
import { isIPv4, isIPv6 } from 'node:net';
import { Errors, type HttpError } from './errors.js';

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

/** The 421 misdirected_request (one error shape) naming the config key that lets the name in; null when `host` passes. */
export function hostRefusal(host: string | undefined, allowed: ReadonlySet<string>): HttpError | null {
  if (adminHostAllowed(host, allowed)) return null;
  const h = host ?? '';
  const shown = h.length > MAX_SHOWN ? `${h.slice(0, MAX_SHOWN)}...` : h;
  return Errors.misdirected(
    `Host ${JSON.stringify(shown)} is not accepted on the admin port (a guard against DNS rebinding): use an IP address or localhost, or add the name to admin.allowedHosts`,
  );
}
