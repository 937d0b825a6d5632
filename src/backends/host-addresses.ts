// Backend host names, resolved once and kept. Every connection roomgate opens to a backend (page,
// WebSocket tunnel, cache fill, health check, push and handoff calls) looks its host up here
// instead of asking the system resolver each time: the last good answer is given at once, and it is
// refreshed in the background once it is older than the refresh interval. A resolver that fails or
// does not answer for a while (a DNS server reloading, a packet lost: glibc then waits 5 s before it
// asks again) delays no connection and marks no backend down; the addresses it gave last stay in
// use until it answers again. Only the first lookup of a name waits for the resolver.
//
// This is what nginx (names resolved at start) and HAProxy (runtime resolvers that keep the last
// good answer) do; a name whose address changes (a replaced pod behind a headless Service) is
// followed within one refresh interval, as the health checks look it up every round.
import { lookup as systemLookup, type LookupAddress, type LookupOptions } from 'node:dns';

/** All addresses of a host name, in the resolver's order. */
export type Resolve = (host: string) => Promise<LookupAddress[]>;

/** The `lookup` option of net.connect, tls.connect and http.request. */
export type LookupFunction = (
  hostname: string,
  options: LookupOptions,
  callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
) => void;

export interface HostAddressesOptions {
  /** How old an answer may be before a lookup also asks the resolver again (in the background). */
  readonly refreshMs: number;
  readonly resolve?: Resolve;
  readonly now?: () => number;
}

interface Entry {
  addresses: LookupAddress[];
  resolvedAt: number;
  /** A refresh (or the first resolution) in flight: concurrent lookups share it. */
  pending: Promise<LookupAddress[]> | null;
}

// How often the addresses of a backend's name are asked for again. Health checks look every name
// up each round, so a changed address is picked up within this plus one health interval.
export const DEFAULT_REFRESH_MS = 5_000;

const systemResolve: Resolve = (host) =>
  new Promise((resolve, reject) => {
    systemLookup(host, { all: true, order: 'verbatim' }, (err, addresses) => (err ? reject(err) : resolve(addresses)));
  });

export class HostAddresses {
  private readonly entries = new Map<string, Entry>();
  private readonly resolve: Resolve;
  private readonly now: () => number;

  constructor(private readonly o: HostAddressesOptions) {
    this.resolve = o.resolve ?? systemResolve;
    this.now = o.now ?? Date.now;
  }

  /** For net.connect/tls.connect/http.request: `{ lookup: addresses.lookup }`. */
  readonly lookup: LookupFunction = (hostname, options, callback) => {
    const entry = this.entries.get(hostname);
    if (entry !== undefined && entry.addresses.length > 0) {
      if (this.now() - entry.resolvedAt >= this.o.refreshMs) this.refresh(hostname, entry);
      return answer(hostname, entry.addresses, options, callback);
    }
    this.first(hostname).then(
      (addresses) => answer(hostname, addresses, options, callback),
      (err: NodeJS.ErrnoException) => callback(err, '', undefined),
    );
  };

  /** The addresses kept for `hostname` (for the admin view and tests); empty when none yet. */
  addressesOf(hostname: string): readonly LookupAddress[] {
    return this.entries.get(hostname)?.addresses ?? [];
  }

  /** A name not seen yet (or whose every lookup failed): the caller waits for the resolver. */
  private first(hostname: string): Promise<LookupAddress[]> {
    let entry = this.entries.get(hostname);
    if (entry === undefined) {
      entry = { addresses: [], resolvedAt: 0, pending: null };
      this.entries.set(hostname, entry);
    }
    return entry.pending ?? this.ask(hostname, entry);
  }

  /** A kept answer grew old: asked again, the old one in use until a new one arrives. */
  private refresh(hostname: string, entry: Entry): void {
    if (entry.pending !== null) return;
    // A failed refresh keeps the last good answer; the next lookup after refreshMs tries again.
    this.ask(hostname, entry).catch(() => undefined);
  }

  private ask(hostname: string, entry: Entry): Promise<LookupAddress[]> {
    const pending = this.resolve(hostname).then(
      (addresses) => {
        entry.pending = null;
        entry.resolvedAt = this.now();
        if (addresses.length > 0) entry.addresses = addresses;
        if (entry.addresses.length === 0) throw notFound(hostname);
        return entry.addresses;
      },
      (err: unknown) => {
        entry.pending = null;
        // Not asked again before refreshMs by lookups that are served from a kept answer.
        entry.resolvedAt = this.now();
        throw err;
      },
    );
    entry.pending = pending;
    return pending;
  }
}

/** Answers a lookup the way dns.lookup would for these options. */
function answer(hostname: string, addresses: LookupAddress[], options: LookupOptions, callback: Parameters<LookupFunction>[2]): void {
  const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : (options.family ?? 0);
  const fitting = family === 0 ? addresses : addresses.filter((a) => a.family === family);
  if (fitting.length === 0) return callback(notFound(hostname), '', undefined);
  if (options.all === true) return callback(null, fitting.slice());
  const first = fitting[0] as LookupAddress;
  callback(null, first.address, first.family);
}

function notFound(hostname: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND', hostname });
}

/** The one cache of the process (a DNS cache is process-wide, as the system resolver is). */
export const backendHosts = new HostAddresses({ refreshMs: DEFAULT_REFRESH_MS });
