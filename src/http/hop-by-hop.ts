// Hop-by-hop header fields: they describe one connection and are never forwarded, in either
// direction (the HTTP proxy, X-Forwarded handling, the --workers primary's admin forwarding).
// RFC 9110 section 7.6.1 names Connection, Proxy-Connection, Keep-Alive, TE, Transfer-Encoding and
// Upgrade; Trailer (RFC 2616's list) is dropped too, as the proxies always have.
export const HOP_BY_HOP: ReadonlySet<string> = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);
