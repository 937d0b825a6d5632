// deploy/docker-compose.sidecar.yml as a podman pod (podman-compose 1.0.3 refuses
// `network_mode: service:...`; see stacks.mjs): the app containers reach their gateway on
// localhost, the gateway reaches the apps on localhost, and only the pod's port is published.
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { check, info, timed } from './report.mjs';
import { deriveCompose } from './compose-files.mjs';
import { podStack } from './stacks.mjs';
import { joinRoom, roomPage } from './clients.mjs';
import { backendServices, portsLine, waitRouting } from './topology-demo.mjs';
import { podman } from './podman.mjs';

export async function sidecar(ctx) {
  const file = 'deploy/docker-compose.sidecar.yml';
  const { doc, published } = await deriveCompose([join(ctx.root, file)]);
  const pod = `${ctx.run}-sidecar`;
  const stack = podStack({ label: 'sidecar', pod, doc, published });
  info(`sidecar: ${file} as pod ${pod}; host ports (the file's -> free ones): ${portsLine(published)}`);
  const up = await timed('sidecar', 'up+healthy', () => stack.up());
  if (up) {
    await timed('sidecar', 'assertions', async () => {
      const port = published[stack.owner][0];
      const apps = backendServices(doc.services);
      for (const [id, service] of Object.entries(apps)) {
        const probe = `fetch('http://127.0.0.1:${port.target}/healthz',{signal:AbortSignal.timeout(4000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))`;
        const r = await podman(['exec', stack.containerOf(service), 'node', '-e', probe], { timeoutMs: 20_000 });
        check(`sidecar: app container ${service} (${id}) reaches its gateway on localhost:${port.target}`, r.code === 0, undefined, `exit ${r.code} ${r.stderr}`);
      }
      const base = `http://127.0.0.1:${port.to}`;
      if (!(await waitRouting('sidecar', 'roomgate', base))) return;
      const room = `check-${randomBytes(3).toString('hex')}`;
      const page = await roomPage(base, room);
      const socket = await joinRoom(`${base.replace('http', 'ws')}/ws/live/?room=${room}`, room);
      check('sidecar: the gateway reaches the apps on localhost (page and socket of a room on one app)', page.status === 200 && page.backend in apps && socket.backend === page.backend, page.backend, `page ${page.status} ${page.backend ?? page.error}, socket ${socket.backend ?? socket.error}`);
      socket.socket?.close();
      const inspect = await podman(['pod', 'inspect', '--format', '{{json .InfraConfig.PortBindings}}', pod], { timeoutMs: 15_000 });
      const bindings = Object.keys(JSON.parse(inspect.stdout || '{}'));
      check('sidecar: the pod publishes only the gateway port', bindings.length === 1 && bindings[0].startsWith(`${port.target}/`), bindings.join(' '), `published: ${bindings.join(' ') || inspect.stderr}`);
    });
  }
  const down = await timed('sidecar', 'down', () => stack.down());
  check('sidecar: removing the pod leaves no container behind', down.code === 0 && down.left.length === 0, undefined, `exit ${down.code}; left: ${down.left.join(', ')}`);
}
