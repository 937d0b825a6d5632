// proxy.rewriteLocation: nginx's `proxy_redirect default`. A backend that knows only its own
// address (a redirect built from the Host it was reached on, or from its own settings) sends
// `Location: http://127.0.0.1:8102/next`; the client can neither reach that address nor should it
// learn it. An absolute URL in Location or Refresh (as nginx: not Content-Location, which names
// the answer's own resource and no client follows) whose scheme, host and port are the backend's
// own is pointed at the request's public scheme and Host, the rest of it kept byte for byte.
// Anything else (relative, another host, userinfo, unparsable) passes unchanged: a backend's
// value is never the reason for an error.

/** The backend's own address: the scheme, host and port of its `url` in `backends`. */
export interface OwnAddress {
  readonly tls?: boolean;
  readonly host: string;
  readonly port: number;
}

/** One answer's rewrite: the backend it came from and the origin the client used. */
export interface LocationTarget {
  readonly scheme: 'http' | 'https';
  /** Lower-case, without IPv6 brackets. */
  readonly host: string;
  readonly port: number;
  /** "https://example.com" or "http://example.com:8080": the public scheme and the request's Host. */
  readonly publicOrigin: string;
}

/** The public side of a rewrite: the scheme the client used (as X-Forwarded-Proto tells it) and the request's Host. */
export interface PublicOrigin {
  readonly scheme: string;
  readonly host: string | undefined;
}

/** The rewrite for an answer of `backend` to a request with this public scheme and Host, or null when there is no Host to point at. */
export function locationTarget(backend: OwnAddress, publicScheme: string, host: string | undefined): LocationTarget | null {
  if (host === undefined || host === '' || /[\s/?#@\\]/.test(host)) return null;
  return { scheme: backend.tls === true ? 'https' : 'http', host: unbracketed(backend.host.toLowerCase()), port: backend.port, publicOrigin: `${publicScheme}://${host}` };
}

// scheme "://" authority, then the rest (path, query, fragment), kept as it is.
const ABSOLUTE = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)(.*)$/s;
// host (a name, IPv4, or [IPv6]) and an optional port.
const AUTHORITY = /^(\[[0-9A-Fa-f:.]+\]|[^:[\]]+)(?::(\d{0,5}))?$/;
const DEFAULT_PORT: Record<string, number> = { http: 80, https: 443 };

/** The URL pointed at the public origin when it names the backend's own address, else null. */
export function rewrittenUrl(url: string, t: LocationTarget): string | null {
  const m = ABSOLUTE.exec(url);
  if (m === null) return null;
  const scheme = (m[1] as string).toLowerCase();
  if (scheme !== t.scheme) return null;
  // userinfo (user@host) is never the backend's plain address: left alone.
  const a = AUTHORITY.exec(m[2] as string);
  if (a === null) return null;
  const port = a[2] === undefined || a[2] === '' ? DEFAULT_PORT[scheme] : Number(a[2]);
  if (port !== t.port || unbracketed((a[1] as string).toLowerCase()) !== t.host) return null;
  return t.publicOrigin + (m[3] as string);
}

// Refresh: "5; url=http://...", "0;URL='...'", "3, http://..." (the url= is optional).
const REFRESH = /^(\s*\d+(?:\.\d*)?\s*[;,]\s*(?:url\s*=\s*)?)(["']?)(.*?)\2(\s*)$/is;

/** An answer field's value for the client: Location and Refresh rewritten (see above), any other field as it came. */
export function answerFieldValue(name: string, value: string, t: LocationTarget): string {
  // Most names are passed over by length alone.
  if (name.length === 8 && name.toLowerCase() === 'location') return rewrittenUrl(value, t) ?? value;
  if (name.length === 7 && name.toLowerCase() === 'refresh') {
    const m = REFRESH.exec(value);
    const url = m === null ? null : rewrittenUrl(m[3] as string, t);
    return m === null || url === null ? value : `${m[1] as string}${m[2] as string}${url}${m[2] as string}${m[4] as string}`;
  }
  return value;
}

/** A flat [name, value, ...] field list (rawHeaders' form) with Location and Refresh rewritten in place. */
export function rewriteAnswerFields(fields: string[], t: LocationTarget): void {
  for (let i = 0; i + 1 < fields.length; i += 2) fields[i + 1] = answerFieldValue(fields[i] as string, fields[i + 1] as string, t);
}

function unbracketed(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}
