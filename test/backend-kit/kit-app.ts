// A small room app on the backend kit, in this process: a counter per room, a socket's own state
// (its name and how many frames it was sent) for the resume. What the kit's tests run real signed
// calls and real sockets against; the demo backend (examples/demo-backend) is the larger one.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import { CLOSE_WRONG_ROOM, createBackendKit, mountRefusal, type BackendKit, type BackendKitOptions } from '../../src/backend-kit/index.js';

export interface KitApp {
  readonly url: string;
  readonly port: number;
  readonly kit: BackendKit;
  /** Each room's counter (the app's state). */
  readonly counts: Map<string, number>;
  /** What the app saw: greetings, resumes, applied messages, drops. */
  readonly seen: string[];
  close(): Promise<void>;
}

interface Session {
  name: string;
  sent: number;
}

export async function startKitApp(id: string, keys: () => readonly string[], o: Partial<BackendKitOptions> = {}): Promise<KitApp> {
  const counts = new Map<string, number>();
  const seen: string[] = [];
  const sessions = new WeakMap<WebSocket, Session>();
  const wss = new WebSocketServer({ noServer: true });
  const send = (ws: WebSocket, msg: Record<string, unknown>): void => {
    const s = sessions.get(ws);
    if (s !== undefined) s.sent += 1;
    ws.send(JSON.stringify({ ...msg, n: s?.sent ?? 0 }));
  };
  const serve = (ws: WebSocket, room: string | null): void => {
    ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as { type: string; room?: string };
      if (m.type === 'mount') {
        const refusal = mountRefusal(room, m.room ?? null);
        if (refusal !== null) return ws.close(CLOSE_WRONG_ROOM, 'wrong room');
        return send(ws, { type: 'mounted', count: counts.get(room as string) ?? 0 });
      }
      if (room === null) return;
      if (!kit.rooms.live(room)) return send(ws, { type: 'error', error: 'room-moving' });
      counts.set(room, (counts.get(room) ?? 0) + 1);
      send(ws, { type: 'count', count: counts.get(room) });
    });
  };
  const kit: BackendKit = createBackendKit({
    backendId: id,
    keys,
    wss,
    onSocket(ws, _req, info) {
      sessions.set(ws, { name: `s${seen.length}`, sent: 0 });
      seen.push(`greeted ${info.room ?? '-'} ${info.socketId ?? '-'}`);
      send(ws, { type: 'connect' });
      serve(ws, info.room);
    },
    exportSocket: (_room, ws) => sessions.get(ws),
    resumeSocket(ws, _req, r) {
      sessions.set(ws, r.state as Session);
      seen.push(`resumed ${r.room} ${r.socketId} ${(r.state as Session).name}`);
      serve(ws, r.room);
    },
    exportRoom: (room) => (counts.has(room) ? Buffer.from(JSON.stringify({ room, count: counts.get(room) })) : null),
    importRoom(room, blob) {
      const parsed = JSON.parse(blob.toString()) as { room?: unknown; count?: unknown };
      if (parsed.room !== room || typeof parsed.count !== 'number') return false;
      counts.set(room, parsed.count);
      return true;
    },
    applyMessages(room, socket, messages) {
      counts.set(room, (counts.get(room) ?? 0) + messages.length);
      seen.push(`applied ${room} ${socket} ${messages.length}`);
    },
    deliver(room, message) {
      const sockets = kit.rooms.sockets(room);
      for (const ws of sockets) send(ws, { type: 'push', message: message as Record<string, unknown> });
      return sockets.length;
    },
    onDrop: (room) => {
      counts.delete(room);
      seen.push(`dropped ${room}`);
    },
    log: (line) => seen.push(`log ${line}`),
    ...o,
  });
  const server = http.createServer((req, res) => {
    if (!kit.handleRequest(req, res)) res.writeHead(404).end();
  });
  server.on('upgrade', (req, socket, head) => kit.handleUpgrade(req, socket, head));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    kit,
    counts,
    seen,
    async close() {
      kit.close();
      for (const ws of wss.clients) ws.terminate();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
