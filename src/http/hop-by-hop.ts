// Hop-by-hop header fields: they describe one connection and are never forwarded, in either
// direction (the HTTP proxy, X-Forwarded handling, the --workers primary's admin forwarding).
// RFC 9110 section 7.6.1 names Connection, Proxy-Connection, Keep-Alive, TE, Transfer-Encoding and
// Upgrade; Trailer (RFC 2616's list) is dropped too, as the proxies always have, and HTTP2-Settings
// (RFC 9113 8.2.2: connection-specific; node's HTTP/2 layer refuses to send it, so an answer
// carrying it could not reach an h2 client).
export const HOP_BY_HOP: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'http2-settings']);

/**
 * The field names the Connection values of a message name (RFC 9110 7.6.1: hop-by-hop too, to be
 * removed by a proxy), lower-case, without those in `keep` (fields a Connection header may never
 * take away), or null when there are none.
 */
export function connectionNamed(values: readonly string[], keep: ReadonlySet<string>): Set<string> | null {
  let names: Set<string> | null = null;
  for (const value of values) {
    for (const t of value.split(',')) {
      const token = t.trim().toLowerCase();
      if (token !== '' && !keep.has(token)) (names ??= new Set()).add(token);
    }
  }
  return names;
}

/** In an answer, a Connection header can never take away the body's framing. */
export const ANSWER_KEEPS: ReadonlySet<string> = new Set(['content-length']);

/**
 * Which of an answer's fields ([name, value, ...]) a proxy drops, by lower-case name: the
 * hop-by-hop ones and those its Connection header names.
 */
export function answerDrops(raw: readonly string[]): (lowerName: string) => boolean {
  let values: string[] | null = null;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if ((raw[i] as string).length === 10 && (raw[i] as string).toLowerCase() === 'connection') (values ??= []).push(raw[i + 1] as string);
  }
  const named = values === null ? null : connectionNamed(values, ANSWER_KEEPS);
  return (lower) => HOP_BY_HOP.has(lower) || named?.has(lower) === true;
}

/**
 * An answer's fields as node:http's client gives them (rawHeaders), without the hop-by-hop ones
 * and those its Connection header names: what a proxy passes on (Node writes its own framing).
 */
export function endToEndFields(raw: readonly string[]): string[] {
  const drops = answerDrops(raw);
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (!drops((raw[i] as string).toLowerCase())) out.push(raw[i] as string, raw[i + 1] as string);
  }
  return out;
}

/** Fields ([name, value, ...]) without Content-Length: for an answer that has no body to frame, or whose writer frames it. */
export function withoutLength(fields: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if ((fields[i] as string).toLowerCase() !== 'content-length') out.push(fields[i] as string, fields[i + 1] as string);
  }
  return out;
}
