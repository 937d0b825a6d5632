// roomgate's image: built as CI builds it, then run alone with its default config (the demo: the
// gateway plus demo backends inside) the strict way: uid 1000, read-only root filesystem (under
// podman --read-only-tmpfs=false, so it means what Docker's --read-only means), its own
// HEALTHCHECK reaching healthy, a room page answered, and SIGTERM ending it with exit code 0.
import { check, info, timed } from './report.mjs';
import { freePort } from './compose-files.mjs';
import { roomPage } from './clients.mjs';
import { logs, podman, state, waitHealthy } from './podman.mjs';

export const IMAGE = 'roomgate:local';

export async function buildImage(root) {
  const r = await timed('image', 'build', () =>
    podman(['build', '-q', '--pull=never', '--network=host', '--isolation=chroot', '--format', 'docker', '-t', IMAGE, root], { timeoutMs: 300_000, nice: true }),
  );
  if (!check(`image: podman build ${IMAGE} (docker format)`, r.code === 0, undefined, `exit ${r.code}\n${r.stderr.split('\n').slice(-15).join('\n')}`)) return false;
  const inspected = await podman(['image', 'inspect', IMAGE], { timeoutMs: 15_000 });
  const image = JSON.parse(inspected.stdout || '[{}]')[0] ?? {};
  const config = image.Config ?? {};
  const hc = image.Healthcheck ?? config.Healthcheck;
  check('image: keeps its HEALTHCHECK', Array.isArray(hc?.Test) && hc.Test[0] === 'CMD', undefined, `Healthcheck ${JSON.stringify(hc)}`);
  const id = await podman(['run', '--rm', '--pull=never', '--entrypoint', 'id', IMAGE, '-u'], { timeoutMs: 30_000 });
  check('image: runs as uid 1000', id.stdout === '1000', `USER ${config.User}`, `id -u says ${JSON.stringify(id.stdout)} ${id.stderr}`);
  return true;
}

export async function imageAlone(ctx) {
  const name = `${ctx.run}-image`;
  const port = await freePort();
  await timed('image', 'run', async () => {
    const r = await podman(['run', '-d', '--pull=never', '--name', name, '--read-only', '--read-only-tmpfs=false', '-p', `127.0.0.1:${port}:8080`, IMAGE], { timeoutMs: 30_000 });
    if (!check('image: starts with --read-only (default config)', r.code === 0, undefined, r.stderr)) return;
    const h = await waitHealthy(name, 60_000);
    if (!check("image: the image's HEALTHCHECK passes", h.ok, h.ms !== undefined ? `${(h.ms / 1000).toFixed(1)} s` : undefined, h.why)) {
      info(`log:\n${(await logs(name)).replace(/^/gm, '       | ')}`);
      return;
    }
    // The native stage's relay is in the image and the gateway runs it: /status says which (asked
    // inside the container, on the admin port's loopback address).
    const relay = await podman(['exec', name, 'node', '-e', "fetch('http://127.0.0.1:9090/status').then((r) => r.json()).then((s) => console.log(JSON.stringify(s.relay ?? null)), (e) => console.log(String(e)))"], { timeoutMs: 15_000 });
    check('image: the gateway runs the native relay', relay.stdout.includes('"relay":"native"'), undefined, `/status relay: ${relay.stdout} ${relay.stderr}`);
    const page = await roomPage(`http://127.0.0.1:${port}`, 'lobby');
    check('image: a room page is answered by a demo backend inside', page.status === 200 && !!page.backend, `backend ${page.backend}`, JSON.stringify(page));
    const uid = await podman(['exec', name, 'id', '-u'], { timeoutMs: 15_000 });
    check('image: the gateway process runs as uid 1000', uid.stdout === '1000', undefined, `id -u: ${uid.stdout} ${uid.stderr}`);
    const write = await podman(['exec', name, 'sh', '-c', 'touch /app/x 2>/dev/null || touch /tmp/x 2>/dev/null || touch /x 2>/dev/null'], { timeoutMs: 15_000 });
    check('image: the root filesystem is read-only (/app, /tmp, /)', write.code !== 0, undefined, 'a file could be written');
    const stop = await podman(['stop', '-t', '20', name], { timeoutMs: 40_000 });
    const s = await state(name);
    check('image: SIGTERM (podman stop) ends it with exit code 0', stop.code === 0 && s?.ExitCode === 0, undefined, `exit code ${s?.ExitCode}`);
  });
  await podman(['rm', '-f', name], { timeoutMs: 30_000 });
}
