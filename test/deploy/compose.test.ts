// deploy/docker-compose.yml and deploy/docker-compose.sidecar.yml, checked as data (no Docker
// engine on the dev machine): one image name built from the repository's Dockerfile, only the
// gateway published, start order by healthchecks, gateway config files that pass the real config
// loader with the compose environment, backend URLs that point at the ports the backends listen
// on, probes on the right ports. Each check returns problems and is also run on broken copies.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENV_VARS, loadConfig, type LoadedConfig } from '../../src/config/load.js';
import { backendKeys } from '../../src/http/call-proof.js';
import { clone, composeEnv, durationMs, parseDockerfile, readText, ROOT, yamlDocs, type Obj } from '../support/deploy-files.js';

const IMAGE = 'roomgate:local';
const DEMO_BACKEND = 'dist/examples/demo-backend/server.js';
const MAIN = 'dist/src/main.js';
const IMAGE_CONFIG = /ROOMGATE_CONFIG=(\S+)/.exec(
  parseDockerfile(readText('Dockerfile'))
    .filter((i) => i.cmd === 'ENV')
    .map((i) => i.args)
    .join(' '),
)?.[1];

const FILES = { main: 'deploy/docker-compose.yml', sidecar: 'deploy/docker-compose.sidecar.yml', tls: 'deploy/docker-compose.tls.yml' } as const;

function load(rel: string): Obj {
  const [doc] = yamlDocs(rel);
  if (!doc) throw new Error(`${rel} is empty`);
  return doc;
}

type Kind = 'gateway' | 'backend' | 'redis' | 'other';

function argvOf(svc: Obj): string[] {
  const entry = (svc.entrypoint as string[] | undefined) ?? ['node', MAIN];
  return [...entry, ...((svc.command as string[] | undefined) ?? [])];
}

function kindOf(svc: Obj): Kind {
  if (typeof svc.image === 'string' && svc.image.startsWith('redis:')) return 'redis';
  if (svc.image !== IMAGE) return 'other';
  const argv = argvOf(svc);
  if (argv[1] === MAIN && argv.includes('start')) return 'gateway';
  if (argv[1] === DEMO_BACKEND) return 'backend';
  return 'other';
}

function flag(argv: readonly string[], name: string): string | undefined {
  const i = argv.indexOf(name);
  return i < 0 ? undefined : argv[i + 1];
}

