// A stored answer as the byte-level HTTP/1.1 path writes it (src/proxy/cache-answers.ts): what
// does not vary per request (the status line, the stored fields, the framing) made into bytes once,
// when the answer is stored, with the body after them in the same Buffer. A hit then writes that
// head, a short line of what does vary per request (Age, Cache-Status, the room cookie, Date,
// HSTS, the connection's fields) and the body, in one write to the kernel: no per-hit field list,
// no head string of the stored fields. The other paths (node:http, h2) write the stored fields
// through their own objects and never read this.

export interface WireAnswer {
  /** The status line and the stored fields ("HTTP/1.1 200 OK\r\nName: value\r\n..."), latin1. */
  readonly head: Buffer;
  /** The body: a view into the same memory as `head`. */
  readonly body: Buffer;
  /** The stored fields include a Date (the backend's): the hit does not add one. */
  readonly hasDate: boolean;
  /** The stored fields include a Strict-Transport-Security: the hit does not add the gateway's. */
  readonly hasSts: boolean;
  /** "Content-Length: N\r\n", or '' for a 204 or 304 (RFC 9110 6.4.1: no framing for a body). */
  readonly framing: string;
}

const CRLF = '\r\n';

/** RFC 9110 6.4.1: a 204 or 304 never has a body (nor framing for one). */
export function hasBody(status: number): boolean {
  return status !== 204 && status !== 304;
}

/**
 * The wire form of a stored answer: `headers` are the stored end-to-end fields (no framing, no
 * Age). The head is written latin1, as the byte-level path writes every head.
 */
export function wireAnswer(status: number, reason: string, headers: readonly string[], body: Buffer): WireAnswer {
  let text = `HTTP/1.1 ${status} ${reason}${CRLF}`;
  let hasDate = false;
  let hasSts = false;
  for (let i = 0; i + 1 < headers.length; i += 2) {
    const name = headers[i] as string;
    const lower = name.toLowerCase();
    if (lower === 'date') hasDate = true;
    else if (lower === 'strict-transport-security') hasSts = true;
    text += `${name}: ${headers[i + 1] as string}${CRLF}`;
  }
  const headLength = Buffer.byteLength(text, 'latin1');
  const bytes = Buffer.allocUnsafeSlow(headLength + body.length);
  bytes.write(text, 0, 'latin1');
  body.copy(bytes, headLength);
  return {
    head: bytes.subarray(0, headLength),
    body: bytes.subarray(headLength),
    hasDate,
    hasSts,
    framing: hasBody(status) ? `Content-Length: ${body.length}${CRLF}` : '',
  };
}
