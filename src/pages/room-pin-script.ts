// The browser script for per-tab rooms (docs/per-tab-rooms.md), served by roomgate at
// ROOM_PIN_SCRIPT_PATH. A page that carries its room as a signed pin
// (<meta name="roomgate-pin" content="room.ts.sig">, rendered by roomgate_kit's template tag) and
// loads this script opens every WebSocket to its own host with the pin in the query
// (room.pinParam), whatever URL the app's client builds: djust's fixed /ws/live/, its meta-tag
// path and its one-time fallback to /ws/live/ all go through `new WebSocket`. roomgate routes such
// a socket by the pin before the room cookie, which belongs to the browser, not to the tab.
//
// The text below is served byte for byte and never changes under this name: browsers cache it for
// a year as immutable and pages check it by its SRI hash (ROOM_PIN_SCRIPT_SRI; python/roomgate_kit
// and docs/per-tab-rooms.md carry the same value, and test/pages/room-pin-script.test.ts checks
// all three). A new version gets a new name (room-pin.v2.js). CSP-friendly: no inline code, no
// eval, no string timers; the page's CSP needs only to allow this script (script-src 'self', or
// its hash).
import { createHash } from 'node:crypto';

/** Where the public port serves the script (a GET or HEAD; `room.sources` must include `pin`). */
export const ROOM_PIN_SCRIPT_PATH = '/_roomgate/room-pin.v1.js';

export const ROOM_PIN_SCRIPT = `/* roomgate room pin v1: docs/per-tab-rooms.md */
(function () {
  'use strict';
  var meta = document.querySelector('meta[name="roomgate-pin"]');
  var pin = meta ? meta.getAttribute('content') : null;
  var Native = window.WebSocket;
  // No pin, no WebSocket, or this script already ran (loaded twice): leave the page alone.
  if (!pin || typeof Native !== 'function' || Native.roomgatePin) return;
  var param = meta.getAttribute('data-param') || 'roomgate_pin';
  var paths = (meta.getAttribute('data-paths') || '/').split(/\\s+/).filter(Boolean);
  function pinned(url) {
    var u;
    try {
      u = new URL(String(url), location.href);
    } catch (e) {
      return url; // the native constructor reports the bad URL itself
    }
    // Only sockets through this gateway: the page's own host, a path it proxies.
    if (u.host !== location.host) return url;
    if (!paths.some(function (p) { return u.pathname.indexOf(p) === 0; })) return url;
    if (u.searchParams.has(param)) return url;
    u.search = (u.search ? u.search + '&' : '?') + param + '=' + encodeURIComponent(pin);
    return u.href;
  }
  class WebSocket extends Native {
    constructor(url, protocols) {
      super(pinned(url), protocols);
    }
  }
  Object.defineProperty(WebSocket, 'roomgatePin', { value: pin });
  window.WebSocket = WebSocket;
})();
`;

/** The script's Subresource Integrity value, for `<script integrity="...">`. */
export const ROOM_PIN_SCRIPT_SRI = `sha384-${createHash('sha384').update(ROOM_PIN_SCRIPT, 'utf8').digest('base64')}`;

/** The answer's fields: immutable for a year (the name is versioned), never sniffed. */
export const ROOM_PIN_SCRIPT_HEADERS: Readonly<Record<string, string>> = Object.freeze({
  'Content-Type': 'text/javascript; charset=utf-8',
  'Cache-Control': 'public, max-age=31536000, immutable',
  'X-Content-Type-Options': 'nosniff',
  ETag: `"${ROOM_PIN_SCRIPT_SRI}"`,
  'Content-Length': String(Buffer.byteLength(ROOM_PIN_SCRIPT)),
});
