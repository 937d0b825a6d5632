// Which request methods roomgate forwards to a backend: one rule for every front. By default the
// methods web apps use pass; TRACE never does (it echoes the request, cookies included: cross-site
// tracing); a method from the HTTP method registry that is not allowed gets 405 with Allow; a
// method roomgate does not know gets 501 (RFC 9110 9.1). Others (WebDAV's, for example) pass only
// when the configuration lists them (`proxy.extraMethods`). roomgate's own paths (the API, the
// pages, static files) keep their own rules; this is for proxied requests.

/** What passes without configuration. */
export const DEFAULT_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const;

/** Never forwarded, whatever the configuration says. */
export const NEVER_FORWARDED = ['TRACE', 'CONNECT'] as const;

// The IANA HTTP Method Registry: methods roomgate knows (405 when not allowed, not 501).
const REGISTERED = new Set([
  'ACL', 'BASELINE-CONTROL', 'BIND', 'CHECKIN', 'CHECKOUT', 'CONNECT', 'COPY', 'DELETE', 'GET', 'HEAD', 'LABEL', 'LINK', 'LOCK',
  'MERGE', 'MKACTIVITY', 'MKCALENDAR', 'MKCOL', 'MKREDIRECTREF', 'MKWORKSPACE', 'MOVE', 'OPTIONS', 'ORDERPATCH', 'PATCH', 'POST',
  'PRI', 'PROPFIND', 'PROPPATCH', 'PUT', 'QUERY', 'REBIND', 'REPORT', 'SEARCH', 'TRACE', 'UNBIND', 'UNCHECKOUT', 'UNLINK', 'UNLOCK',
  'UPDATE', 'UPDATEREDIRECTREF', 'VERSION-CONTROL',
]);

export type MethodVerdict = 'forward' | 'not-allowed' | 'unknown';

export interface MethodPolicy {
  /** What a request with `method` gets. */
  verdict(method: string): MethodVerdict;
  /** The Allow field of a 405 (and of OPTIONS *). */
  readonly allow: string;
}

export function createMethodPolicy(extra: readonly string[]): MethodPolicy {
  const allowed = new Set<string>([...DEFAULT_METHODS, ...extra.filter((m) => !(NEVER_FORWARDED as readonly string[]).includes(m))]);
  const allow = [...allowed].join(', ');
  return {
    allow,
    verdict(method) {
      if (allowed.has(method)) return 'forward';
      return REGISTERED.has(method) || extra.includes(method) ? 'not-allowed' : 'unknown';
    },
  };
}
