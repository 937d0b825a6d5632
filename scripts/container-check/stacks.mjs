// Bringing a topology up the way its file says, on podman. Two runners:
//  - composeStack: podman-compose creates the containers; podman-compose 1.0.3 ignores depends_on
//    conditions (service_healthy, service_completed_successfully), so the check starts them in
//    waves, waiting on each condition itself before starting the services that depend on it.
//  - podStack: a podman pod. podman-compose 1.0.3 refuses `network_mode: service:<name>`, so the
//    sidecar file runs as a pod (one network namespace, as the file means): the service that owns
//    the namespace publishes its ports on the pod, every service becomes a `podman run --pod`
//    with the file's image, entrypoint, command, environment, volumes and healthcheck.
// Health: `podman healthcheck run` (no systemd here to run checks on their interval).
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { check, info } from './report.mjs';
import { dependsOn, interpolate, startWaves } from './compose-files.mjs';
import { containersWith, logs, podman, run, waitExited, waitHealthy, waitRunning } from './podman.mjs';

const HEALTHY_MS = 60_000;

function hasHealthcheck(svc) {
  const hc = svc.healthcheck;
  if (!hc || hc.disable) return false;
  return !(Array.isArray(hc.test) && hc.test[0] === 'NONE');
}

/** What "up" means for a service: healthy, exited 0 (one-shot), or running. */
function expectation(name, services) {
  if (hasHealthcheck(services[name])) return 'service_healthy';
  const completedBy = Object.values(services).some((s) => dependsOn(s)[name]?.condition === 'service_completed_successfully');
  if (completedBy || services[name].restart === 'no') return 'service_completed_successfully';
  return 'service_started';
}

/** Waits for one service to meet a condition, once; prints PASS/FAIL. */
function conditionWaiter(label, containerOf) {
  const seen = new Map();
  return (service, condition) => {
    const key = `${service} ${condition}`;
    if (!seen.has(key)) {
      seen.set(
        key,
        (async () => {
          const c = containerOf(service);
          const r =
            condition === 'service_healthy'
              ? await waitHealthy(c, HEALTHY_MS)
              : condition === 'service_completed_successfully'
                ? await waitExited(c, HEALTHY_MS)
                : await waitRunning(c, HEALTHY_MS);
          const what = condition === 'service_healthy' ? 'healthcheck passes' : condition === 'service_completed_successfully' ? 'runs to completion (exit 0)' : 'is running';
          const ok = check(`${label}: ${service} ${what}`, r.ok, r.ms !== undefined ? `${(r.ms / 1000).toFixed(1)} s` : undefined, r.why);
          if (!ok) info(`${service} log:\n${(await logs(c)).replace(/^/gm, '       | ')}`);
          return ok;
        })(),
      );
    }
    return seen.get(key);
  };
}

/** Starts every wave after the conditions it depends on hold; then waits for every service. */
async function upInWaves(label, services, containerOf, startWave) {
  const satisfy = conditionWaiter(label, containerOf);
  const all = async (waits) => (await Promise.all(waits)).every(Boolean);
  for (const wave of startWaves(services)) {
    const deps = wave.flatMap((svc) => Object.entries(dependsOn(services[svc])).map(([dep, { condition }]) => satisfy(dep, condition)));
    if (!(await all(deps))) return false;
    if (!(await startWave(wave))) return false;
  }
  return all(Object.keys(services).map((name) => satisfy(name, expectation(name, services))));
}

export function composeStack({ label, project, dir, doc, text }) {
  const file = join(dir, `${project}.yml`);
  writeFileSync(file, text);
  const compose = (args, timeoutMs = 120_000) => run('podman-compose', ['-p', project, '-f', file, ...args], { timeoutMs });
  const containerOf = (service) => doc.services[service].container_name ?? `${project}_${service}_1`;
  return {
    containerOf,
    async up() {
      // podman-compose creates every container (its translation of the file); the check starts
      // them wave by wave, once the conditions they depend on hold.
      const created = await compose(['up', '--no-build', '--no-start']);
      const names = Object.keys(doc.services);
      const exist = await Promise.all(names.map((s) => podman(['container', 'exists', containerOf(s)], { timeoutMs: 15_000 })));
      const missing = names.filter((_s, i) => exist[i].code !== 0);
      const why = `exit ${created.code}, not created: ${missing.join(' ')}: ${created.stderr.split('\n').slice(-5).join(' | ')}`;
      if (!check(`${label}: podman-compose up --no-start creates every service`, created.code === 0 && missing.length === 0, undefined, why)) return false;
      return upInWaves(label, doc.services, containerOf, async (wave) => {
        const r = await podman(['start', ...wave.map(containerOf)], { timeoutMs: 60_000 });
        return check(`${label}: start ${wave.join(' ')}`, r.code === 0, undefined, `exit ${r.code}: ${r.stderr}`);
      });
    },
    /** `docker compose down` (podman-compose here); the containers left behind, by project label. */
    async down() {
      const r = await run('podman-compose', ['-p', project, '-f', file, 'down'], { timeoutMs: 90_000, unboxed: true });
      const left = await containersWith(`label=io.podman.compose.project=${project}`);
      return { code: r.code, left };
    },
  };
}

