// What a backend's answer must be before roomgate relays it. Node's client parser already refuses
// bad syntax (control bytes in values, conflicting Content-Length, Content-Length with
// Transfer-Encoding); these are the rules it leaves to the proxy. An answer that breaks one gets
// the client a 502 and a log line, never an exception on the gateway's event loop.
import type { IncomingMessage } from 'node:http';
import { isFieldText } from './syntax.js';

/** Response header lines relayed at most; a longer head is a broken or hostile backend. */
export const MAX_RESPONSE_HEADERS = 200;

/** Why a backend's response head cannot be relayed, or null when it can. */
export function responseHeadProblem(res: IncomingMessage): string | null {
  if (res.httpVersionMajor !== 1) return `HTTP version ${res.httpVersion}`;
  const status = res.statusCode ?? 0;
  // RFC 9110 15: three digits from 100 to 599; Node's parser lets 000-099 and 600-999 through.
  if (status < 100 || status > 599) return `status code ${status}`;
  // A switch of protocol the request never asked for: nothing after it can be relayed as HTTP.
  if (status === 101) return 'a 101 to a request without Upgrade';
  if (!isFieldText(res.statusMessage ?? '')) return 'control character in the reason phrase';
  const raw = res.rawHeaders;
  if (raw.length > MAX_RESPONSE_HEADERS * 2) return `more than ${MAX_RESPONSE_HEADERS} header lines`;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i] as string;
    if (name.length === 17 && name.toLowerCase() === 'transfer-encoding' && (raw[i + 1] as string).trim().toLowerCase() !== 'chunked') {
      // Relayed without its coding applied, a gzip or other transfer coding would corrupt the body.
      return `Transfer-Encoding ${JSON.stringify(raw[i + 1])}`;
    }
  }
  return null;
}
