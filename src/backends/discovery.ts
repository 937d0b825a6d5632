// DNS discovery of backends, for a Kubernetes headless Service (one A/AAAA record per ready pod) or
// a StatefulSet behind one (one SRV record per pod, naming the pod: app-0.app-headless.ns.svc...).
// Polls the name, turns the answer into ResolvedBackends and reports a changed set; a failed or
// suspiciously empty poll never empties the list on its own.
//
// Ids are what the consistent-hash ring hashes, so they should survive pod restarts: prefer SRV.
//   - SRV: id = the target's first DNS label + port ("app-0:8000"), url = http://<target>:<port>
//     (https:// with scheme https: the certificate then names the target, or backendTls.servername)
//     (host = the target name, resolved at connect time), so app-0 keeps its rooms across restarts
//     even though its address changes.
//   - A/AAAA: the address is the only identity ("10.0.0.5:8000", "[fd00::5]:8000"); a restarted pod
//     with a new address is a new backend and its rooms move.
import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { ResolvedBackend } from '../config/load.js';

export interface DnsDiscoveryOptions {
  /** Name to resolve, e.g. "app-headless.default.svc.cluster.local" or for SRV "_http._tcp.app-headless.default.svc.cluster.local". */
  name: string;
  type: 'A' | 'AAAA' | 'A+AAAA' | 'SRV';
  /** Port for A/AAAA records (SRV records carry their own). */
  port: number;
  /** How the backends are spoken to (default http): https makes https:// backends, checked over TLS. */
  scheme?: 'http' | 'https';
  intervalMs: number;
  /** DNS servers "ip" or "ip:port" ("[ip6]:port" for IPv6 with a port; default: the system's). */
  servers?: readonly string[];
  /**
   * Weight of every discovered backend (default 1). SRV record weights are ignored: CoreDNS gives
   * each record 100/n, which changes whenever the number of pods does and would reshuffle the ring;
   * weights are the operator's decision, not DNS's. SRV priorities are ignored too: every record is
   * a backend (Kubernetes publishes all ready pods at priority 0).
   */
  weight?: number;
  /** Timeout of one DNS query attempt (default 2000 ms; 2 tries per query). */
  queryTimeoutMs?: number;
}

export interface DiscoveryResult {
  backends: ResolvedBackend[];
  /** When this list was last confirmed by an answer (ms since epoch). */
  at: number;
}

/** A failed resolution; `code` is the resolver's (ENOTFOUND, ENODATA, ETIMEOUT, ESERVFAIL, ...). */
export class DnsDiscoveryError extends Error {
  constructor(
    readonly dnsName: string,
    readonly recordType: DnsDiscoveryOptions['type'],
    readonly code: string,
    detail?: string,
  ) {
    const meaning = MEANINGS[code];
    super(`DNS discovery of ${recordType} ${dnsName} failed: ${code}${meaning ? ` (${meaning})` : ''}${detail ? `; ${detail}` : ''}`);
    this.name = 'DnsDiscoveryError';
  }
}

const MEANINGS: Record<string, string> = {
  ENOTFOUND: 'the name does not exist',
  ENODATA: 'the name has no records of this type',
  ETIMEOUT: 'no DNS server answered in time',
  ECONNREFUSED: 'the DNS server refused the connection',
  ESERVFAIL: 'the DNS server failed (SERVFAIL)',
  EREFUSED: 'the DNS server refused the query',
  ECANCELLED: 'cancelled by stop()',
};

/** Answers meaning "no records" rather than "no answer": NXDOMAIN and NOERROR without data. */
const EMPTY_CODES = new Set(['ENOTFOUND', 'ENODATA']);

function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : 'EUNKNOWN';
}

function byId(a: ResolvedBackend, b: ResolvedBackend): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function sortedUnique(backends: ResolvedBackend[]): ResolvedBackend[] {
  const seen = new Map<string, ResolvedBackend>();
  for (const b of backends) if (!seen.has(b.id)) seen.set(b.id, b);
  return [...seen.values()].sort(byId);
}

type Scheme = NonNullable<DnsDiscoveryOptions['scheme']>;

/** A discovered backend; an https one carries `tls` as a configured https:// backend does. */
function discovered(id: string, scheme: Scheme, hostPort: string, host: string, port: number, weight: number): ResolvedBackend {
  return { id, url: `${scheme}://${hostPort}`, host, port, weight, ...(scheme === 'https' ? { tls: true } : {}) };
}

function fromAddress(address: string, port: number, weight: number, scheme: Scheme): ResolvedBackend | undefined {
  const family = isIP(address);
  if (family === 0) return undefined;
  const host = address.toLowerCase();
  const hostPort = family === 6 ? `[${host}]:${port}` : `${host}:${port}`;
  // The id is written like a configured backend's default id (URL host:port, IPv6 in brackets).
  return discovered(hostPort, scheme, hostPort, host, port, weight);
}