const toSeconds = (d) => {
  let s = 0;
  for (const m of String(d).matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) s += Number(m[1]) * { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2]];
  return Math.ceil(s);
};

/** `podman run` arguments for one compose service inside a pod. */
function podRunArgs(svc, name, pod) {
  const a = ['run', '-d', '--pull=never', '--name', name, '--pod', pod];
  if (svc.entrypoint) a.push('--entrypoint', JSON.stringify([svc.entrypoint].flat()));
  const env = Array.isArray(svc.environment) ? svc.environment.map((e) => e.split(/=(.*)/s)) : Object.entries(svc.environment ?? {});
  for (const [k, v] of env) a.push('-e', `${k}=${interpolate(v ?? '')}`);
  for (const v of svc.volumes ?? []) a.push('-v', String(v));
  const hc = svc.healthcheck;
  if (hc && !hc.disable && hc.test) {
    const t = [hc.test].flat();
    if (t[0] === 'NONE') a.push('--no-healthcheck');
    else a.push('--health-cmd', t[0] === 'CMD' ? JSON.stringify(t.slice(1)) : t[0] === 'CMD-SHELL' ? t[1] : t.join(' '));
    for (const [k, flag] of [['interval', '--health-interval'], ['timeout', '--health-timeout'], ['start_period', '--health-start-period'], ['retries', '--health-retries']]) {
      if (hc[k] !== undefined) a.push(flag, String(hc[k]));
    }
  } else if (hc?.disable) a.push('--no-healthcheck');
  if (svc.restart) a.push('--restart', svc.restart);
  if (svc.stop_grace_period) a.push('--stop-timeout', String(toSeconds(svc.stop_grace_period)));
  a.push(svc.image, ...[svc.command ?? []].flat().map(String));
  return a;
}

export function podStack({ label, pod, doc, published }) {
  const services = doc.services;
  const owner = Object.keys(services).find((n) => Object.values(services).some((s) => s.network_mode === `service:${n}`));
  const containerOf = (service) => `${pod}-${service}`;
  return {
    containerOf,
    owner,
    async up() {
      if (!check(`${label}: one service owns the network namespace (network_mode: service:<name>)`, !!owner, owner, 'no service is named by network_mode')) return false;
      const ports = (published[owner] ?? []).flatMap((p) => ['-p', `${p.to}:${p.target}`]);
      const created = await podman(['pod', 'create', '--name', pod, ...ports], { timeoutMs: 30_000 });
      if (!check(`${label}: pod created with ${owner}'s published ports`, created.code === 0, undefined, created.stderr)) return false;
      return upInWaves(label, services, containerOf, async (wave) => {
        const results = await Promise.all(wave.map((s) => podman(podRunArgs(services[s], containerOf(s), pod), { timeoutMs: 60_000 })));
        const bad = results.map((r, i) => [wave[i], r]).filter(([, r]) => r.code !== 0);
        return check(`${label}: podman run --pod ${wave.join(' ')}`, bad.length === 0, undefined, bad.map(([s, r]) => `${s}: ${r.stderr}`).join('; '));
      });
    },
    async down() {
      const r = await podman(['pod', 'rm', '-f', '-t', '15', pod], { timeoutMs: 60_000, unboxed: true });
      const pods = await podman(['pod', 'exists', pod], { timeoutMs: 10_000, unboxed: true });
      const left = pods.code === 0 ? await containersWith(`pod=${pod}`) : [];
      return { code: r.code, left: [...left, ...(pods.code === 0 ? [`pod ${pod}`] : [])] };
    },
  };
}
