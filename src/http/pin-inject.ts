// roomgate's injection of the per-tab room pin into HTML answers (room.pinInject, off by default;
// docs/per-tab-rooms.md): the page gets `<meta name="roomgate-pin">` with its room signed and the
// external script tag (with its SRI hash) right after its `<head>` tag. Pure: which answers qualify,
// the tags, and a scanner that finds where they go in a body that arrives in pieces of any size.
// Both page transports (src/proxy/page-relay.ts, src/proxy/http-proxy.ts) and the page cache's
// fills (src/cache/fill.ts) use it, each holding the answer's head until the scanner has decided
// (so Content-Length is exact either way) and never passing a byte past the answer's framing:
// the scanner only ever sees body bytes the framing already delimited.

/**
 * How far into a body `<head>` is looked for: a page puts its doctype, comments and `<html>` first,
 * a few hundred bytes. Past this much the answer goes on unchanged, so a backend sending a huge
 * preamble makes roomgate hold at most this (plus one read) before passing it on.
 */
export const MAX_SCAN_BYTES = 16 * 1024;

/** The fields a page loses when the pin is put in: its body is no longer the backend's (validators) or its length. */
export const DROPPED_WHEN_INJECTED: ReadonlySet<string> = new Set(['content-length', 'etag', 'last-modified', 'content-md5', 'digest', 'repr-digest', 'content-digest']);

/**
 * Whether an answer may get the pin, from its status and fields: a 200 whose Content-Type is
 * text/html (any parameters), with no Content-Encoding other than identity (a compressed body is
 * passed on as it is), no Content-Range, and no `Cache-Control: no-transform` (RFC 9110 7.7: a
 * proxy must not change such a body). A field given twice (Content-Type, Content-Encoding) is not
 * guessed at: not injected.
 */
export function injectable(status: number, fields: Iterable<readonly [string, string]>): boolean {
  if (status !== 200) return false;
  let html = false;
  let types = 0;
  for (const [name, value] of fields) {
    if (name.length < 12 || name.length > 16) continue;
    const lower = name.toLowerCase();
    if (lower === 'content-type') {
      types++;
      html = mediaType(value) === 'text/html';
    } else if (lower === 'content-encoding') {
      if (!value.split(',').every((t) => t.trim().toLowerCase() === 'identity')) return false;
    } else if (lower === 'content-range') return false;
    else if (lower === 'cache-control' && /(?:^|,)[ \t]*no-transform[ \t]*(?:,|$)/i.test(value)) return false;
  }
  return html && types === 1;
}

/** A flat field list ([name, value, ...], node:http's rawHeaders shape) as pairs. */
export function* pairsOf(flat: readonly string[]): Generator<readonly [string, string]> {
  for (let i = 0; i + 1 < flat.length; i += 2) yield [flat[i] as string, flat[i + 1] as string];
}

/** A flat field list without the fields injection drops; `length`: the new Content-Length, or null for none. */
export function injectedFields(flat: readonly string[], length: number | null): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    if (!DROPPED_WHEN_INJECTED.has((flat[i] as string).toLowerCase())) out.push(flat[i] as string, flat[i + 1] as string);
  }
  if (length !== null) out.push('Content-Length', String(length));
  return out;
}

function mediaType(value: string): string {
  const semi = value.indexOf(';');
  return (semi === -1 ? value : value.slice(0, semi)).trim().toLowerCase();
}

export interface PinTagOptions {
  /** The script's path (/_roomgate/room-pin.v1.js) and its SRI value. */
  readonly scriptPath: string;
  readonly sri: string;
  /** room.pinParam; said in data-param when it is not the script's default. */
  readonly param: string;
}

/**
 * The tags put after `<head>` for a pin: the signed pin in a meta tag, then the external script
 * (no inline code: a strict CSP passes). All but the pin is made once.
 */
export function pinTagsWith(o: PinTagOptions): (pin: string) => Buffer {
  const param = o.param === 'roomgate_pin' ? '' : ` data-param="${attr(o.param)}"`;
  const before = '<meta name="roomgate-pin" content="';
  const after = `"${param}><script src="${attr(o.scriptPath)}" integrity="${attr(o.sri)}" crossorigin="anonymous"></script>`;
  return (pin) => Buffer.from(before + attr(pin) + after, 'utf8');
}

/** The tags for one pin (pinTagsWith, made once per call). */
export function pinTags(pin: string, o: PinTagOptions): Buffer {
  return pinTagsWith(o)(pin);
}

function attr(v: string): string {
  return v.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
}

const EMPTY = Buffer.alloc(0);
const LT = 0x3c;
const GT = 0x3e;

/** Where the scan is: between tags, in a comment, in a declaration (<!doctype>, <?xml?>), or inside the <html> or <head> tag. */
type Mode = 'text' | 'comment' | 'decl' | 'html' | 'head';

/**
 * Finds the end of a page's `<head>` tag in a body fed piece by piece. Before it, only a doctype,
 * comments, processing instructions, white space and the `<html>` tag may come (what a page has
 * there); any other tag first (a `<body>`, a `<header>`, a `<script>`) means the page has no head
 * of its own where the pin could go: not injected. Tag names compare without case; quoted
 * attribute values may hold `>`. The scan resumes where it stopped, so a body split at every byte
 * costs what it costs whole.
 */
