// The Sentinel and Cluster connection forms: both Redis stores (placement, lobby) work through a
// Redis Sentinel and through a 3-master Redis Cluster (scripts route by the {rg} slot, pub/sub
// events reach another gateway), and `roomgate check-config` accepts the forms and rejects mixed
// or invalid ones by name. Real redis-server processes on free ports, all killed in afterAll.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RedisTarget } from '../../src/redis/link.js';
import { runCli } from '../support/processes.js';
import { closeAllStores, exerciseStores } from '../support/redis-stores.js';
import { startCluster, startRedis, startSentinel, stopAllRedis } from '../support/redis.js';

afterAll(async () => {
  await closeAllStores();
  await stopAllRedis();
});

describe('Redis connection forms', () => {
  let sentinel: RedisTarget;
  let cluster: RedisTarget;

  beforeAll(async () => {
    const [master, clusterServers] = await Promise.all([startRedis(), startCluster()]);
    const s = await startSentinel(master.port);
    sentinel = { sentinels: [s.address], sentinelName: s.name };
    cluster = { clusterNodes: clusterServers.nodes };
  }, 25_000);

  it('both stores work through Redis Sentinel', async () => {
    await exerciseStores(sentinel);
  }, 15_000);

  it('both stores work through Redis Cluster (scripts in the {rg} slot, pub/sub across nodes)', async () => {
    await exerciseStores(cluster);
  }, 15_000);

  it('check-config accepts the Sentinel and Cluster forms and never prints the password', async () => {
    const s = await runCli(['check-config'], { REDIS_SENTINELS: '10.0.0.1:26379, 10.0.0.2:26379', REDIS_SENTINEL_NAME: 'prod', REDIS_URL: 'rediss://:hunter2secret@ignored' });
    expect(s.stderr).toBe('');
    expect(s.code).toBe(0);
    expect(s.stdout).toContain('"10.0.0.2:26379"');
    expect(s.stdout).toContain('"sentinelName": "prod"');
    expect(s.stdout).not.toContain('hunter2secret');
    const c = await runCli(['check-config'], { REDIS_CLUSTER_NODES: '10.0.0.1:6379,10.0.0.2:6379' });
    expect(c.code).toBe(0);
    expect(c.stdout).toContain('"10.0.0.1:6379"');
  });

  it('check-config rejects mixed and invalid forms, naming the field and the fix', async () => {
    const mixed = await runCli(['check-config'], { REDIS_SENTINELS: '10.0.0.1:26379', REDIS_CLUSTER_NODES: '10.0.0.1:6379' });
    expect(mixed.code).not.toBe(0);
    expect(mixed.stderr).toMatch(/redis\.clusterNodes: got \["10\.0\.0\.1:6379"\] while redis\.sentinels is set too; expected one form only, Sentinel or Cluster/);
    const bad = await runCli(['check-config'], { REDIS_SENTINELS: 'sentinel-without-port', REDIS_CLUSTER_NODES: '' });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain('redis.sentinels.0: got "sentinel-without-port" (from REDIS_SENTINELS); expected a "host:port" with a port from 1 to 65535');
    const db = await runCli(['check-config'], { REDIS_CLUSTER_NODES: '10.0.0.1:6379', REDIS_URL: 'redis://:hunter2secret@x/3' });
    expect(db.code).not.toBe(0);
    expect(db.stderr).toContain('redis.url: got "redis://:<redacted>@x/3" with redis.clusterNodes set; expected no db: Redis Cluster has only db 0, remove "/3" from the URL');
    expect(db.stderr + db.stdout).not.toContain('hunter2secret');
  });
});