/** Pure: A/AAAA addresses -> backends, sorted by id, deduplicated. Invalid addresses are skipped. */
export function backendsFromA(addresses: readonly string[], port: number, weight: number, scheme: Scheme = 'http'): ResolvedBackend[] {
  const out: ResolvedBackend[] = [];
  for (const a of addresses) {
    const b = fromAddress(a, port, weight, scheme);
    if (b) out.push(b);
  }
  return sortedUnique(out);
}

/**
 * Pure: SRV records -> backends, sorted by id, deduplicated. Id = first label of the target + port
 * ("app-0.app-headless.ns.svc.cluster.local" port 8000 -> "app-0:8000"); when two different targets
 * would share that id (same first label in two domains), both use the whole target name instead.
 * Targets are compared case-insensitively (lowercased) and without the trailing dot; the "." target
 * (service not available) and port 0 are skipped. The record's own weight and priority are ignored.
 */
export function backendsFromSrv(
  records: readonly { name: string; port: number; priority: number; weight: number }[],
  weight: number,
  scheme: Scheme = 'http',
): ResolvedBackend[] {
  const targets = new Map<string, { target: string; port: number }>();
  for (const r of records) {
    const target = r.name.toLowerCase().replace(/\.$/, '');
    if (target === '' || !Number.isInteger(r.port) || r.port < 1 || r.port > 65535) continue;
    targets.set(`${target}|${r.port}`, { target, port: r.port });
  }
  const shortIds = new Map<string, number>();
  const shortId = (t: { target: string; port: number }): string => `${t.target.split('.')[0] ?? t.target}:${t.port}`;
  for (const t of targets.values()) shortIds.set(shortId(t), (shortIds.get(shortId(t)) ?? 0) + 1);
  const out: ResolvedBackend[] = [];
  for (const t of targets.values()) {
    if (isIP(t.target) !== 0) {
      // Not valid for SRV, but some servers do it: the address is the identity, as for A records.
      const b = fromAddress(t.target, t.port, weight, scheme);
      if (b) out.push(b);
      continue;
    }
    const short = shortId(t);
    const id = (shortIds.get(short) ?? 0) > 1 ? `${t.target}:${t.port}` : short;
    out.push(discovered(id, scheme, `${t.target}:${t.port}`, t.target, t.port, weight));
  }
  return sortedUnique(out);
}

function sameBackends(a: readonly ResolvedBackend[], b: readonly ResolvedBackend[]): boolean {
  const key = (l: readonly ResolvedBackend[]): string => JSON.stringify(l.map((x) => [x.id, x.url, x.host, x.port, x.weight]));
  return key(a) === key(b);
}

type Answer = { kind: 'backends'; backends: ResolvedBackend[] } | { kind: 'empty'; code: string };

export class DnsDiscovery {
  private readonly resolver: Resolver;
  private readonly weight: number;
  private last: DiscoveryResult | undefined;
  /** Consecutive polls answering "no records" since the last non-empty answer. */
  private emptyStreak = 0;
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private stopped = false;

  constructor(
    private readonly opts: DnsDiscoveryOptions,
    private readonly onChange: (backends: ResolvedBackend[]) => void,
    private readonly onError: (err: Error) => void,
  ) {
    if (!opts.name) throw new Error('DNS discovery: name must not be empty');
    if (opts.type !== 'SRV' && !(Number.isInteger(opts.port) && opts.port >= 1 && opts.port <= 65535)) {
      throw new Error(`DNS discovery of ${opts.name}: port must be 1-65535 for ${opts.type} records, got ${opts.port}`);
    }
    if (!(opts.intervalMs > 0)) throw new Error(`DNS discovery of ${opts.name}: intervalMs must be > 0, got ${opts.intervalMs}`);
    this.weight = opts.weight ?? 1;
    if (!(Number.isFinite(this.weight) && this.weight >= 0)) throw new Error(`DNS discovery of ${opts.name}: weight must be >= 0, got ${this.weight}`);
    this.resolver = new Resolver({ timeout: opts.queryTimeoutMs ?? 2000, tries: 2 });
    if (opts.servers && opts.servers.length > 0) {
      try {
        this.resolver.setServers([...opts.servers]);
      } catch (err) {
        throw new Error(`DNS discovery of ${opts.name}: bad DNS server in ${JSON.stringify(opts.servers)}: ${(err as Error).message}`);
      }
    }
  }

  /** The last good list and when it was confirmed; undefined before start() succeeded. */
  get current(): DiscoveryResult | undefined {
    return this.last;
  }

