// What a backend's answer must be before roomgate relays it: one set of rules for every answer a
// backend gives (a page, the page cache's fetch, the answer to a WebSocket handshake, 101 or any
// other), whichever parser read it (node:http's client, or the strict reader of
// src/http/response-head.ts) and whichever front the client came in on. The parsers already refuse
// bad syntax (control bytes in values, conflicting Content-Length, Content-Length with
// Transfer-Encoding) and heads over MAX_RESPONSE_HEAD_BYTES; the rest is here. An answer that
// breaks one gets the client a 502 and a log line, never an exception on the gateway's event loop.
import { maxHeaderSize, type IncomingMessage } from 'node:http';
import { isFieldText } from './syntax.js';

/** Response header lines relayed at most; a longer head is a broken or hostile backend. */
export const MAX_RESPONSE_HEADERS = 200;

/**
 * Bytes of a response head read at most: node:http's client's own limit (16 KB unless node runs
 * with --max-http-header-size), so the strict reader's paths stop where the node:http paths do.
 */
export const MAX_RESPONSE_HEAD_BYTES = maxHeaderSize;

/**
 * Fields an HTTP/2 message carries once at most: node:http2's single-value list (a test holds it
 * to node's behaviour). Sent twice, such a field cannot be relayed to an h2 client as it came, and
 * a cache could not tell which value to use (RFC 9110 5.3: a field meant once, twice, is invalid).
 */
export const SINGLE_VALUE_FIELDS: ReadonlySet<string> = new Set([
  'access-control-allow-credentials',
  'access-control-max-age',
  'access-control-request-method',
  'age',
  'authorization',
  'content-encoding',
  'content-language',
  'content-length',
  'content-location',
  'content-md5',
  'content-range',
  'content-type',
  'date',
  'dnt',
  'etag',
  'expires',
  'from',
  'host',
  'if-match',
  'if-modified-since',
  'if-none-match',
  'if-range',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'range',
  'referer',
  'retry-after',
  'tk',
  'upgrade-insecure-requests',
  'user-agent',
  'x-content-type-options',
]);

/** The lengths of SINGLE_VALUE_FIELDS' names: most names are passed over without lower-casing them. */
const SINGLE_LENGTHS = new Set([...SINGLE_VALUE_FIELDS].map((n) => n.length));

/** An answer's field names as either parser gives them: `count` of them, the i-th by `nameAt`. */
export interface FieldNames {
  readonly count: number;
  nameAt(i: number): string;
}

/** The names of node:http's rawHeaders ([name, value, ...]). */
export function rawNames(raw: readonly string[]): FieldNames {
  return { count: raw.length >> 1, nameAt: (i) => raw[i * 2] as string };
}

/** The names of [name, value] pairs (the strict reader's ResponseHead.headers). */
export function pairNames(pairs: readonly (readonly [string, string])[]): FieldNames {
  return { count: pairs.length, nameAt: (i) => (pairs[i] as readonly [string, string])[0] };
}

/** The first field of SINGLE_VALUE_FIELDS that comes twice (lower case), or null. */
export function repeatedSingleField(names: FieldNames): string | null {
  let seen: Set<string> | null = null;
  for (let i = 0; i < names.count; i++) {
    const name = names.nameAt(i);
    if (!SINGLE_LENGTHS.has(name.length)) continue;
    const lower = name.toLowerCase();
    if (!SINGLE_VALUE_FIELDS.has(lower)) continue;
    if (seen?.has(lower) === true) return lower;
    (seen ??= new Set()).add(lower);
  }
  return null;
}

/**
 * The field rules of every backend answer, pages and handshakes alike: at most
 * MAX_RESPONSE_HEADERS lines, and toward an HTTP/2 client (`h2`) no field HTTP/2 carries once
 * given twice (HTTP/1.1 relays it as sent). Null when the fields may be relayed.
 */
export function answerFieldsProblem(names: FieldNames, h2: boolean): string | null {
  if (names.count > MAX_RESPONSE_HEADERS) return `more than ${MAX_RESPONSE_HEADERS} header lines`;
  return h2 ? h2FieldsProblem(names) : null;
}

/** What HTTP/2 cannot carry of fields HTTP/1.1 can (a field meant once, twice), or null. */
export function h2FieldsProblem(names: FieldNames): string | null {
  const twice = repeatedSingleField(names);
  return twice === null ? null : `${twice} twice (HTTP/2 carries it once)`;
}

/**
 * Why a backend's response head, as node:http's client read it, cannot be relayed (to an h2
 * client when `h2`), or null when it can: what the strict reader refuses as it parses, then the
 * field rules of every answer.
 */
export function responseHeadProblem(res: IncomingMessage, h2 = false): string | null {
  if (res.httpVersionMajor !== 1) return `HTTP version ${res.httpVersion}`;
  const status = res.statusCode ?? 0;
  // RFC 9110 15: three digits from 100 to 599; Node's parser lets 000-099 and 600-999 through.
  if (status < 100 || status > 599) return `status code ${status}`;
  // A switch of protocol the request never asked for: nothing after it can be relayed as HTTP.
  if (status === 101) return 'a 101 to a request without Upgrade';
  if (!isFieldText(res.statusMessage ?? '')) return 'control character in the reason phrase';
  const raw = res.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 17 && name.toLowerCase() === 'transfer-encoding' && (raw[i + 1] as string).trim().toLowerCase() !== 'chunked') {
      // Relayed without its coding applied, a gzip or other transfer coding would corrupt the body.
      return `Transfer-Encoding ${JSON.stringify(raw[i + 1])}`;
    }
  }
  return answerFieldsProblem(rawNames(raw), h2);
}
