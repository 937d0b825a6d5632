/**
 * The reference proxy of the side-by-side comparison: http-proxy-3 configured the usual way (one
 * target, X-Forwarded-* added, WebSockets on, keep-alive to the backend). Started by
 * bench/conformance/targets.ts as `node reference-proxy.js PORT TARGET_URL`.
 */
import http from 'node:http';
import type { Socket } from 'node:net';
import { createProxyServer } from 'http-proxy-3';

const [port = '0', target = 'http://127.0.0.1:8000'] = process.argv.slice(2);
const proxy = createProxyServer({ target, xfwd: true, ws: true, agent: new http.Agent({ keepAlive: true }) });

// Without an error listener http-proxy-3 rethrows and the process dies. The error can also come
// after a 101 (a live WebSocket): then the socket is only closed, never written to.
proxy.on('error', (_err, _req, res) => {
  if (res instanceof http.ServerResponse) {
    if (!res.headersSent) {
      res.writeHead(502, { 'Content-Type': 'text/plain', Connection: 'close' });
      res.end('bad gateway\n');
    } else res.destroy();
  } else (res as Socket).destroy();
});

const server = http.createServer((req, res) => proxy.web(req, res));
server.on('upgrade', (req, socket: Socket, head: Buffer) => {
  socket.on('error', () => socket.destroy());
  proxy.ws(req, socket, head);
});
server.listen(Number(port), '127.0.0.1', () => {
  const addr = server.address();
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port: typeof addr === 'object' && addr ? addr.port : 0 })}\n`);
});
process.on('SIGTERM', () => process.exit(0));
