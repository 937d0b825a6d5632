// A tiny authoritative DNS server over UDP for tests: answers A, AAAA and SRV queries from a table
// the test can change (setRecords, or setRecordsOnce for a single answer), NXDOMAIN for unknown
// names, NOERROR with no answers for a known name without records of the asked type. It can also
// be told to drop queries (a server that does not answer) or to answer SERVFAIL. Every answer has
// TTL 0 so the resolver caches nothing.
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { isIPv4, isIPv6 } from 'node:net';

export interface SrvRecord {
  target: string;
  port: number;
  priority?: number;
  weight?: number;
}

export interface NameRecords {
  A?: readonly string[];
  AAAA?: readonly string[];
  SRV?: readonly SrvRecord[];
}

export type ServerMode = 'answer' | 'drop' | 'servfail';

const TYPE = { A: 1, AAAA: 28, SRV: 33 } as const;
const RCODE_SERVFAIL = 2;
const RCODE_NXDOMAIN = 3;

export class TestDnsServer {
  private records = new Map<string, NameRecords>();
  private once: Map<string, NameRecords> | undefined;
  private mode: ServerMode = 'answer';
  /** Queries received so far (also the dropped ones), as "TYPE name". */
  readonly queries: string[] = [];

  private constructor(
    private readonly socket: Socket,
    readonly port: number,
  ) {
    socket.on('message', (msg, rinfo) => this.onMessage(msg, rinfo));
  }

  static async start(records: Record<string, NameRecords> = {}): Promise<TestDnsServer> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(0, '127.0.0.1', () => {
        socket.off('error', reject);
        resolve();
      });
    });
    const server = new TestDnsServer(socket, socket.address().port);
    server.setRecords(records);
    return server;
  }

  /** "127.0.0.1:<port>", for DnsDiscoveryOptions.servers. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** Replaces the whole table. Names are case-insensitive, without the trailing dot. */
  setRecords(records: Record<string, NameRecords>): void {
    this.records = new Map(Object.entries(records).map(([name, r]) => [normalize(name), r]));
    this.once = undefined;
  }

  /** The next query (only) is answered from this table; later ones from setRecords' again. */
  setRecordsOnce(records: Record<string, NameRecords>): void {
    this.once = new Map(Object.entries(records).map(([name, r]) => [normalize(name), r]));
  }

  setMode(mode: ServerMode): void {
    this.mode = mode;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.socket.close(() => resolve()));
  }

  private onMessage(msg: Buffer, rinfo: RemoteInfo): void {
    let q: { id: number; flags: number; question: Buffer; name: string; qtype: number };
    try {
      q = parseQuery(msg);
    } catch {
      return; // not a query we understand: say nothing
    }
    const typeName = Object.entries(TYPE).find(([, v]) => v === q.qtype)?.[0] ?? String(q.qtype);
    this.queries.push(`${typeName} ${q.name}`);
    if (this.mode === 'drop') return;
    let rcode = 0;
    let answers: Buffer[] = [];
    const table = this.once ?? this.records;
    this.once = undefined;
    const entry = table.get(q.name);
    if (this.mode === 'servfail') rcode = RCODE_SERVFAIL;
    else if (!entry) rcode = RCODE_NXDOMAIN;
    else if (q.qtype === TYPE.A) answers = (entry.A ?? []).map((a) => rr(TYPE.A, encodeA(a)));
    else if (q.qtype === TYPE.AAAA) answers = (entry.AAAA ?? []).map((a) => rr(TYPE.AAAA, encodeAAAA(a)));
    else if (q.qtype === TYPE.SRV) answers = (entry.SRV ?? []).map((s) => rr(TYPE.SRV, encodeSrv(s)));
    const header = Buffer.alloc(12);
    header.writeUInt16BE(q.id, 0);
    // QR=1, opcode copied, AA=1, RD copied, RA=0, rcode.
    header.writeUInt16BE(0x8000 | (q.flags & 0x7800) | 0x0400 | (q.flags & 0x0100) | rcode, 2);
    header.writeUInt16BE(1, 4); // QDCOUNT
    header.writeUInt16BE(answers.length, 6); // ANCOUNT
    const reply = Buffer.concat([header, q.question, ...answers]);
    this.socket.send(reply, rinfo.port, rinfo.address);
  }
}

function normalize(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

function parseQuery(msg: Buffer): { id: number; flags: number; question: Buffer; name: string; qtype: number } {
  if (msg.length < 12) throw new Error('short');
  const id = msg.readUInt16BE(0);
  const flags = msg.readUInt16BE(2);
  if (flags & 0x8000) throw new Error('not a query');
  if (msg.readUInt16BE(4) < 1) throw new Error('no question');
  const labels: string[] = [];
  let off = 12;
  for (;;) {
    const len = msg.readUInt8(off);
    off += 1;
    if (len === 0) break;
    if (len > 63) throw new Error('compressed or bad label');
    labels.push(msg.toString('latin1', off, off + len));
    off += len;
  }
  const qtype = msg.readUInt16BE(off);
  off += 4; // QTYPE + QCLASS
  // The question is echoed byte for byte (the resolver compares it with what it sent).
  return { id, flags, question: msg.subarray(12, off), name: normalize(labels.join('.')), qtype };
}

/** A resource record whose owner is a pointer to the question name (offset 12). */
function rr(type: number, rdata: Buffer): Buffer {
  const b = Buffer.alloc(12);
  b.writeUInt16BE(0xc00c, 0);
  b.writeUInt16BE(type, 2);
  b.writeUInt16BE(1, 4); // class IN
  b.writeUInt32BE(0, 6); // TTL 0: nothing cached
  b.writeUInt16BE(rdata.length, 10);
  return Buffer.concat([b, rdata]);
}

function encodeA(addr: string): Buffer {
  if (!isIPv4(addr)) throw new Error(`not an IPv4 address: ${addr}`);
  return Buffer.from(addr.split('.').map(Number));
}

function encodeAAAA(addr: string): Buffer {
  if (!isIPv6(addr) || addr.includes('.')) throw new Error(`not a plain IPv6 address: ${addr}`);
  const [head = '', tail] = addr.split('::');
  const groups = (s: string): string[] => (s === '' ? [] : s.split(':'));
  const h = groups(head);
  const t = tail === undefined ? [] : groups(tail);
  const all = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const b = Buffer.alloc(16);
  all.forEach((g, i) => b.writeUInt16BE(parseInt(g, 16), i * 2));
  return b;
}

function encodeName(name: string): Buffer {
  const parts = name
    .replace(/\.$/, '')
    .split('.')
    .filter(Boolean)
    .map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'latin1')]));
  return Buffer.concat([...parts, Buffer.from([0])]);
}

function encodeSrv(s: SrvRecord): Buffer {
  const b = Buffer.alloc(6);
  b.writeUInt16BE(s.priority ?? 0, 0);
  b.writeUInt16BE(s.weight ?? 100, 2);
  b.writeUInt16BE(s.port, 4);
  return Buffer.concat([b, encodeName(s.target)]);
}
