// deploy/docker-compose.tls.yml layered over the demo (merged by Docker Compose's rules, see
// compose-files.mjs): the one-shot tls-cert makes the certificate, both gateways serve it and
// their healthchecks pass over https; wss and h2 answer, and one room still lands on one backend.
import { randomBytes } from 'node:crypto';
import { check } from './report.mjs';
import { runCompose, waitRouting } from './topology-demo.mjs';
import { get, getH2, joinRoom, servedBy } from './clients.mjs';

async function tlsAssertions({ published }) {
  const [a, b] = ['roomgate-a', 'roomgate-b'].map((s) => `127.0.0.1:${published[s][0].to}`);
  if (!(await waitRouting('tls', 'A', `https://${a}`)) || !(await waitRouting('tls', 'B', `https://${b}`))) return;
  const health = await get(`https://${a}/healthz`);
  check('tls: https answers with the self-signed certificate for localhost', health.status === 200 && health.cert?.subject?.CN === 'localhost', `CN=${health.cert?.subject?.CN}`, JSON.stringify({ status: health.status, error: health.error, cn: health.cert?.subject?.CN }));
  const plain = await get(`http://${a}/healthz`);
  check('tls: plain http on the TLS port gets no page', plain.status !== 200, undefined, 'plain http answered 200');
  const room = `check-${randomBytes(3).toString('hex')}`;
  const h2 = await getH2(`https://${a}`, `/game/${room}/`);
  const backend = servedBy(h2.body);
  check('tls: h2 (ALPN) answers a room page', h2.alpn === 'h2' && h2.status === 200 && !!backend, `backend ${backend}`, JSON.stringify({ alpn: h2.alpn, status: h2.status, error: h2.error }));
  const viaA = await joinRoom(`wss://${a}/ws/live/?room=${room}`, room);
  const viaB = await joinRoom(`wss://${b}/ws/live/?room=${room}`, room);
  check('tls: wss through both gateways reaches the room\'s backend', !!backend && viaA.backend === backend && viaB.backend === backend, backend, `h2 page ${backend}, wss A ${viaA.backend ?? viaA.error}, wss B ${viaB.backend ?? viaB.error}`);
  viaA.socket?.close();
  viaB.socket?.close();
}

export function tls(ctx) {
  return runCompose(ctx, { label: 'tls', files: ['deploy/docker-compose.yml', 'deploy/docker-compose.tls.yml'], assertions: tlsAssertions });
}
