/**
 * A heap snapshot (V8's .heapsnapshot JSON) counted by kind: for every constructor (objects),
 * function name (closures) or internal kind (arrays, contexts, code, strings), how many nodes and
 * their own (shallow) bytes. The difference of two censuses taken at N and 2N tunnels, divided by
 * N, is what one tunnel adds to the heap, kind by kind: shallow sizes add up exactly, where
 * retained sizes would count a shared object once per retainer.
 */
export interface Kind {
  count: number;
  bytes: number;
}

export type Census = Map<string, Kind>;

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Node types whose name is their value (a string's text, a number's digits): counted by type only. */
const BY_TYPE = new Set(['string', 'concatenated string', 'sliced string', 'number', 'heap number', 'bigint']);

export function census(json: string): Census {
  const s = JSON.parse(json) as Snapshot;
  const fields = s.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf('type');
  const nameAt = fields.indexOf('name');
  const sizeAt = fields.indexOf('self_size');
  const types = s.snapshot.meta.node_types[0];
  const out: Census = new Map();
  for (let i = 0; i < s.nodes.length; i += width) {
    const type = types[s.nodes[i + typeAt]!] ?? '?';
    const name = BY_TYPE.has(type) ? '' : (s.strings[s.nodes[i + nameAt]!] ?? '').slice(0, 60);
    const key = name === '' ? `(${type})` : `${type} ${name}`;
    let k = out.get(key);
    if (k === undefined) out.set(key, (k = { count: 0, bytes: 0 }));
    k.count++;
    k.bytes += s.nodes[i + sizeAt]!;
  }
  return out;
}

export interface PerTunnel {
  readonly key: string;
  /** Nodes of this kind per tunnel (may be fractional: 1 in 8 tunnels starts a new Buffer pool slab). */
  readonly count: number;
  readonly bytes: number;
}

/** (big - small) / tunnels, kind by kind, largest first; kinds that moved less than `minBytes` per tunnel left out. */
export function perTunnel(small: Census, big: Census, tunnels: number, minBytes = 4): { rows: PerTunnel[]; totalBytes: number } {
  const rows: PerTunnel[] = [];
  let total = 0;
  for (const [key, b] of big) {
    const a = small.get(key) ?? { count: 0, bytes: 0 };
    const bytes = (b.bytes - a.bytes) / tunnels;
    total += bytes;
    if (Math.abs(bytes) >= minBytes) rows.push({ key, count: (b.count - a.count) / tunnels, bytes });
  }
  for (const [key, a] of small) if (!big.has(key)) total -= a.bytes / tunnels;
  rows.sort((x, y) => y.bytes - x.bytes);
  return { rows, totalBytes: total };
}
