// deploy/docker-compose.yml as its header promises: Redis, three backends, two gateways; a room
// lands on one backend through both gateways, for its page and for its sockets; the lobby agrees
// across gateways; a stopped backend container moves its rooms; `down` leaves no container.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { check, info, timed } from './report.mjs';
import { deriveCompose } from './compose-files.mjs';
import { composeStack } from './stacks.mjs';
import { getJson, joinRoom, poll, roomPage } from './clients.mjs';
import { logs, podman } from './podman.mjs';

/** backend id (the demo backend's --id) -> service name. */
export function backendServices(services) {
  const out = {};
  for (const [name, s] of Object.entries(services)) {
    const argv = [...[s.entrypoint ?? []].flat(), ...[s.command ?? []].flat()];
    const i = argv.indexOf('--id');
    if (argv.some((a) => String(a).includes('demo-backend')) && i >= 0) out[argv[i + 1]] = name;
  }
  return out;
}

export function portsLine(published) {
  return Object.entries(published)
    .map(([s, ps]) => `${s} ${ps.map((p) => `${p.from}->${p.to}`).join(' ')}`)
    .join(', ');
}

export async function runCompose(ctx, { label, files, assertions }) {
  const { doc, published, text } = await deriveCompose(files.map((f) => join(ctx.root, f)), { forPodmanCompose: true });
  const stack = composeStack({ label, project: `${ctx.run}-${label}`, dir: ctx.dir, doc, text });
  info(`${label}: ${files.join(' + ')}; host ports (the file's -> free ones): ${portsLine(published)}`);
  const up = await timed(label, 'up+healthy', () => stack.up());
  if (up) await timed(label, 'assertions', () => assertions({ doc, published, stack }));
  const down = await timed(label, 'down', () => stack.down());
  check(`${label}: podman-compose down leaves no container behind`, down.code === 0 && down.left.length === 0, undefined, `exit ${down.code}; left: ${down.left.join(', ')}`);
}

/** What a URL answered, for a FAIL line. */
async function answer(url) {
  const r = await getJson(url);
  return `GET ${url.replace(/^https?:\/\/[^/]+/, '')}: ${r.error ?? `${r.status} ${(r.body ?? '').slice(0, 200)}`}`;
}

/**
 * Healthy is not yet routing: a gateway that has just started answers 503 + Retry-After: 1 until its
 * first health round has seen a backend up. Waits (as a client honouring Retry-After would) until
 * the gateway serves a page, at most 15 s.
 */
export async function waitRouting(label, name, base) {
  const t0 = Date.now();
  const page = await poll(15_000, async () => {
    const p = await roomPage(base, `warmup-${randomBytes(3).toString('hex')}`);
    return p.status === 200 && p.backend ? p : undefined;
  });
  return check(`${label}: gateway ${name} routes a page`, !!page, `after ${((Date.now() - t0) / 1000).toFixed(1)} s`, 'no page served in 15 s');
}

const gatewayUrl = (published, service, scheme = 'http') => `${scheme}://127.0.0.1:${published[service][0].to}`;

async function demoAssertions({ doc, published, stack }) {
  const a = gatewayUrl(published, 'roomgate-a');
  const b = gatewayUrl(published, 'roomgate-b');
  if (!(await waitRouting('demo', 'A', a)) || !(await waitRouting('demo', 'B', b))) return;
  const room = `check-${randomBytes(3).toString('hex')}`;
  const page = await roomPage(b, room);
  const viaA = await joinRoom(`${a.replace('http', 'ws')}/ws/live/?room=${room}`, room);
  const viaB = await joinRoom(`${b.replace('http', 'ws')}/ws/live/?room=${room}`, room);
  const backend = page.backend;
  const same = page.status === 200 && !!backend && viaA.backend === backend && viaB.backend === backend;
  const retries = viaA.retried || viaB.retried ? `; sockets retried after a 503: A ${viaA.retried}, B ${viaB.retried}` : '';
  check('demo: a room lands on one backend through both gateways (page via B, sockets via A and B)', same, `${backend}${retries}`, `page ${page.status} ${page.backend ?? page.error}, socket via A ${viaA.backend ?? viaA.error}, via B ${viaB.backend ?? viaB.error}`);
  if (!same) {
    [viaA, viaB].forEach((x) => x.socket?.close());
    // What the gateways logged about it: the only place a socket that got no answer can be explained.
    for (const service of ['roomgate-a', 'roomgate-b']) await logTail(stack, service, room);
    return;
  }

  const seen = [];
  for (const g of [a, b]) {
    const r = await poll(10_000, async () => {
      const one = await getJson(`${g}/_roomgate/api/rooms/${room}`);
      return one.json?.sockets === 2 && !('backend' in one.json) ? one.json : undefined;
    });
    // The public reads name no backend (the admin port's GET /lobby does; it is not published here).
    const lobby = await getJson(`${g}/_roomgate/api/lobby?prefix=${room}`);
    seen.push(JSON.stringify(lobby.json?.rooms?.map((x) => [x.room, x.sockets, x.backend ?? null])));
    check(`demo: gateway ${g === a ? 'A' : 'B'} counts both sockets of the room, naming no backend`, !!r, undefined, await answer(`${g}/_roomgate/api/rooms/${room}`));
  }
  check('demo: the lobby agrees across gateways', seen[0] === seen[1] && seen[0] === JSON.stringify([[room, 2, null]]), seen[0], `A ${seen[0]} B ${seen[1]}`);
  viaA.socket.close();
  viaB.socket.close();

  const service = backendServices(doc.services)[backend];
  const t0 = Date.now();
  const stopped = await podman(['stop', '-t', '10', stack.containerOf(service)], { timeoutMs: 30_000 });
  const moved = await poll(30_000, async () => {
    const pa = await roomPage(a, room);
    const pb = await roomPage(b, room);
    return pa.backend && pa.backend !== backend && pb.backend === pa.backend ? pa.backend : undefined;
  });
  check(`demo: stopping ${service}'s container moves its room (pages via A and B)`, stopped.code === 0 && !!moved, `${backend} -> ${moved} in ${((Date.now() - t0) / 1000).toFixed(1)} s`, `still not moved after 30 s (${stopped.stderr})`);
  if (moved) {
    const after = await joinRoom(`${a.replace('http', 'ws')}/ws/live/?room=${room}`, room);
    check('demo: a new socket of the room follows it', after.backend === moved, moved, after.backend ?? after.error);
    after.socket?.close();
  }
}

/** The lines of a service's log that name `room` (at most 20), as info lines of the report. */
async function logTail(stack, service, room) {
  const lines = (await logs(stack.containerOf(service), 2_000)).split('\n').filter((l) => l.includes(room));
  info(`${service} logged ${lines.length} line(s) about ${room}${lines.length ? ':' : ''}`);
  for (const l of lines.slice(-20)) info(`  ${l.slice(0, 400)}`);
}

export function demo(ctx) {
  return runCompose(ctx, { label: 'demo', files: ['deploy/docker-compose.yml'], assertions: demoAssertions });
}