/** "http://127.0.0.1:8000/healthz" inside a healthcheck's node -e script. */
function healthUrl(svc: Obj): URL | undefined {
  const test = svc.healthcheck?.test as string[] | undefined;
  const m = /https?:\/\/[^'"\s)]+/.exec((test ?? []).join(' '));
  return m ? new URL(m[0]) : undefined;
}

/** The namespace a service's network lives in: its own name, or X for network_mode service:X. */
function netns(name: string, svc: Obj): string {
  const m = /^service:(.+)$/.exec(String(svc.network_mode ?? ''));
  return m ? m[1]! : name;
}

interface Gateway {
  name: string;
  config: LoadedConfig;
  env: Record<string, string>;
}

/** Loads each gateway's mounted config file with its compose environment, like the container would. */
function loadGateways(services: Record<string, Obj>, problems: string[]): Map<string, Gateway> {
  const out = new Map<string, Gateway>();
  for (const [name, svc] of Object.entries(services)) {
    if (kindOf(svc) !== 'gateway') continue;
    const env = composeEnv(svc.environment);
    for (const k of Object.keys(env)) if (!(k in ENV_VARS)) problems.push(`${name}: environment ${k} is not a variable roomgate reads (${Object.keys(ENV_VARS).join(', ')})`);
    const configPath = env.ROOMGATE_CONFIG ?? IMAGE_CONFIG;
    const mount = ((svc.volumes ?? []) as string[]).map((v) => v.split(':')).find((v) => v[1] === configPath);
    if (!mount) {
      problems.push(`${name}: no volume mounts a config file at ${configPath}`);
      continue;
    }
    const hostFile = resolve(ROOT, 'deploy', mount[0]!);
    if (!existsSync(hostFile)) {
      problems.push(`${name}: mounted config ${mount[0]} does not exist`);
      continue;
    }
    try {
      out.set(name, { name, env, config: loadConfig({ file: hostFile, env: { ...env, ROOMGATE_CONFIG: hostFile } }) });
    } catch (err) {
      problems.push(`${name}: ${mount[0]} with the compose environment: ${(err as Error).message}`);
    }
  }
  return out;
}

function composeProblems(file: string, doc: Obj): string[] {
  const problems: string[] = [];
  const services = (doc.services ?? {}) as Record<string, Obj>;
  const gateways = loadGateways(services, problems);

  for (const [name, svc] of Object.entries(services)) {
    if (!svc.image) problems.push(`${name}: no image`);
    // Every service using our image builds it from the repository's Dockerfile, under one name.
    if (typeof svc.image === 'string' && svc.image.startsWith('roomgate')) {
      if (svc.image !== IMAGE) problems.push(`${name}: image ${svc.image}; every roomgate service uses ${IMAGE}`);
      const ctx = resolve(ROOT, 'deploy', String(svc.build?.context ?? ''));
      if (ctx !== resolve(ROOT)) problems.push(`${name}: build context ${svc.build?.context} is not the repository root`);
      if (!existsSync(resolve(ctx, String(svc.build?.dockerfile ?? 'Dockerfile')))) problems.push(`${name}: Dockerfile not found`);
    }
    // depends_on: long form with a condition; service_healthy wherever the target has a healthcheck.
    for (const [dep, spec] of Object.entries((svc.depends_on ?? {}) as Record<string, Obj>)) {
      const target = services[dep];
      if (!target) {
        problems.push(`${name}: depends_on unknown service ${dep}`);
        continue;
      }
      const hasHealth = Boolean(target.healthcheck?.test) && target.healthcheck?.disable !== true;
      // A one-shot job (no healthcheck, no restart policy: it runs once and exits) is waited for
      // until it has finished well.
      const job = !hasHealth && target.restart === undefined;
      const want = hasHealth ? ['service_healthy'] : job ? ['service_started', 'service_completed_successfully'] : ['service_started'];
      if (!want.includes(spec?.condition)) problems.push(`${name}: depends_on ${dep} with condition ${spec?.condition}; expected ${want.join(' or ')}`);
    }
    // Published ports: only the gateway (or the namespace its gateway lives in), on its listen port.
    for (const p of (svc.ports ?? []) as string[]) {
      const inner = Number(String(p).split(':').at(-1));
      const gw = [...gateways.values()].find((g) => netns(g.name, services[g.name]!) === name);
      if (!gw) problems.push(`${name}: publishes ${p} but is not a gateway: only roomgate is published`);
      else if (gw.config.listen.port !== inner) problems.push(`${name}: publishes container port ${inner}, gateway ${gw.name} listens on ${gw.config.listen.port}`);
    }
    if (svc.network_mode && svc.ports) problems.push(`${name}: ports with network_mode (compose refuses it)`);
    if (svc.healthcheck?.timeout && durationMs(String(svc.healthcheck.timeout)) < 5000) problems.push(`${name}: healthcheck timeout under 5s`);
    if (kindOf(svc) === 'backend') {
      const argv = argvOf(svc);
      const hc = healthUrl(svc);
      if (hc?.pathname !== '/healthz' || hc.port !== flag(argv, '--port')) problems.push(`${name}: healthcheck ${hc?.href}; expected /healthz on --port ${flag(argv, '--port')}`);
    }
  }

  for (const g of gateways.values()) {
    const { name, config, env } = g;
    const svc = services[name]!;
    if (config.listen.host !== '0.0.0.0') problems.push(`${name}: listen.host ${config.listen.host}: not reachable through the published port`);
    if (!Object.entries(services).some(([n, s]) => s.ports && n === netns(name, svc))) problems.push(`${name}: the gateway is not published`);
    const hc = healthUrl(svc);
    if (hc?.pathname !== '/healthz' || Number(hc.port) !== config.listen.port) problems.push(`${name}: healthcheck ${hc?.href}; expected /healthz on port ${config.listen.port}`);
    // TLS on the port refuses plain HTTP: the healthcheck must ask over https (and the reverse).
    const tls = config.tls.certs.length > 0;
    if (hc && (hc.protocol === 'https:') !== tls) problems.push(`${name}: healthcheck ${hc.href} speaks ${hc.protocol === 'https:' ? 'https' : 'plain HTTP'}, but TLS is ${tls ? 'on' : 'off'}`);
    const grace = config.shutdown.readinessDelayMs + config.shutdown.graceMs;
    const stop = svc.stop_grace_period ? durationMs(String(svc.stop_grace_period)) : 10_000;
    if (stop <= grace) problems.push(`${name}: stop_grace_period ${stop} ms is not longer than readinessDelayMs + graceMs (${grace} ms): SIGKILL would cut the grace`);

    // Each configured backend is a backend service listening where the URL says.
    for (const b of config.backends) {
      const local = b.host === '127.0.0.1' || b.host === 'localhost';
      const match = Object.entries(services).find(
        ([n, s]) => kindOf(s) === 'backend' && (local ? netns(n, s) === netns(name, svc) : n === b.host) && Number(flag(argvOf(s), '--port')) === b.port,
      );
      if (!match) {
        problems.push(`${name}: backend ${b.id} ${b.url}: no backend service listens there`);
        continue;
      }
      // Its own call key, for the id this gateway gives it; never the call secrets.
      const benv = composeEnv(match[1].environment);
      if ('ROOMGATE_CALL_SECRETS' in benv) problems.push(`${match[0]}: holds ROOMGATE_CALL_SECRETS; a backend gets only its own keys (roomgate backend-key ${b.id})`);
      const secrets = config.backendCalls.secrets;
      if (secrets.length === 0) problems.push(`${name}: no ROOMGATE_CALL_SECRETS: pushes and handoffs cannot be signed`);
      else if (benv.ROOMGATE_BACKEND_ID !== b.id || !(benv.ROOMGATE_BACKEND_KEYS ?? '').split(',').some((k) => backendKeys(secrets, b.id).includes(k.trim()))) {
        problems.push(`${match[0]}: ROOMGATE_BACKEND_ID/ROOMGATE_BACKEND_KEYS are not backend ${b.id}'s (roomgate backend-key ${b.id}): every push and handoff call would be refused`);
      }
      // The HTTP check (health.path), when on, asks for a route the backend's own healthcheck proves it answers.
      const backendCheck = healthUrl(match[1])?.pathname;
      if (config.health.path !== null && backendCheck !== config.health.path) {
        problems.push(`${name}: health.path ${config.health.path}, but ${match[0]}'s healthcheck GETs ${backendCheck}: the gateway would check a route the backend may not answer`);
      }
      const host = flag(argvOf(match[1]), '--host');
      const want = local ? '127.0.0.1' : '0.0.0.0';
      if (host !== want) problems.push(`${match[0]}: --host ${host}; expected ${want} (${local ? 'same namespace, never published' : 'reached by service name'})`);
    }
    if (env.REDIS_URL) {
      const u = new URL(env.REDIS_URL);
      const r = services[u.hostname];
      if (!r || kindOf(r) !== 'redis') problems.push(`${name}: REDIS_URL host ${u.hostname} is not a redis service`);
      else if (Number(u.port || 6379) !== Number(flag(argvOf(r), '--port') ?? 6379)) problems.push(`${name}: REDIS_URL port ${u.port} is not the redis service's port`);
      if (r && !svc.depends_on?.[u.hostname]) problems.push(`${name}: does not depend on ${u.hostname}`);
    }
  }

  // Every backend service is behind a gateway; gateways sharing a Redis share their cookie secret.
  for (const [name, svc] of Object.entries(services)) {
    if (kindOf(svc) !== 'backend') continue;
    const port = Number(flag(argvOf(svc), '--port'));
    const used = [...gateways.values()].some((g) =>
      g.config.backends.some((b) => b.port === port && (b.host === name || ((b.host === '127.0.0.1' || b.host === 'localhost') && netns(name, svc) === netns(g.name, services[g.name]!)))),
    );
    if (!used) problems.push(`${name}: no gateway routes to it`);
  }
  const all = [...gateways.values()];
  const withRedis = all.filter((g) => g.env.REDIS_URL);
  if (new Set(withRedis.map((g) => g.env.REDIS_URL)).size > 1) problems.push('the gateways use different Redis URLs');
  if (new Set(withRedis.map((g) => g.env.ROOMGATE_COOKIE_SECRETS)).size > 1) problems.push("the gateways have different cookie secrets: neither would accept the other's room cookies");
  if (all.length > 1 && withRedis.length !== all.length) problems.push('several gateways without a shared Redis: each would place rooms on its own');

  // The printed URLs are the published ones.
  const printed = Object.values(services)
    .filter((s) => kindOf(s) === 'other' && /https?:\/\/localhost:/.test(argvOf(s).join(' ')))
    .map((s) => argvOf(s).join(' '))
    .join('\n');
  if (!printed) problems.push(`${file}: nothing prints the URL to open`);
  for (const [name, svc] of Object.entries(services)) {
    for (const p of (svc.ports ?? []) as string[]) {
      const host = String(p).split(':').at(-2);
      if (!printed.includes(`http://localhost:${host}/`) && !printed.includes(`https://localhost:${host}/`)) problems.push(`${name}: published port ${host} is not in the printed URLs`);
    }
  }

  // No start-order cycle.
  const visiting = new Set<string>();
  const done = new Set<string>();
  const visit = (n: string): void => {
    if (done.has(n)) return;
    if (visiting.has(n)) {
      problems.push(`depends_on cycle through ${n}`);
      return;
    }
    visiting.add(n);
    for (const d of Object.keys(services[n]?.depends_on ?? {})) visit(d);
    visiting.delete(n);
    done.add(n);
  };
  Object.keys(services).forEach(visit);
  return problems;
}

function topology(doc: Obj): Record<Kind, string[]> {
  const out: Record<Kind, string[]> = { gateway: [], backend: [], redis: [], other: [] };
  for (const [n, s] of Object.entries((doc.services ?? {}) as Record<string, Obj>)) out[kindOf(s)].push(n);
  return out;
}

describe('deploy/docker-compose.yml', () => {
  const doc = load(FILES.main);

  it('is Redis, two gateways and three demo backends', () => {
    const t = topology(doc);
    expect(t.gateway.sort()).toEqual(['roomgate-a', 'roomgate-b']);
    expect(t.backend).toHaveLength(3);
    expect(t.redis).toEqual(['redis']);
  });

  it('keeps every rule (image, published ports, healthchecks, start order, config, env names, backend ports)', () => {
    expect(composeProblems(FILES.main, doc)).toEqual([]);
  });

  it('publishes distinct host ports, and those are the ones printed', () => {
    const hostPorts = Object.values(doc.services as Record<string, Obj>).flatMap((s) => ((s.ports ?? []) as string[]).map((p) => p.split(':').at(-2)));
    expect(hostPorts.sort()).toEqual(['8080', '8081']);
  });

  it('the status page is reachable from the host: on every published gateway port, behind the admin token, and printed', () => {
    const problems: string[] = [];
    const gateways = loadGateways(doc.services as Record<string, Obj>, problems);
    expect(problems).toEqual([]);
    expect([...gateways.keys()].sort()).toEqual(['roomgate-a', 'roomgate-b']);
    for (const [name, g] of gateways) {
      expect(g.config.status.public, name).toBe('token');
      expect(g.config.admin.token.length, name).toBeGreaterThanOrEqual(16);
      // The gateway listens beyond its container and its listen port is the published one.
      expect(g.config.listen.host, name).toBe('0.0.0.0');
      const published = ((doc.services[name].ports ?? []) as string[]).map((p) => Number(p.split(':').at(-1)));
      expect(published, name).toContain(g.config.listen.port);
    }
    const printed = (doc.services.urls.command as string[]).join('\n');
    expect(printed).toContain('http://localhost:8080/_roomgate/ ');
    expect(printed).toMatch(/password: the admin token/);
    expect(printed).not.toMatch(/\/game\/lobby\//);
  });

  it('without an admin token the status page would let nobody in: the config loader refuses it', () => {
    const copy = clone(doc);
    delete copy.services['roomgate-a'].environment.ROOMGATE_ADMIN_TOKEN;
    expect(composeProblems(FILES.main, copy).join('\n')).toMatch(/status\.public: got "token" while admin\.token is empty/);
  });

  const broken: [string, (d: Obj) => void, RegExp][] = [
    ['a backend on another port than its URL', (d) => (d.services['backend-2'].command = ['--host', '0.0.0.0', '--port', '8001', '--id', 'b2']), /b2 http:\/\/backend-2:8000: no backend service listens there/],
    ['a backend listening on loopback only', (d) => (d.services['backend-1'].command = ['--host', '127.0.0.1', '--port', '8000', '--id', 'b1']), /backend-1: --host 127.0.0.1/],
    ['start order without health', (d) => (d.services['roomgate-a'].depends_on.redis.condition = 'service_started'), /depends_on redis with condition service_started/],
    ['a backend without healthcheck', (d) => delete d.services['backend-3'].healthcheck, /backend-3: healthcheck undefined|depends_on backend-3/],
    ['an env name roomgate does not read', (d) => (d.services['roomgate-b'].environment.ROOMGATE_COOKIE_SECRET = 'x'.repeat(20)), /ROOMGATE_COOKIE_SECRET is not a variable/],
    ['no call secret', (d) => delete d.services['roomgate-a'].environment.ROOMGATE_CALL_SECRETS, /no ROOMGATE_CALL_SECRETS/],
    ['another backend key', (d) => (d.services['backend-2'].environment.ROOMGATE_BACKEND_KEYS = d.services['backend-1'].environment.ROOMGATE_BACKEND_KEYS), /not backend b2's/],
    ['the call secrets in a backend', (d) => (d.services['backend-1'].environment.ROOMGATE_CALL_SECRETS = 'x'.repeat(40)), /holds ROOMGATE_CALL_SECRETS/],
    ['two cookie secrets', (d) => (d.services['roomgate-b'].environment.ROOMGATE_COOKIE_SECRETS = 'another-secret-0123456789'), /different cookie secrets/],
    ['a short stop_grace_period', (d) => (d.services['roomgate-a'].stop_grace_period = '5s'), /stop_grace_period 5000 ms/],
    ['a published backend', (d) => (d.services['backend-1'].ports = ['8000:8000']), /backend-1: publishes 8000:8000 but is not a gateway/],
    ['the wrong image', (d) => (d.services['backend-1'].image = 'roomgate:latest'), /image roomgate:latest/],
    ['a healthcheck on the wrong port', (d) => (d.services['roomgate-a'].healthcheck.test = ['CMD', 'node', '-e', "fetch('http://127.0.0.1:9090/healthz')"]), /roomgate-a: healthcheck/],
    ['a secret too short for the config schema', (d) => (d.services['roomgate-a'].environment.ROOMGATE_ADMIN_TOKEN = 'short'), /admin\.token/],
    ['a dependency cycle', (d) => (d.services.redis.depends_on = { 'roomgate-a': { condition: 'service_healthy' } }), /cycle/],
    [
      'a backend whose healthcheck is not the gateway health path',
      (d) => (d.services['backend-2'].healthcheck.test = ['CMD', 'node', '-e', "fetch('http://127.0.0.1:8000/ready')"]),
      /roomgate-a: health\.path \/healthz, but backend-2's healthcheck GETs \/ready/,
    ],
  ];
  it.each(broken)('fails with %s', (_name, breakIt, problem) => {
    const copy = clone(doc);
    breakIt(copy);
    expect(composeProblems(FILES.main, copy).join('\n')).toMatch(problem);
  });
});

describe('deploy/docker-compose.sidecar.yml', () => {
  const doc = load(FILES.sidecar);

  it('is one namespace: roomgate plus K app servers on localhost, only roomgate published, no Redis', () => {
    const t = topology(doc);
    expect(t.gateway).toEqual(['roomgate']);
    expect(t.backend.length).toBeGreaterThanOrEqual(2);
    expect(t.redis).toEqual([]);
    const services = doc.services as Record<string, Obj>;
    const ns = netns('roomgate', services.roomgate!);
    for (const b of t.backend) expect(netns(b, services[b]!), b).toBe(ns);
    const published = Object.entries(services).filter(([, s]) => s.ports);
    expect(published.map(([n]) => n)).toEqual([ns]);
    expect(composeEnv(services.roomgate!.environment).REDIS_URL).toBeUndefined();
  });

  it('keeps every rule (image, published ports, healthchecks, start order, config, env names, backend ports)', () => {
    expect(composeProblems(FILES.sidecar, doc)).toEqual([]);
  });

  const broken: [string, (d: Obj) => void, RegExp][] = [
    ['an app outside the namespace', (d) => delete d.services['app-2'].network_mode, /backend app-2 http:\/\/127\.0\.0\.1:8002: no backend service listens there/],
    ['an app on another port', (d) => (d.services['app-1'].command = ['--host', '127.0.0.1', '--port', '8009', '--id', 'app-1']), /app-1 http:\/\/127\.0\.0\.1:8001: no backend service/],
    ['an app reachable from outside', (d) => (d.services['app-3'].command = ['--host', '0.0.0.0', '--port', '8003', '--id', 'app-3']), /app-3: --host 0\.0\.0\.0/],
    ['a second published port', (d) => d.services.pod.ports.push('8001:8001'), /publishes container port 8001/],
  ];
  it.each(broken)('fails with %s', (_name, breakIt, problem) => {
    const copy = clone(doc);
    breakIt(copy);
    expect(composeProblems(FILES.sidecar, copy).join('\n')).toMatch(problem);
  });
});

/**
 * `docker compose -f base -f override` for the keys the TLS override uses: mappings merge key by
 * key, `volumes` lists join (one per target path, the override's wins), anything else (a list such
 * as healthcheck.test or command, a scalar) is replaced.
 */
function composeMerge(base: unknown, over: unknown, key = ''): unknown {
  if (Array.isArray(base) && Array.isArray(over) && key === 'volumes') {
    const target = (v: unknown): string => String(v).split(':')[1] ?? String(v);
    return [...base.filter((b) => !over.some((o) => target(o) === target(b))), ...over];
  }
  if (base && over && typeof base === 'object' && typeof over === 'object' && !Array.isArray(base) && !Array.isArray(over)) {
    const out: Obj = { ...(base as Obj) };
    for (const [k, v] of Object.entries(over as Obj)) out[k] = k in out ? composeMerge(out[k], v, k) : v;
    return out;
  }
  return over;
}

describe('deploy/docker-compose.tls.yml (self-signed TLS over the demo topology)', () => {
  const merged = composeMerge(load(FILES.main), load(FILES.tls)) as Obj;

  it('keeps every rule of the demo topology with TLS on both gateways', () => {
    expect(composeProblems(FILES.main, merged)).toEqual([]);
    const problems: string[] = [];
    const gateways = loadGateways(merged.services as Record<string, Obj>, problems);
    expect(problems).toEqual([]);
    expect([...gateways.keys()].sort()).toEqual(['roomgate-a', 'roomgate-b']);
    for (const [name, g] of gateways) {
      const svc = merged.services[name] as Obj;
      expect(g.config.tls.certs, name).toEqual([{ cert: '/tls/tls.crt', key: '/tls/tls.key' }]);
      // The files come from the volume the certificate service writes, made before the gateway starts.
      expect(svc.volumes, name).toContain('tls:/tls:ro');
      expect(svc.depends_on['tls-cert'], name).toEqual({ condition: 'service_completed_successfully' });
      expect(healthUrl(svc)?.protocol, name).toBe('https:');
      // The compose config file is still mounted: the override adds to the volumes.
      expect(svc.volumes.some((v: string) => v.endsWith(':/etc/roomgate/roomgate.yaml:ro')), name).toBe(true);
    }
    expect((merged.services['tls-cert'].volumes as string[])).toContain('tls:/tls');
    expect(String(merged.services['tls-cert'].command)).toMatch(/subjectAltName=DNS:localhost/);
    expect((merged.services.urls.command as string[]).join('\n')).toContain('https://localhost:8080/game/chess/');
    expect(merged.volumes).toHaveProperty('tls');
  });

  it('fails when a gateway keeps a plain-HTTP healthcheck under TLS', () => {
    const copy = clone(merged);
    copy.services['roomgate-b'].healthcheck.test = ['CMD', 'node', '-e', "fetch('http://127.0.0.1:8080/healthz')"];
    expect(composeProblems(FILES.main, copy).join('\n')).toMatch(/roomgate-b: healthcheck http:\/\/127\.0\.0\.1:8080\/healthz speaks plain HTTP, but TLS is on/);
  });
});
