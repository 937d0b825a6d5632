/**
 * The two relays the native-relay bench compares with nginx. One process, one core, the same front
 * for both (read the upgrade request head, pick the backend from the `room` cookie as nginx's
 * hash does, connect), then the tunnel: `--mode js` pipes the two sockets both ways in JavaScript,
 * `--mode native` hands them to roomgate's native relay (src/proxy/native-relay.ts, native/relay.cc:
 * the addon `npm ci` builds), head included, with nothing of roomgate around it: the floor.
 *
 *   node dist/bench/experiments/native-relay/relay-server.js --mode js|native --backends 4001,4002,4003
 *        [--port 0] [--silence-ms 0]
 *
 * Prints `{"event":"listening","port":N}`; exits on SIGTERM or when its stdin closes. A prototype:
 * no TLS, no header rewriting, no limits; not for anything but this bench.
 */
import net, { type Socket } from 'node:net';
import { parseArgs } from 'node:util';
import { chooseRelay, NativeRelay } from '../../../src/proxy/native-relay.js';

const { values } = parseArgs({
  options: {
    mode: { type: 'string', default: 'js' },
    backends: { type: 'string', default: '' },
    port: { type: 'string', default: '0' },
    'silence-ms': { type: 'string', default: '0' },
  },
});
const mode = values.mode;
if (mode !== 'js' && mode !== 'native') throw new Error(`--mode js|native, got ${mode}`);
const ports = values.backends.split(',').filter(Boolean).map(Number);
if (ports.length === 0 || ports.some((p) => !Number.isInteger(p))) throw new Error('--backends: a list of ports');
const silenceMs = Number(values['silence-ms']);
const MAX_HEAD = 16 * 1024;

// The relay closes a silent tunnel itself (silenceMs), as roomgate's does.
const relay = mode === 'native' ? new NativeRelay(chooseRelay('native').addon!, 1_000) : null;

/** FNV-1a of the room: any fixed mapping keeps a room's sockets on one backend. */
function backendFor(head: string): number {
  const room = /^cookie:.*?(?:^|[;\s])room=([^;\r\n]*)/im.exec(head)?.[1] ?? '';
  let h = 0x811c9dc5;
  for (let i = 0; i < room.length; i++) h = Math.imul(h ^ room.charCodeAt(i), 0x01000193);
  return ports[(h >>> 0) % ports.length]!;
}

function tunnel(client: Socket, first: Buffer): void {
  const backend = net.connect({ port: backendFor(first.toString('latin1')), host: '127.0.0.1', noDelay: true });
  backend.on('error', () => client.destroy());
  backend.once('connect', () => {
    if (client.destroyed) return void backend.destroy();
    if (relay) {
      // The client's descriptor is lent until the relay ends the tunnel; the backend's is given up.
      relay.adopt({ nativeEnded: () => client.destroy(), nativeReleased: () => client.destroy() }, { client, backend, toBackend: first, toClient: Buffer.alloc(0), silenceMs, idleMs: 0, writeTimeoutMs: 0, lingerMs: 5_000, follow: false });
      backend.destroy();
      return;
    }
    backend.write(first);
    client.pipe(backend);
    backend.pipe(client);
    client.once('close', () => backend.destroy());
    backend.once('close', () => client.destroy());
  });
}

const server = net.createServer({ noDelay: true }, (client) => {
  let got = Buffer.alloc(0);
  client.on('error', () => client.destroy());
  const onData = (chunk: Buffer): void => {
    got = Buffer.concat([got, chunk]);
    if (got.indexOf('\r\n\r\n') < 0) {
      if (got.length > MAX_HEAD) client.destroy();
      return;
    }
    client.off('data', onData);
    client.pause();
    tunnel(client, got);
  };
  client.on('data', onData);
});

server.listen({ port: Number(values.port), host: '127.0.0.1', backlog: 4096 }, () => {
  const addr = server.address();
  process.stdout.write(`${JSON.stringify({ event: 'listening', port: typeof addr === 'object' && addr ? addr.port : 0, mode })}\n`);
});

const stop = (): void => {
  relay?.stop();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
process.stdin.on('end', stop);
process.stdin.on('error', stop);
process.stdin.resume();