  /**
   * First resolution. Resolves with the backends (onChange is not called for them) and starts
   * polling; rejects with a DnsDiscoveryError naming the DNS name and the error code when the
   * resolution fails or finds no backends, and then does not poll (start() may be called again).
   */
  async start(): Promise<ResolvedBackend[]> {
    if (this.stopped) throw new Error(`DNS discovery of ${this.opts.name}: start() after stop()`);
    if (this.running) throw new Error(`DNS discovery of ${this.opts.name}: already started`);
    this.running = true;
    let answer: Answer;
    try {
      answer = await this.resolve();
    } catch (err) {
      this.running = false;
      throw this.wrap(err);
    }
    if (answer.kind === 'empty') {
      this.running = false;
      throw new DnsDiscoveryError(this.opts.name, this.opts.type, answer.code, 'no backends found');
    }
    if (this.stopped) return answer.backends;
    this.last = { backends: answer.backends, at: Date.now() };
    this.schedule();
    return answer.backends;
  }

  /** Stops polling: clears the timer and cancels a query in flight; no callback is called after. */
  stop(): void {
    this.stopped = true;
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.resolver.cancel();
  }

  private schedule(): void {
    if (this.stopped) return;
    // Polls are chained (the next is armed after this one ends), so they never overlap; unref'd
    // so a discovery alone never keeps the process alive.
    this.timer = setTimeout(() => void this.poll(), this.opts.intervalMs);
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    this.timer = undefined;
    let answer: Answer;
    try {
      answer = await this.resolve();
    } catch (err) {
      if (this.stopped) return;
      // A DNS blip (timeout, SERVFAIL, refused) must not empty the list: report, keep the last one.
      this.report(this.wrap(err, `keeping the last ${this.last?.backends.length ?? 0} backends`));
      this.schedule();
      return;
    }
    if (this.stopped) return;
    if (answer.kind === 'backends') {
      this.emptyStreak = 0;
      this.apply(answer.backends);
    } else if ((this.last?.backends.length ?? 0) > 0) {
      // "No records" after a good list is believed only when 2 consecutive polls say so: during a
      // rollout or a DNS server restart a single NXDOMAIN/empty answer is common and would
      // otherwise send every room elsewhere and back.
      this.emptyStreak += 1;
      if (this.emptyStreak >= 2) this.apply([]);
      else {
        this.report(
          new DnsDiscoveryError(this.opts.name, this.opts.type, answer.code, `keeping the last ${this.last?.backends.length ?? 0} backends unless the next poll confirms`),
        );
      }
    }
    this.schedule();
  }

  private apply(backends: ResolvedBackend[]): void {
    const changed = !this.last || !sameBackends(this.last.backends, backends);
    this.last = { backends, at: Date.now() };
    if (!changed) return;
    try {
      this.onChange(backends);
    } catch (err) {
      this.report(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private report(err: Error): void {
    try {
      this.onError(err);
    } catch {
      // An error handler that throws has nowhere left to report to; polling goes on.
    }
  }

  private wrap(err: unknown, detail?: string): DnsDiscoveryError {
    if (err instanceof DnsDiscoveryError) return err;
    return new DnsDiscoveryError(this.opts.name, this.opts.type, errorCode(err), detail);
  }

  private async resolve(): Promise<Answer> {
    const { name, type, port } = this.opts;
    if (type === 'SRV') {
      const r = await settle(this.resolver.resolveSrv(name));
      if (r.kind === 'empty') return r;
      const backends = backendsFromSrv(r.value, this.weight, this.opts.scheme);
      return backends.length > 0 ? { kind: 'backends', backends } : { kind: 'empty', code: 'ENODATA' };
    }
    const queries: Promise<string[]>[] = [];
    if (type === 'A' || type === 'A+AAAA') queries.push(this.resolver.resolve4(name));
    if (type === 'AAAA' || type === 'A+AAAA') queries.push(this.resolver.resolve6(name));
    // Both families are asked at once; a real failure of either fails the poll (half a list is not
    // an answer), "no records" of one family is fine.
    const results = await Promise.all(queries.map(settle));
    const addresses = results.flatMap((r) => (r.kind === 'value' ? r.value : []));
    const backends = backendsFromA(addresses, port, this.weight, this.opts.scheme);
    if (backends.length > 0) return { kind: 'backends', backends };
    const emptyCode = results.find((r) => r.kind === 'empty' && r.code === 'ENOTFOUND') ? 'ENOTFOUND' : 'ENODATA';
    return { kind: 'empty', code: emptyCode };
  }
}

/** A query's records, or "no records"; any other failure is thrown. */
async function settle<T>(query: Promise<T[]>): Promise<{ kind: 'value'; value: T[] } | { kind: 'empty'; code: string }> {
  try {
    const value = await query;
    return value.length > 0 ? { kind: 'value', value } : { kind: 'empty', code: 'ENODATA' };
  } catch (err) {
    const code = errorCode(err);
    if (EMPTY_CODES.has(code)) return { kind: 'empty', code };
    throw err;
  }
}
