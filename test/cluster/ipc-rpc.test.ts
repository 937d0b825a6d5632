// The RPC over IPC (src/cluster/ipc-rpc.ts) with a real forked child (test/cluster/rpc-child.mjs,
// running the compiled dist/ code): ids, concurrent answers out of order, remote errors, timeouts
// and late answers, events both ways, foreign messages, and the other side going away on either end.
import { fork, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { channelToChild, RpcClosedError, RpcPeer, RpcRemoteError, RpcTimeoutError } from '../../src/cluster/ipc-rpc.js';
import { waitFor, withTimeout } from '../support/processes.js';

const CHILD = fileURLToPath(new URL('./rpc-child.mjs', import.meta.url));

interface Forked {
  readonly child: ChildProcess;
  readonly peer: RpcPeer;
  /** Parsed JSON lines from the child's stdout. */
  readonly lines: Record<string, unknown>[];
  readonly exited: Promise<number | string>;
}

const children = new Set<ChildProcess>();

async function start(timeoutMs = 2_000): Promise<Forked> {
  const child = fork(CHILD, [], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  children.add(child);
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  void exited.then(() => children.delete(child));
  const lines: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
  const peer = new RpcPeer(channelToChild(child), { timeoutMs, peerName: `child ${child.pid}` });
  await waitFor('child ready', 10_000, () => lines.some((l) => 'ready' in l));
  return { child, peer, lines, exited };
}

afterEach(async () => {
  await Promise.all(
    [...children].map(async (c) => {
      const gone = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await withTimeout(gone, 5_000, 'child exit');
    }),
  );
});

describe('RpcPeer over a forked child', () => {
  it('answers calls, each with its own id, also when the answers come back out of order', async () => {
    const { peer } = await start();
    const [slow, fast, sum] = await Promise.all([peer.call('sleep', [300, 'slow']), peer.call('sleep', [10, 'fast']), peer.call('add', [2, 3])]);
    expect([slow, fast, sum]).toEqual(['slow', 'fast', 5]);
    // Plain data round-trips as JSON.
    expect(await peer.call('sleep', [0, { a: [1, 'x', null], b: { c: true } }])).toEqual({ a: [1, 'x', null], b: { c: true } });
  });

  it('passes the remote error message, and says when there is no such method', async () => {
    const { peer } = await start();
    const err = await peer.call('fail', ['the store said no']).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcRemoteError);
    expect((err as Error).message).toBe('fail: the store said no');
    await expect(peer.call('nope')).rejects.toThrow('nope: no handler for "nope"');
    // An answer JSON cannot carry is an error answer, not a silent timeout.
    await expect(peer.call('bigint', [], 1_000)).rejects.toBeInstanceOf(RpcRemoteError);
    expect(await peer.call('add', [1, 1])).toBe(2);
  });

  it('times out a call with no answer, drops the late answer and keeps working', async () => {
    const { peer } = await start();
    const t0 = Date.now();
    const err = await peer.call('sleep', [400, 'late'], 100).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcTimeoutError);
    expect((err as Error).message).toContain('no answer from child');
    expect(Date.now() - t0).toBeLessThan(350);
    await new Promise((r) => setTimeout(r, 500)); // the late answer arrives meanwhile
    expect(await peer.call('add', [20, 22])).toBe(42);
  });

  it('carries events both ways and calls from the child to the parent', async () => {
    const { peer } = await start();
    const got: unknown[] = [];
    peer.on('echoed', (p) => got.push(p));
    peer.emit('echo', { n: 1 });
    peer.emit('echo', { n: 2 });
    await waitFor('echoes', 5_000, () => got.length === 2);
    expect(got).toEqual([{ n: 1 }, { n: 2 }]);
    peer.handle('double', (x) => 2 * (x as number));
    expect(await peer.call('callParent', ['double', [21]])).toBe(42);
    // The child's call of a parent method nobody serves fails there and comes back as an error.
    await expect(peer.call('callParent', ['missing', []])).rejects.toThrow('no handler for "missing"');
  });

  it('ignores IPC messages that are not its own', async () => {
    const { peer } = await start();
    expect(await peer.call('junk')).toBe(true);
    expect(await peer.call('add', [1, 2])).toBe(3);
  });

  it('rejects pending and later calls at once when the child dies', async () => {
    const { peer, child, exited } = await start(20_000);
    const closed: string[] = [];
    peer.onClose((r) => closed.push(r));
    const pending = peer.call('never').catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 100));
    const t0 = Date.now();
    child.kill('SIGKILL');
    const err = await withTimeout(pending, 5_000, 'the pending call to reject');
    expect(Date.now() - t0).toBeLessThan(3_000);
    expect(err).toBeInstanceOf(RpcClosedError);
    expect((err as Error).message).toMatch(/^never: child \d+ is gone/);
    await exited;
    expect(peer.closed).toBe(true);
    expect(closed).toHaveLength(1);
    await expect(peer.call('add', [1, 2])).rejects.toBeInstanceOf(RpcClosedError);
  });

  it('in the child: a call to a parent that disconnects rejects with a clear error, and the child can exit', async () => {
    const { peer, child, lines, exited } = await start();
    peer.handle('never', () => new Promise(() => undefined));
    expect(await peer.call('waitOnParent')).toBe('waiting');
    child.disconnect();
    const line = await waitFor('the child reports its rejected call', 5_000, () => lines.find((l) => 'rejected' in l));
    expect(line.rejected).toEqual({ name: 'RpcClosedError', message: 'never: the parent is gone (IPC channel closed)' });
    expect(lines.some((l) => l.closed === 'the parent is gone (IPC channel closed)')).toBe(true);
    // Nothing else holds the child: it exits by itself.
    expect(await withTimeout(exited, 5_000, 'the child to exit')).toBe(0);
  });
});
