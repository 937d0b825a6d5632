// The rest of the Python kit's server and layer matrix (issue 38): the Django Channels example
// (examples/django-channels) under Debian's uvicorn 0.17 instead of daphne, with its channel layer
// on channels_redis 4.0 and a real redis-server this test starts (DJANGO_CHANNEL_LAYER, settings.py),
// two uvicorn processes sharing it behind one real gateway. A push goes roomgate -> the owner's
// receiver -> the room's group on Redis -> the socket; uvicorn's shutdown (SIGTERM) closes the
// socket with 1012, which roomgate passes to the client, and the client's reconnect is served by
// the other process, where a push again reaches it through the same Redis.
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliHere } from '../cli/in-process.js';
import { exampleGatewayConfig, pushThrough, stopAsgiServer, stopExample, type DaphneApp } from '../support/daphne.js';
import { backendEnv, Client, startGateway, type GatewayProc, waitFor } from '../support/processes.js';
import { redisCli, startRedis, stopAllRedis, type RedisServer } from '../support/redis.js';
import { startUvicorn } from '../support/uvicorn.js';
import { scopeTempDir } from '../support/temp-dir.js';

const TOKEN = 'push-token-0123456789abcdef';
const IDS = ['uv-1', 'uv-2'] as const;
const staticRoot = scopeTempDir('roomgate-uvicorn-static-');
const apps = new Map<string, DaphneApp>();
let redis: RedisServer;
let gw: GatewayProc;

beforeAll(async () => {
  redis = await startRedis();
  const env = (id: string): Record<string, string> => ({ DJANGO_SECRET_KEY: 'django-secret-key-for-the-test-0123456789', DJANGO_STATIC_ROOT: staticRoot, ...backendEnv(id), DJANGO_CHANNEL_LAYER: `${redis.url}/0` });
  const started = await Promise.all(IDS.map((id) => startUvicorn(env(id))));
  IDS.forEach((id, i) => apps.set(id, started[i] as DaphneApp));
  gw = await startGateway({ backends: IDS.map((id) => `${id}=${apps.get(id)?.url as string}`), config: exampleGatewayConfig(staticRoot), env: { ROOMGATE_PUSH_TOKENS: TOKEN } });
}, 60_000);

afterAll(async () => {
  await stopExample(staticRoot);
  await stopAllRedis();
});

/** roomgate_kit.groups.room_group: the room's Channels group; channels_redis keeps it as the sorted set asgi:group:NAME. */
const groupKey = (room: string): string => `asgi:group:roomgate.room.${createHash('sha256').update(room).digest('hex').slice(0, 40)}`;
/** How many sockets' channels the room's group holds on Redis . */
const groupSize = async (room: string): Promise<number> => Number((await redisCli(['-p', String(redis.port), 'ZCARD', groupKey(room)])).trim());
/**
 * A count that only a group_send moves: channels_redis's group_send first drops the group's (and its
 * channels') expired entries with ZREMRANGEBYSCORE; its receive loop and group_add/discard never do.
 */
const groupSends = async (): Promise<number> =>
  Number(/^cmdstat_zremrangebyscore:calls=(\d+)/m.exec(await redisCli(['-p', String(redis.port), 'INFO', 'commandstats']))?.[1] ?? 0);

const push = (room: string, body: unknown): ReturnType<typeof pushThrough> => pushThrough(gw.url, TOKEN, room, body);

/** A socket of the room through the gateway (its room key in ?room=), mounted: the client and the mount's answer. */
async function mounted(room: string): Promise<{ c: Client; mount: Record<string, unknown> }> {
  const c = new Client(`${gw.wsUrl}/ws/live/?room=${room}`, { headers: { Origin: gw.url } });
  await c.opened;
  await c.next('connect');
  c.send({ type: 'mount', url: `/game/${room}/` });
  return { c, mount: await c.next('mounted') };
}

describe('the Django Channels example under uvicorn, its channel layer on channels_redis with a real Redis', () => {
  it("a push reaches the room's socket through the room's group on Redis, and is counted", async () => {
    const { c, mount } = await mounted('uv-chess');
    expect(IDS).toContain(mount.backend);
    expect(await groupSize('uv-chess'), 'the socket joined its room group on Redis').toBe(1);
    const before = await groupSends();
    const a = await push('uv-chess', { text: 'through redis' });
    expect(a).toMatchObject({ status: 202, json: { room: 'uv-chess', backend: mount.backend, sockets: 1 } });
    expect(await c.next('push')).toMatchObject({ room: 'uv-chess', sender: 'job:test', id: a.json.id, message: { text: 'through redis' } });
    expect(await groupSends(), 'the push went to the group on Redis').toBeGreaterThan(before);
    // The room's own messages take the same way: a move comes back as a patch through the group.
    c.send({ type: 'event', data: { square: 'e4' } });
    expect(await c.next('patch')).toMatchObject({ room: 'uv-chess', data: { square: 'e4' }, move: 1 });
    await c.close();
    await expect.poll(() => groupSize('uv-chess'), { timeout: 5_000 }).toBe(0); // Channels discards it on disconnect
  });

  it('roomgate check-backend passes every check against the example under uvicorn on the Redis layer: its receiver and its hooks', async () => {
    const r = await runCliHere(['check-backend', (apps.get('uv-1') as DaphneApp).url, '--id', 'uv-1'], { ROOMGATE_BACKEND_KEYS: backendEnv('uv-1').ROOMGATE_BACKEND_KEYS as string });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain('33 of 33 checks passed');
  });

  it("uvicorn's shutdown closes the room's socket with 1012 through roomgate; the client reconnects, the other process serves the room, and a push reaches it through the shared Redis", async () => {
    const first = await mounted('uv-failover');
    const owner = String(first.mount.backend);
    const other = IDS.find((id) => id !== owner) as string;
    expect(await stopAsgiServer(apps.get(owner) as DaphneApp, 'SIGTERM')).toBe(0); // a graceful exit, not the SIGKILL after 10 s
    expect(await first.c.closed).toBe(1012);

    // As djust's client does: reconnect after its back-off until a socket opens and mounts.
    const again = await waitFor('the room served again', 15_000, () => mounted('uv-failover').catch(() => undefined), 250);
    expect(again.mount).toMatchObject({ room: 'uv-failover', backend: other });
    expect(Number(again.mount.epoch)).toBeGreaterThan(Number(first.mount.epoch));
    const before = await groupSends();
    const a = await push('uv-failover', { text: 'after the restart' });
    expect(a).toMatchObject({ status: 202, json: { backend: other, sockets: 1 } });
    expect(await again.c.next('push')).toMatchObject({ message: { text: 'after the restart' } });
    expect(await groupSends()).toBeGreaterThan(before);
    // Only the new socket is in the room's group: the stopped process's left it as uvicorn closed it.
    expect(await groupSize('uv-failover')).toBe(1);
    await again.c.close();
  });
});
