/**
 * What the bench backend and the load generator say to each other, and the request a client sends.
 * Shared by backend.ts and loadgen.ts (separate processes) and the orchestrator.
 *
 * Frames are short fixed-layout text so that neither side spends its (shared) core on JSON:
 *   welcome   (backend -> client, once)   `W <backendId> <room>`
 *   broadcast (backend -> room, 5/s)      `B <ts> <room> <seq> ....` padded to BROADCAST_BYTES
 *   input     (client -> backend, 2.5/s)  `{"type":"event",...}` padded to INPUT_BYTES
 * <ts> is wall-clock milliseconds with microseconds (performance.timeOrigin + performance.now()),
 * written with exactly TS_WIDTH characters: both processes run on this machine, so the clock is
 * the same and the difference is the delivery latency.
 */

export const BROADCAST_BYTES = 140;
export const INPUT_BYTES = 60;
export const PAGE_BYTES = 10 * 1024;
/** Broadcasts per second per room, and client inputs per second. */
export const BROADCAST_HZ = 5;
export const INPUT_EVERY_MS = 400;
/** "1733160000123.456": 13 digits, a dot, 3 decimals. */
export const TS_WIDTH = 17;
/** A socket of the game workload; sockets whose URL carries ?idle=1 get no broadcasts (burst, scale). */
export const WS_PATH = '/ws/live/';
export const PAGE_PATH = '/page/';

/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes of one machine. */
export function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

export function formatTs(ms: number): string {
  return ms.toFixed(3).padStart(TS_WIDTH, '0');
}

/** The send timestamp of a broadcast frame (a Buffer from ws), or NaN for any other frame. */
export function broadcastTs(frame: Buffer): number {
  if (frame.length < 2 + TS_WIDTH || frame[0] !== 0x42 /* B */) return Number.NaN;
  // Digits by hand (15,000 frames/s on a shared core): "dddddddddddddd.ddd".
  let ms = 0;
  for (let i = 2; i < 2 + TS_WIDTH - 4; i++) ms = ms * 10 + (frame[i]! - 48);
  const frac = (frame[TS_WIDTH - 1]! - 48) * 100 + (frame[TS_WIDTH]! - 48) * 10 + (frame[TS_WIDTH + 1]! - 48);
  return ms + frac / 1000;
}

/** `W <backend> <room>` -> [backend, room], or null. */
export function parseWelcome(frame: Buffer): [string, string] | null {
  if (frame[0] !== 0x57 /* W */) return null;
  const parts = frame.toString('latin1').split(' ');
  return parts.length === 3 ? [parts[1]!, parts[2]!] : null;
}

/** Pads `s` with dots to exactly `bytes` (ASCII only). */
export function padTo(s: string, bytes: number): string {
  return s.length >= bytes ? s : s + '.'.repeat(bytes - s.length);
}

/**
 * The room cookie among others, as a browser that has visited a Django site sends it: analytics,
 * session and CSRF cookies first, then the plain `room` cookie (what nginx and HAProxy hash) and
 * roomgate's signed `roomgate_room` (what roomgate reads), then a preference cookie.
 */
export function cookieHeader(room: string, signed: string, seed: number): string {
  const hex = (n: number, len: number): string => {
    let s = '';
    let x = (Math.imul(n, 2654435761) + 12345) >>> 0;
    while (s.length < len) {
      x = (Math.imul(x, 1103515245) + 12345) >>> 0;
      s += x.toString(16).padStart(8, '0');
    }
    return s.slice(0, len);
  };
  return (
    `_ga=GA1.1.${1_000_000_000 + seed}.1733160000; sessionid=${hex(seed, 32)}; ` +
    `csrftoken=${hex(seed + 7, 64)}; room=${room}; roomgate_room=${signed}; theme=dark; django_language=en`
  );
}

/** Headers a current desktop browser sends on a same-origin WebSocket (besides the Sec-WebSocket-* ones). */
export function browserHeaders(origin: string, cookie: string): Record<string, string> {
  return {
    Origin: origin,
    'User-Agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
    'Accept-Encoding': 'gzip, deflate, br, zstd',
    'Accept-Language': 'en-US,en;q=0.9,fr;q=0.8',
    'Cache-Control': 'no-cache',
    Pragma: 'no-cache',
    // What a browser offers; the bench backend does not accept it, so frames stay uncompressed.
    'Sec-WebSocket-Extensions': 'permessage-deflate; client_max_window_bits',
    Cookie: cookie,
  };
}

/** The same for a page GET (wrk sends these). */
export function pageHeaders(cookie: string): Record<string, string> {
  return {
    'User-Agent': 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36',
    Accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8',
    'Accept-Encoding': 'gzip, deflate, br, zstd',
    'Accept-Language': 'en-US,en;q=0.9,fr;q=0.8',
    'Upgrade-Insecure-Requests': '1',
    Cookie: cookie,
  };
}
