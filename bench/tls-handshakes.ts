/**
 * CPU per TLS handshake on the public port, roomgate against nginx in the same run: full
 * handshakes (no session offered) and resumed ones (the session ticket of an earlier connection).
 *
 *   npm run build && node dist/bench/tls-handshakes.js [--rounds 3] [--handshakes 2000] [--concurrency 20] [--tls TLSv1.3]
 *
 * One P-256 certificate made here with openssl; each server pinned to CPU 0, the client (this
 * process) on CPU 1; every connection does its handshake (and, for the ticket, waits for it) and
 * closes; no request is sent, so the figure is the TLS work alone. CPU of the server's process
 * tree from /proc over the run. Interleaved rounds, medians, ratio to nginx. Asserts nothing.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect, type SecureVersion } from 'node:tls';
import { parseArgs } from 'node:util';
import { benchCertificate } from './suite/cert.js';
import { treeCpuMs } from './suite/cpu.js';
import { median } from './suite/stats.js';
import { cleanupAll, freePort, removeDir, startProc, stopProc, tempDir, waitLine, which, type Proc } from './suite/procs.js';
import { ROOMGATE_MAIN, roomgateNodeArgs } from './suite/proxies.js';

const say = (line = ''): boolean => process.stdout.write(`${line}\n`);

/** One handshake. Without `session`: waits for the ticket the server sends (returned). With it: ends at the handshake and says whether the session was resumed. */
function handshake(port: number, ca: Buffer, version: SecureVersion, session?: Buffer): Promise<{ ticket?: Buffer; reused: boolean }> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port, servername: 'bench.test', ca, session, minVersion: version, maxVersion: version });
    const timer = setTimeout(() => s.destroy(new Error('handshake timed out')), 10_000);
    const done = (r: { ticket?: Buffer; reused: boolean }): void => {
      clearTimeout(timer);
      s.destroy();
      resolve(r);
    };
    // TLS 1.3 sends the ticket after the handshake, TLS 1.2 during it: either way before this.
    if (!session) s.on('session', (ticket: Buffer) => done({ ticket, reused: false }));
    else s.on('secureConnect', () => done({ reused: s.isSessionReused() }));
    s.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

/** `n` handshakes, `concurrency` at a time; with `session`, each offers it (resumption). */
async function many(port: number, ca: Buffer, version: SecureVersion, n: number, concurrency: number, session?: Buffer): Promise<number> {
  let next = 0;
  let reused = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < n) {
        next++;
        if ((await handshake(port, ca, version, session)).reused) reused++;
      }
    }),
  );
  return reused;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rounds: { type: 'string', default: '3' },
      handshakes: { type: 'string', default: '2000' },
      concurrency: { type: 'string', default: '20' },
      tls: { type: 'string', default: 'TLSv1.3' },
    },
  });
  const version = values.tls as SecureVersion;
  const n = Number(values.handshakes);
  const concurrency = Number(values.concurrency);
  const nginxBin = which('nginx');
  if (!nginxBin) throw new Error('nginx is needed (apt-get install -y nginx)');
  const dir = tempDir('roomgate-bench-tls-');
  const { cert, key } = benchCertificate(dir, 'bench.test');
  const ca = readFileSync(cert);
  const rows: { target: string; full: number; resumed: number }[] = [];
  try {
    for (let round = 1; round <= Number(values.rounds); round++) {
      for (const target of ['nginx', 'roomgate']) {
        const port = await freePort();
        let proc: Proc;
        if (target === 'nginx') {
          const conf = join(dir, 'nginx.conf');
          writeFileSync(
            conf,
            `worker_processes 1;\ndaemon off;\nmaster_process on;\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log warn;\nevents { worker_connections 4096; }\nhttp {\n  access_log off;\n  client_body_temp_path ${dir}/body;\n  proxy_temp_path ${dir}/proxy;\n  fastcgi_temp_path ${dir}/fastcgi;\n  uwsgi_temp_path ${dir}/uwsgi;\n  scgi_temp_path ${dir}/scgi;\n  server {\n    listen 127.0.0.1:${port} ssl backlog=4096;\n    ssl_certificate ${cert};\n    ssl_certificate_key ${key};\n    ssl_protocols TLSv1.2 TLSv1.3;\n    ssl_session_tickets on;\n    location / { return 200 "ok"; }\n  }\n}\n`,
          );
          proc = startProc('nginx', nginxBin, ['-c', conf, '-e', join(dir, 'error.log')], { cpu: '0' });
          await new Promise((r) => setTimeout(r, 300));
        } else {
          const config = join(dir, 'roomgate.yaml');
          writeFileSync(config, JSON.stringify({ listen: { host: '127.0.0.1', port }, admin: { enabled: false }, backends: [{ id: 'none', url: 'http://127.0.0.1:9' }], log: { level: 'warn' }, shutdown: { graceMs: 500 }, tls: { certs: [{ cert, key }] } }));
          proc = startProc('roomgate', process.execPath, [...roomgateNodeArgs(), ROOMGATE_MAIN, 'start', '--config', config], { cpu: '0', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ROOMGATE_COOKIE_SECRETS: 'bench-tls-secret-0123456789abcdef', NODE_ENV: 'production' } });
          await waitLine(proc, 'roomgate listening', (l) => l.includes('"msg":"listening"'), 20_000).catch(() => undefined);
        }
        try {
          // Warm-up, and the ticket that the resumed handshakes offer.
          await many(port, ca, version, 200, concurrency);
          const { ticket } = await handshake(port, ca, version);
          const t0 = treeCpuMs(proc.pid);
          await many(port, ca, version, n, concurrency);
          const t1 = treeCpuMs(proc.pid);
          const resumedCount = await many(port, ca, version, n, concurrency, ticket);
          const t2 = treeCpuMs(proc.pid);
          if (resumedCount !== n) say(`[round ${round}] ${target}: only ${resumedCount} of ${n} offered sessions were resumed`);
          const row = { target, full: ((t1 - t0) * 1000) / n, resumed: ((t2 - t1) * 1000) / n };
          rows.push(row);
          say(`[round ${round}] ${target.padEnd(8)} full ${row.full.toFixed(0)} µs/handshake, resumed ${row.resumed.toFixed(0)} µs/handshake`);
        } finally {
          await stopProc(proc);
        }
      }
    }
  } finally {
    await cleanupAll();
    removeDir(dir);
  }
  const of = (t: string, k: 'full' | 'resumed'): number => median(rows.filter((r) => r.target === t).map((r) => r[k]));
  say(`\n${version}, ${n} handshakes per measurement, ${concurrency} at a time, medians of ${values.rounds} rounds\n`);
  say('| target | CPU per full handshake (µs) | CPU per resumed handshake (µs) |\n|---|---:|---:|');
  for (const t of ['nginx', 'roomgate']) say(`| ${t} | ${of(t, 'full').toFixed(0)} | ${of(t, 'resumed').toFixed(0)} |`);
  say(`| ratio roomgate / nginx | ${(of('roomgate', 'full') / of('nginx', 'full')).toFixed(2)}x | ${(of('roomgate', 'resumed') / of('nginx', 'resumed')).toFixed(2)}x |`);
}

await main();
