// The connection of one health check, behind one small interface (ProbeLink), two ways: a Node
// socket (net, or tls for an https:// backend, the host looked up in the kept answers), or the
// addon's probe (native/probe.cc: a libuv handle driven from C++ on Node's own loop) for a plain
// check of an IP address. The check itself (what to write, how to judge the answer) is the same
// either way: health.ts and health-http-probe.ts see only these events.
//
// Why a native probe: a check runs once per backend every couple of seconds, so its JavaScript
// never leaves V8's first tiers, and a net.Socket's construction, connect, stream and destroy
// machinery cost about half a millisecond of CPU per check, most of what an idle gateway's
// JavaScript thread still did once the relay moved the tunnels' bytes to its own thread
// (docs/performance.md, "The health checks' connections"). The native probe makes one JavaScript
// call per event that matters (a chunk of the answer, the end, an error) instead.
import net from 'node:net';
import tls from 'node:tls';
import { tlsFailure } from './backend-tls.js';
import { backendHosts } from './host-addresses.js';

/** Where a check connects (a HealthTarget is one). */
export interface ProbeAddress {
  readonly host: string;
  readonly port: number;
}

/** What a check hears of its connection; nothing after its close(). */
export interface ProbeEvents {
  /** Connected (TLS: the handshake verified); told only to a check with no request to write. */
  connected(): void;
  /** A chunk of the answer. */
  data(chunk: Buffer): void;
  /** The backend ended its side, or the connection closed without an error. */
  end(): void;
  /** The connection failed: a short reason, e.g. "ECONNREFUSED" or "tls: CERT_HAS_EXPIRED ...". */
  error(reason: string): void;
}

export interface ProbeLink {
  /** Ends the connection at once (idempotent); no event follows. */
  close(): void;
}

/**
 * Opens a check's connection to `address` (TLS with `secure`), writes `request` once connected
 * (null: a connect check, told connected() instead), and tells `on` what happens. Never throws
 * for a backend's doing: a failure to connect is an error() event, asynchronously.
 */
export type OpenProbe = (address: ProbeAddress, secure: tls.ConnectionOptions | null, request: string | null, on: ProbeEvents) => ProbeLink;

/**
 * A fresh connection to the backend, as the proxy makes one: net.connect, or tls.connect with the
 * backend's TLS options; the host name looked up in the kept answers. Emits 'connect' (plain) or
 * 'secureConnect' (TLS) once it is usable.
 */
export function probeConnect(address: ProbeAddress, secure: tls.ConnectionOptions | null): net.Socket {
  const options = { host: address.host, port: address.port, lookup: backendHosts.lookup };
  return secure ? tls.connect({ ...options, ...secure }) : net.connect(options);
}

/** The check's connection on a Node socket: any backend (TLS, a host name). */
export const socketProbe: OpenProbe = (address, secure, request, on) => {
  const socket = probeConnect(address, secure);
  let open = true;
  // The listener stays after close(): destroy() may still emit 'error', and an unhandled one would
  // crash the process.
  socket.on('error', (err: NodeJS.ErrnoException) => {
    if (open) on.error(tlsFailure(err) ?? err.code ?? err.message);
  });
  socket.once(secure ? 'secureConnect' : 'connect', () => {
    if (!open) return;
    if (request === null) on.connected();
    else socket.write(request, 'latin1');
  });
  if (request !== null) {
    socket.on('data', (chunk: Buffer) => {
      if (open) on.data(chunk);
    });
    // 'close' covers a connection that goes without an 'end' (an error came first: end() is
    // then a second verdict the check ignores).
    const ended = (): void => {
      if (open) on.end();
    };
    socket.once('end', ended);
    socket.once('close', ended);
  }
  return {
    close(): void {
      open = false;
      socket.destroy();
    },
  };
};

/** The addon's half of the native probe (native/probe.cc). */
export interface ProbeAddon {
  /** A handle, or the name of the error when the connect cannot even start. An empty request: a connect check. */
  probeOpen(ip: string, port: number, request: Buffer, onEvent: (kind: number, arg?: Buffer | string) => void): object | string;
  probeClose(handle: object): void;
}

const NO_REQUEST = Buffer.alloc(0);
const CONNECTED = 0;
const DATA = 1;
const END = 2;

/**
 * The check's connection through the addon when it can take it (a plain connection to an IP
 * address), else on a Node socket (TLS, a host name: the kept answers and Node's address
 * selection stay the one way names are connected).
 */
export function nativeProbe(addon: ProbeAddon): OpenProbe {
  return (address, secure, request, on) => {
    if (secure !== null || net.isIP(address.host) === 0) return socketProbe(address, secure, request, on);
    const bytes = request === null ? NO_REQUEST : Buffer.from(request, 'latin1');
    let handle: object | string;
    try {
      handle = addon.probeOpen(address.host, address.port, bytes, (kind, arg) => {
        if (kind === DATA) on.data(arg as Buffer);
        else if (kind === CONNECTED) on.connected();
        else if (kind === END) on.end();
        else on.error(arg as string);
      });
    } catch {
      // An address the addon does not take (e.g. an IPv6 scope id longer than any interface name,
      // from a discovered record): Node's socket says what it makes of it.
      return socketProbe(address, secure, request, on);
    }
    if (typeof handle === 'string') {
      // As a socket tells it: after the caller has its link.
      let open = true;
      process.nextTick(() => {
        if (open) on.error(handle);
      });
      return {
        close(): void {
          open = false;
        },
      };
    }
    return {
      close(): void {
        addon.probeClose(handle);
      },
    };
  };
}
