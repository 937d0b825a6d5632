// A forked child for test/cluster/ipc-rpc.test.ts: serves a few methods over the RPC peer of the
// compiled source (dist/: build first) and reports on stdout what it cannot say over IPC.
import { RpcPeer, channelToParent } from '../../dist/src/cluster/ipc-rpc.js';

const peer = new RpcPeer(channelToParent(), { timeoutMs: 2_000, peerName: 'the parent' });
const report = (o) => process.stdout.write(`${JSON.stringify(o)}\n`);

peer.handle('add', (a, b) => a + b);
peer.handle('sleep', (ms, value) => new Promise((resolve) => setTimeout(() => resolve(value), ms)));
peer.handle('fail', (message) => {
  throw new Error(message);
});
peer.handle('never', () => new Promise(() => undefined));
peer.handle('bigint', () => 1n);
peer.handle('callParent', (method, args, timeoutMs) => peer.call(method, args, timeoutMs ?? undefined));
peer.handle('junk', () => {
  process.send({ hello: 'not an rpc message' });
  process.send('plain text');
  return true;
});
// Calls the parent's "never" and reports how that call ended (the parent disconnects meanwhile).
peer.handle('waitOnParent', () => {
  peer.call('never', [], 30_000).then(
    (v) => report({ resolved: v }),
    (err) => report({ rejected: { name: err.name, message: err.message } }),
  );
  return 'waiting';
});
peer.on('echo', (payload) => peer.emit('echoed', payload));
peer.onClose((reason) => report({ closed: reason }));
report({ ready: process.pid });