export class HeadScanner {
  private kept: Buffer = EMPTY;
  private pos = 0;
  private mode: Mode = 'text';
  private quote = 0;
  private decided = false;
  /** The tags went in (set once decided). */
  injected = false;

  constructor(
    private readonly tags: Buffer,
    private readonly max = MAX_SCAN_BYTES,
  ) {}

  /** The bytes the tags added to the body (0 when they did not go in). */
  get added(): number {
    return this.injected ? this.tags.length : 0;
  }

  /** Undecided: the bytes kept so far (none of them sent yet). */
  get pending(): boolean {
    return !this.decided;
  }

  /**
   * Body bytes. null: kept (copied), nothing to send yet. Else the pieces to send now, in order,
   * the tags in place or not (views of `chunk` where they can be: the caller hands over a buffer
   * it does not reuse, as socket and stream reads are); the scanner is then done, and every
   * later byte of the body goes on unchanged without it.
   */
  feed(chunk: Buffer): Buffer[] | null {
    if (this.decided) return [chunk];
    this.kept = this.kept.length === 0 ? chunk : Buffer.concat([this.kept, chunk]);
    const at = this.scan();
    if (at !== null) return this.decide(at);
    // Kept past this call: copied, so the caller's buffer is not held.
    if (this.kept === chunk) this.kept = Buffer.from(chunk);
    return null;
  }

  /** The body ended undecided: the kept bytes, unchanged. */
  flush(): Buffer[] {
    return this.decide(-1);
  }

  private decide(at: number): Buffer[] {
    this.decided = true;
    const kept = this.kept;
    this.kept = EMPTY;
    if (at < 0) return kept.length === 0 ? [] : [kept];
    this.injected = true;
    return [kept.subarray(0, at), this.tags, kept.subarray(at)].filter((b) => b.length > 0);
  }

  /** The offset right after `<head ...>`, -1 when the page has none where it can go, null: more bytes needed. */
  private scan(): number | null {
    const buf = this.kept;
    const limit = Math.min(buf.length, this.max);
    while (this.pos < limit) {
      const step = this.step(buf, limit);
      if (step !== undefined) return step;
    }
    return buf.length >= this.max ? -1 : null;
  }

  /** One move of the scan from `pos`: a decision, or undefined to go on (pos moved, or at limit). */
  private step(buf: Buffer, limit: number): number | null | undefined {
    switch (this.mode) {
      case 'comment': {
        const end = buf.indexOf('-->', this.pos, 'latin1');
        if (end === -1 || end + 3 > limit) return this.waitFrom(Math.max(this.pos, limit - 2), limit);
        this.pos = end + 3;
        this.mode = 'text';
        return undefined;
      }
      case 'decl': {
        const end = buf.indexOf(GT, this.pos);
        if (end === -1 || end >= limit) return this.waitFrom(limit, limit);
        this.pos = end + 1;
        this.mode = 'text';
        return undefined;
      }
      case 'html':
      case 'head':
        return this.inTag(buf, limit);
      default:
        return this.inText(buf, limit);
    }
  }

  /** Nothing decided in what has come: the scan resumes at `from` with more bytes (or stops at the limit). */
  private waitFrom(from: number, limit: number): -1 | null {
    this.pos = from;
    return limit < this.kept.length || this.kept.length >= this.max ? -1 : null;
  }

  private inTag(buf: Buffer, limit: number): number | null | undefined {
    for (let i = this.pos; i < limit; i++) {
      const c = buf[i] as number;
      if (this.quote !== 0) {
        if (c === this.quote) this.quote = 0;
      } else if (c === 0x22 || c === 0x27) this.quote = c;
      else if (c === GT) {
        if (this.mode === 'head') return i + 1;
        this.pos = i + 1;
        this.mode = 'text';
        return undefined;
      }
    }
    return this.waitFrom(limit, limit);
  }

  private inText(buf: Buffer, limit: number): number | null | undefined {
    const lt = buf.indexOf(LT, this.pos);
    if (lt === -1 || lt >= limit) return this.waitFrom(limit, limit);
    // What follows '<': at most "!--" or a tag name and the byte after it decide.
    const next = buf[lt + 1];
    if (next === undefined) return this.waitFrom(lt, limit);
    if (next === 0x21 /* ! */ || next === 0x3f /* ? */) {
      if (next === 0x21 && lt + 4 > buf.length && buf.subarray(lt, lt + 4).every((b, k) => b === '<!--'.charCodeAt(k))) return this.waitFrom(lt, limit);
      const comment = buf[lt + 2] === 0x2d && buf[lt + 3] === 0x2d;
      this.mode = next === 0x21 && comment ? 'comment' : 'decl';
      this.pos = lt + (this.mode === 'comment' ? 4 : 2);
      return undefined;
    }
    let end = lt + 1;
    while (end < buf.length && end - lt <= 5 && isNameByte(buf[end] as number)) end++;
    if (end === buf.length && end - lt <= 5) return this.waitFrom(lt, limit);
    const name = buf.toString('latin1', lt + 1, end).toLowerCase();
    if (name !== 'head' && name !== 'html') return -1;
    this.mode = name;
    this.quote = 0;
    this.pos = end;
    return undefined;
  }
}

function isNameByte(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39);
}

/** The tags for a page of `room`, its pin signed now (built from the configuration by the composition); null when injection is off. */
export type PinTagsFor = (room: string) => Buffer;
