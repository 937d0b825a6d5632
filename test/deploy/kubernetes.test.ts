// deploy/kubernetes (the base) and deploy/kubernetes/sidecar, checked as data (no cluster needed):
// every kustomization resource exists and parses; the ConfigMap's roomgate.yaml passes the real
// config loader with the environment the pod would get (Secret values included); env names are
// ones roomgate reads; secretKeyRefs name existing keys; probes hit /readyz and /healthz on the
// public port with timeoutSeconds >= 5; terminationGracePeriodSeconds covers preStop +
// readinessDelayMs + graceMs; selectors of Services and PDBs match the workloads; the headless
// Service, the StatefulSet and the DNS name in the config agree. Each check returns problems and
// is also run on broken copies, so the test is seen to fail when a file is wrong.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ENV_VARS, loadConfig, type LoadedConfig } from '../../src/config/load.js';
import { clone, loadKustomize, parseDockerfile, readText, ROOT, yamlDocs, yamlDocsOf, type K8sDoc, type KustomizeBase, type Obj } from '../support/deploy-files.js';

const IMAGE = 'roomgate:local'; // the compose files' image, too
const DEMO_BACKEND = 'dist/examples/demo-backend/server.js';
const IMAGE_ENV = parseDockerfile(readText('Dockerfile'))
  .filter((i) => i.cmd === 'ENV')
  .map((i) => i.args)
  .join(' ');
const IMAGE_CONFIG = /ROOMGATE_CONFIG=(\S+)/.exec(IMAGE_ENV)?.[1] ?? '';
const CLUSTER_DOMAIN = 'svc.cluster.local';

type Container = Obj;
interface Workload {
  kind: string;
  name: string;
  doc: Obj;
  pod: Obj;
  labels: Record<string, string>;
  containers: Container[];
}

function workloads(docs: readonly K8sDoc[]): Workload[] {
  return docs
    .map((d) => d.doc)
    .filter((d) => ['Deployment', 'StatefulSet', 'DaemonSet'].includes(d.kind))
    .map((d) => ({
      kind: d.kind,
      name: d.metadata?.name,
      doc: d,
      pod: d.spec?.template?.spec ?? {},
      labels: d.spec?.template?.metadata?.labels ?? {},
      containers: d.spec?.template?.spec?.containers ?? [],
    }));
}

function find(docs: readonly K8sDoc[], kind: string, name: string): Obj | undefined {
  return docs.find((d) => d.doc.kind === kind && d.doc.metadata?.name === name)?.doc;
}

function subset(sel: Record<string, string> | undefined, labels: Record<string, string>): boolean {
  return !!sel && Object.keys(sel).length > 0 && Object.entries(sel).every(([k, v]) => labels[k] === v);
}

/** A container port by number or name. */
function portNumber(c: Container, port: number | string | undefined): number | undefined {
  if (typeof port === 'number') return port;
  return (c.ports as Obj[] | undefined)?.find((p) => p.name === port)?.containerPort;
}

function isGateway(c: Container): boolean {
  return String(c.image).split(':')[0] === 'roomgate' && !c.command && ((c.args as string[] | undefined) ?? ['start']).includes('start');
}

function isApp(c: Container): boolean {
  return ((c.command as string[] | undefined) ?? []).includes(DEMO_BACKEND);
}

function argFlag(c: Container, name: string): string | undefined {
  const argv = [...((c.command as string[]) ?? []), ...((c.args as string[]) ?? [])];
  const i = argv.indexOf(name);
  return i < 0 ? undefined : argv[i + 1];
}

function secretValue(docs: readonly K8sDoc[], name: string, key: string): string | undefined {
  const s = find(docs, 'Secret', name);
  if (!s) return undefined;
  if (s.stringData?.[key] !== undefined) return String(s.stringData[key]);
  if (s.data?.[key] !== undefined) return Buffer.from(String(s.data[key]), 'base64').toString('utf8');
  return undefined;
}

/** The environment a container gets, with Secret and ConfigMap values filled in. */
function containerEnv(docs: readonly K8sDoc[], c: Container, problems: string[], where: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of (c.env ?? []) as Obj[]) {
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (e.valueFrom?.secretKeyRef) {
      const { name, key } = e.valueFrom.secretKeyRef;
      const v = secretValue(docs, name, key);
      if (v === undefined) problems.push(`${where}: env ${e.name} refers to Secret ${name} key ${key}, which does not exist`);
      else env[e.name] = v;
    } else if (e.valueFrom?.configMapKeyRef) {
      const { name, key } = e.valueFrom.configMapKeyRef;
      const v = find(docs, 'ConfigMap', name)?.data?.[key];
      if (v === undefined) problems.push(`${where}: env ${e.name} refers to ConfigMap ${name} key ${key}, which does not exist`);
      else env[e.name] = String(v);
    } else if (e.valueFrom?.fieldRef) env[e.name] = 'pod-field';
  }
  for (const from of (c.envFrom ?? []) as Obj[]) problems.push(`${where}: envFrom ${JSON.stringify(from)}: list variables by name so each is checked`);
  return env;
}

/**
 * The pod's own call keys: the app holds no call secret, names its id as roomgate does
 * ("$(POD_NAME):port"), and reads its keys from a volume an init container fills with
 * `roomgate backend-key "$POD_NAME:port"`, run with call secrets the gateways sign with.
 */
function callKeyProblems(docs: readonly K8sDoc[], sts: Workload, app: Container, env: Record<string, string>, gatewaySecrets: readonly string[], port: string | undefined, where: string): string[] {
  const problems: string[] = [];
  if ('ROOMGATE_CALL_SECRETS' in env) problems.push(`${where}: holds ROOMGATE_CALL_SECRETS; a backend gets only its own keys (roomgate backend-key)`);
  if (env.ROOMGATE_BACKEND_ID !== `$(POD_NAME):${port}`) problems.push(`${where}: ROOMGATE_BACKEND_ID is not this pod's backend id ($(POD_NAME):${port}): every call would be refused as made for another backend`);
  const file = env.ROOMGATE_BACKEND_KEYS_FILE ?? '';
  const appMount = ((app.volumeMounts ?? []) as Obj[]).find((m) => file.startsWith(`${m.mountPath}/`));
  const init = ((sts.pod.initContainers ?? []) as Container[]).find((c) => ((c.volumeMounts ?? []) as Obj[]).some((m) => appMount && m.name === appMount.name));
  if (!appMount || !init) return [...problems, `${where}: ROOMGATE_BACKEND_KEYS_FILE ${file || '(unset)'} is not on a volume an init container writes: the app would have no key`];
  const script = ((init.command ?? []) as string[]).join(' ');
  if (!script.includes(`backend-key "$POD_NAME:${port}"`) || !script.includes(`> ${file}`)) problems.push(`${sts.name}/${init.name}: does not write roomgate backend-key "$POD_NAME:${port}" to ${file}`);
  const secrets = (containerEnv(docs, init, problems, `${sts.name}/${init.name}`).ROOMGATE_CALL_SECRETS ?? '').split(',').map((x) => x.trim());
  if (!gatewaySecrets.some((x) => secrets.includes(x))) problems.push(`${sts.name}/${init.name}: ROOMGATE_CALL_SECRETS shares no secret with the gateways' backendCalls.secrets: every call would be refused`);
  return problems;
}

/** roomgate.yaml from the ConfigMap mounted where ROOMGATE_CONFIG points, loaded for real. */
function gatewayConfig(docs: readonly K8sDoc[], w: Workload, c: Container, env: Record<string, string>, problems: string[]): LoadedConfig | undefined {
  const where = `${w.name}/${c.name}`;
  const path = env.ROOMGATE_CONFIG ?? IMAGE_CONFIG;
  const mount = ((c.volumeMounts ?? []) as Obj[]).find((m) => (m.subPath ? m.mountPath === path : m.mountPath === dirname(path)));
  if (!mount) {
    problems.push(`${where}: nothing is mounted at ${path} (ROOMGATE_CONFIG)`);
    return undefined;
  }
  const volume = ((w.pod.volumes ?? []) as Obj[]).find((v) => v.name === mount.name);
  const cmName = volume?.configMap?.name;
  const cm = cmName ? find(docs, 'ConfigMap', cmName) : undefined;
  const key = mount.subPath ?? basename(path);
  const text = cm?.data?.[key];
  if (typeof text !== 'string') {
    problems.push(`${where}: ${path} comes from volume ${mount.name}, which is not a ConfigMap with key ${key}`);
    return undefined;
  }
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-k8s-test-'));
  try {
    const file = join(dir, key);
    writeFileSync(file, text);
    return loadConfig({ file, env: { ...env, ROOMGATE_CONFIG: file } });
  } catch (err) {
    problems.push(`${where}: ConfigMap ${cmName} ${key} with the pod's environment: ${(err as Error).message}`);
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Seconds the preStop hook sleeps (exec sleep N, or the sleep action). */
function preStopSeconds(c: Container): number {
  const hook = c.lifecycle?.preStop;
  if (!hook) return 0;
  if (hook.sleep?.seconds !== undefined) return Number(hook.sleep.seconds);
  const cmd = (hook.exec?.command ?? []) as string[];
  if (cmd[0] === 'sleep' || cmd[0] === '/bin/sleep') return Number(cmd[1]);
  return Number.NaN;
}

const CPU = (q: string | number): number => (typeof q === 'number' ? q : q.endsWith('m') ? Number(q.slice(0, -1)) / 1000 : Number(q));
const MEM = (q: string | number): number => {
  if (typeof q === 'number') return q;
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)?$/.exec(q);
  if (!m) return Number.NaN;
  const f = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12 }[m[2] ?? ''] ?? 1;
  return Number(m[1]) * f;
};

function probeProblems(where: string, probe: Obj | undefined, label: string, want: { path?: string; port?: number; c: Container }): string[] {
  if (!probe) return [`${where}: no ${label}`];
  const out: string[] = [];
  if ((probe.timeoutSeconds ?? 1) < 5) out.push(`${where}: ${label} timeoutSeconds ${probe.timeoutSeconds ?? 1} (< 5): a busy event loop would fail it`);
  if (probe.httpGet) {
    if (want.path && probe.httpGet.path !== want.path) out.push(`${where}: ${label} path ${probe.httpGet.path}; expected ${want.path}`);
    const port = portNumber(want.c, probe.httpGet.port);
    if (port === undefined) out.push(`${where}: ${label} port ${probe.httpGet.port} is not a port of the container`);
    else if (want.port !== undefined && port !== want.port) out.push(`${where}: ${label} on port ${port}; roomgate's public port is ${want.port}`);
  } else if (probe.exec) {
    const cmd = (probe.exec.command as string[]).join(' ');
    if (want.port !== undefined && !cmd.includes(`127.0.0.1:${want.port}${want.path ?? ''}`)) out.push(`${where}: ${label} exec does not check 127.0.0.1:${want.port}${want.path ?? ''}`);
  } else if (!probe.tcpSocket) out.push(`${where}: ${label} has no handler`);
  return out;
}

/** The path a probe GETs: httpGet.path, or the URL in an exec'd fetch. */
function probePath(probe: Obj | undefined): string | undefined {
  if (probe?.httpGet) return String(probe.httpGet.path);
  const m = /https?:\/\/[^/'"]+(\/[^'"?]*)/.exec(((probe?.exec?.command ?? []) as string[]).join(' '));
  return m?.[1];
}

interface Checked {
  problems: string[];
  gateways: { w: Workload; c: Container; config: LoadedConfig; env: Record<string, string> }[];
}

/** Every rule both bases keep. */
function baseProblems(base: KustomizeBase): Checked {
  const problems: string[] = [];
  const { docs, kustomization: k } = base;
  const gateways: Checked['gateways'] = [];

  // Kustomization: resources exist, namespace and image names agree.
  for (const r of (k.resources ?? []) as string[]) if (!existsSync(join(ROOT, base.dir, r))) problems.push(`${base.dir}/kustomization.yaml: resource ${r} does not exist`);
  const ns = k.namespace as string | undefined;
  if (!ns) problems.push(`${base.dir}: kustomization sets no namespace`);
  const nsDoc = docs.find((d) => d.doc.kind === 'Namespace');
  if (nsDoc && nsDoc.doc.metadata?.name !== ns) problems.push(`${base.dir}: Namespace ${nsDoc.doc.metadata?.name} is not the kustomization namespace ${ns}`);
  for (const img of (k.images ?? []) as Obj[]) {
    if (img.name === 'roomgate' && `${img.newName ?? img.name}:${img.newTag}` !== IMAGE) problems.push(`${base.dir}: images sets roomgate to ${img.newName}:${img.newTag}; the compose files use ${IMAGE}`);
  }
  const seen = new Set<string>();
  for (const { file, doc } of docs) {
    if (!doc.apiVersion || !doc.kind || !doc.metadata?.name) problems.push(`${file}: a document without apiVersion, kind or metadata.name`);
    const id = `${doc.kind}/${doc.metadata?.name}`;
    if (seen.has(id)) problems.push(`${file}: ${id} twice`);
    seen.add(id);
  }

  const ws = workloads(docs);
  for (const w of ws) {
    if (!subset(w.doc.spec?.selector?.matchLabels, w.labels)) problems.push(`${w.kind} ${w.name}: selector does not match its pod labels`);
    for (const c of w.containers) {
      const where = `${w.name}/${c.name}`;
      // Resources: requests and limits, cpu and memory, requests <= limits.
      const r = c.resources ?? {};
      for (const kind of ['requests', 'limits'] as const) {
        for (const res of ['cpu', 'memory'] as const) if (r[kind]?.[res] === undefined) problems.push(`${where}: no resources.${kind}.${res}`);
      }
      if (r.requests?.cpu && r.limits?.cpu && CPU(r.requests.cpu) > CPU(r.limits.cpu)) problems.push(`${where}: cpu request above its limit`);
      if (r.requests?.memory && r.limits?.memory && MEM(r.requests.memory) > MEM(r.limits.memory)) problems.push(`${where}: memory request above its limit`);
      if (String(c.image).startsWith('roomgate') && c.image !== IMAGE) problems.push(`${where}: image ${c.image}; expected ${IMAGE}`);
      if (c.securityContext?.allowPrivilegeEscalation !== false) problems.push(`${where}: allowPrivilegeEscalation is not false`);
      const env = containerEnv(docs, c, problems, where);

      if (isGateway(c)) {
        for (const name of Object.keys(env)) if (!(name in ENV_VARS)) problems.push(`${where}: env ${name} is not a variable roomgate reads (${Object.keys(ENV_VARS).join(', ')})`);
        const config = gatewayConfig(docs, w, c, env, problems);
        if (!config) continue;
        gateways.push({ w, c, config, env });
        const pub = config.listen.port;
        if (!((c.ports ?? []) as Obj[]).some((p) => p.containerPort === pub)) problems.push(`${where}: no containerPort ${pub} (listen.port)`);
        problems.push(...probeProblems(where, c.readinessProbe, 'readinessProbe', { path: '/readyz', port: pub, c }));
        problems.push(...probeProblems(where, c.livenessProbe, 'livenessProbe', { path: '/healthz', port: pub, c }));
        // With TLS on the public port plain HTTP is refused: the probes must speak HTTPS, and the
        // certificate files must come from a mounted volume.
        const tls = config.tls.certs.length > 0;
        for (const [label, probe] of [['readinessProbe', c.readinessProbe], ['livenessProbe', c.livenessProbe]] as const) {
          const scheme = probe?.httpGet ? String(probe.httpGet.scheme ?? 'HTTP') : null;
          if (scheme !== null && (scheme === 'HTTPS') !== tls) problems.push(`${where}: ${label} scheme ${scheme} while TLS is ${tls ? 'on' : 'off'}; expected ${tls ? 'HTTPS' : 'HTTP'}`);
        }
        for (const f of config.tls.certs.flatMap((x) => [x.cert, x.key])) {
          const mount = ((c.volumeMounts ?? []) as Obj[]).find((m) => f.startsWith(`${String(m.mountPath).replace(/\/$/, '')}/`));
          const volume = mount && ((w.pod.volumes ?? []) as Obj[]).find((v) => v.name === mount.name);
          if (!volume?.secret?.secretName) problems.push(`${where}: ${f} is not in a volume mounted from a Secret`);
        }
        const preStop = preStopSeconds(c);
        if (Number.isNaN(preStop)) problems.push(`${where}: preStop is neither a sleep nor exec sleep N`);
        if (preStop <= 0) problems.push(`${where}: no preStop sleep: endpoints are not updated before the listener closes`);
        const needed = preStop + (config.shutdown.readinessDelayMs + config.shutdown.graceMs) / 1000;
        const tgps = w.pod.terminationGracePeriodSeconds ?? 30;
        if (!(tgps > needed)) problems.push(`${w.name}: terminationGracePeriodSeconds ${tgps} is not above preStop ${preStop} s + readinessDelayMs + graceMs (${needed} s)`);
        if (config.listen.host !== '0.0.0.0') problems.push(`${where}: listen.host ${config.listen.host}: the kubelet and the Service could not reach it`);
        const replicas = w.doc.spec?.replicas ?? 1;
        const shared = config.redis.url || config.redis.sentinels.length > 0 || config.redis.clusterNodes.length > 0;
        if (replicas > 1 && !shared) problems.push(`${w.name}: ${replicas} replicas without Redis: each would place rooms on its own`);
        if (!shared && w.kind === 'Deployment' && w.doc.spec?.strategy?.type !== 'Recreate') {
          problems.push(`${w.name}: in-memory store with a ${w.doc.spec?.strategy?.type ?? 'RollingUpdate'} strategy: old and new pod would serve rooms at once`);
        }
        if (config.redis.url) {
          const u = new URL(config.redis.url);
          const svc = find(docs, 'Service', u.hostname.split('.')[0]!);
          if (!u.hostname.includes('.') || svc) {
            if (!svc) problems.push(`${where}: REDIS_URL host ${u.hostname} is not a Service here`);
            else if (!((svc.spec?.ports ?? []) as Obj[]).some((p) => p.port === Number(u.port || 6379))) problems.push(`${where}: REDIS_URL port ${u.port} is not a port of Service ${svc.metadata.name}`);
          }
        }
      } else {
        for (const [label, probe] of [['readinessProbe', c.readinessProbe], ['livenessProbe', c.livenessProbe]] as const) {
          const port = isApp(c) ? Number(argFlag(c, '--port')) : undefined;
          problems.push(...probeProblems(where, probe, label, { path: isApp(c) ? '/healthz' : undefined, port, c }));
        }
      }
      if (isApp(c)) {
        const port = Number(argFlag(c, '--port'));
        const declared = ((c.ports ?? []) as Obj[]).map((p) => p.containerPort);
        if (declared.length > 0 && !declared.includes(port)) problems.push(`${where}: listens on --port ${port} but declares ${declared.join(', ')}`);
      }
    }
  }

  // The gateway's HTTP check (health.path), when on, asks the apps for a route their own probes
  // prove they answer; null (a TCP connect check) needs nothing of them.
  const appProbes = ws.flatMap((w) => w.containers.filter(isApp).map((c) => ({ where: `${w.name}/${c.name}`, path: probePath(c.readinessProbe) })));
  for (const g of gateways) {
    const want = g.config.health.path;
    if (want === null) continue;
    for (const a of appProbes) {
      if (a.path !== want) problems.push(`${g.w.name}/${g.c.name}: health.path ${want}, but ${a.where}'s readinessProbe checks ${a.path}: the gateway would check a route the app may not answer`);
    }
  }

  // Services select a workload and target a port it has.
  for (const { doc: s } of docs.filter((d) => d.doc.kind === 'Service')) {
    const w = ws.find((x) => subset(s.spec?.selector, x.labels));
    if (!w) {
      problems.push(`Service ${s.metadata.name}: selector matches no workload`);
      continue;
    }
    for (const p of (s.spec?.ports ?? []) as Obj[]) {
      const target = p.targetPort ?? p.port;
      if (!w.containers.some((c) => portNumber(c, target) !== undefined)) problems.push(`Service ${s.metadata.name}: targetPort ${target} is not a port of ${w.name}`);
    }
  }
  // PodDisruptionBudgets select exactly one workload, and leave room for a voluntary eviction.
  for (const { doc: pdb } of docs.filter((d) => d.doc.kind === 'PodDisruptionBudget')) {
    const matched = ws.filter((w) => subset(pdb.spec?.selector?.matchLabels, w.labels));
    if (matched.length !== 1) problems.push(`PodDisruptionBudget ${pdb.metadata.name}: selector matches ${matched.length} workloads (${matched.map((w) => w.name).join(', ')}); expected 1`);
    const w = matched[0];
    if (w && typeof pdb.spec.minAvailable === 'number' && pdb.spec.minAvailable >= (w.doc.spec?.replicas ?? 1)) problems.push(`PodDisruptionBudget ${pdb.metadata.name}: minAvailable ${pdb.spec.minAvailable} blocks every eviction of ${w.name}`);
  }
  return { problems, gateways };
}

/** The base: 2 roomgate replicas on Redis, backends found by DNS through a headless Service. */
function discoveryProblems(base: KustomizeBase, checked: Checked): string[] {
  const problems: string[] = [];
  const ns = base.kustomization.namespace as string;
  const gw = checked.gateways[0];
  if (!gw) return ['no roomgate container'];
  const dns = gw.config.discovery.dns;
  if (!dns) return [`${gw.w.name}: discovery.dns is not set`];
  const m = dns.type === 'SRV' ? /^_([^.]+)\._(tcp|udp)\.([^.]+)\.([^.]+)\.(.+)$/.exec(dns.name) : /^()()([^.]+)\.([^.]+)\.(.+)$/.exec(dns.name);
  if (!m) return [`discovery.dns.name ${dns.name}: expected ${dns.type === 'SRV' ? '_PORT._tcp.' : ''}SERVICE.NAMESPACE.${CLUSTER_DOMAIN}`];
  const [, portName, proto, svcName, svcNs, domain] = m;
  if (svcNs !== ns) problems.push(`discovery.dns.name ${dns.name}: namespace ${svcNs}, but the kustomization deploys to ${ns}`);
  if (domain !== CLUSTER_DOMAIN) problems.push(`discovery.dns.name ${dns.name}: domain ${domain}; expected ${CLUSTER_DOMAIN}`);
  const svc = find(base.docs, 'Service', svcName!);
  if (!svc) return [...problems, `discovery.dns.name ${dns.name}: no Service ${svcName}`];
  if (svc.spec?.clusterIP !== 'None') problems.push(`Service ${svcName}: not headless (clusterIP: None), so DNS would answer with one virtual IP`);
  if (svc.spec?.publishNotReadyAddresses !== true) problems.push(`Service ${svcName}: publishNotReadyAddresses is not true: a briefly unready pod would be removed (forced room moves)`);
  const sts = workloads(base.docs).find((w) => w.kind === 'StatefulSet' && w.doc.spec?.serviceName === svcName);
  if (!sts) return [...problems, `no StatefulSet has serviceName ${svcName} (pods would get no stable DNS names)`];
  if (!subset(svc.spec?.selector, sts.labels)) problems.push(`Service ${svcName}: selector does not match StatefulSet ${sts.name}`);
  const app = sts.containers.find(isApp) ?? sts.containers[0]!;
  const ports = (svc.spec?.ports ?? []) as Obj[];
  const port = dns.type === 'SRV' ? ports.find((p) => p.name === portName) : ports.find((p) => p.port === dns.port);
  if (!port) problems.push(`Service ${svcName}: no port ${dns.type === 'SRV' ? `named ${portName}` : dns.port}`);
  else {
    if (dns.type === 'SRV' && (port.protocol ?? 'TCP').toLowerCase() !== proto) problems.push(`Service ${svcName}: port ${portName} is ${port.protocol ?? 'TCP'}, the SRV name says ${proto}`);
    const target = portNumber(app, port.targetPort ?? port.port);
    if (target === undefined) problems.push(`Service ${svcName}: targetPort ${port.targetPort} is not a port of ${sts.name}`);
    else if (isApp(app) && Number(argFlag(app, '--port')) !== target) problems.push(`${sts.name}: listens on --port ${argFlag(app, '--port')}, the Service sends to ${target}`);
    if (dns.type !== 'SRV' && port.port !== target) problems.push(`Service ${svcName}: A records carry no port; port ${port.port} must be the pod's port ${target}`);
  }
  if (isApp(app) && argFlag(app, '--host') !== '0.0.0.0') problems.push(`${sts.name}: --host ${argFlag(app, '--host')}: roomgate in another pod could not reach it`);
  if (sts.doc.spec?.updateStrategy?.type !== 'OnDelete' && !hookScript(app, 'preStop').includes(' drain ')) {
    problems.push(`${sts.name}: updateStrategy ${sts.doc.spec?.updateStrategy?.type ?? 'RollingUpdate'} without a preStop drain: a rollout would restart backends without a drain`);
  }
  return problems;
}

/** The shell text a lifecycle hook runs (exec), '' without one. */
function hookScript(c: Container, hook: 'preStop' | 'postStart'): string {
  return ((c.lifecycle?.[hook]?.exec?.command ?? []) as string[]).join(' ');
}

/**
 * The backend pods drain themselves (docs/deployment.md, "A Kubernetes rolling update that keeps
 * every room"): the preStop hook drains its own id with handoff through an admin Service that
 * only the cluster reaches, with a drain token the gateways accept (never the admin token); the
 * call secrets agree (the handoff hooks verify them); postStart undrains; the grace covers the
 * wait; no Service but a ClusterIP one exposes the admin port.
 */
function drainHookProblems(base: KustomizeBase, checked: Checked): string[] {
  const problems: string[] = [];
  const gw = checked.gateways[0];
  const sts = workloads(base.docs).find((w) => w.kind === 'StatefulSet');
  if (!gw || !sts) return ['no gateway or no backend StatefulSet'];
  const adminPort = gw.config.admin.port;
  for (const { doc: svc } of base.docs.filter((d) => d.doc.kind === 'Service' && subset(d.doc.spec?.selector, gw.w.labels))) {
    const targets = ((svc.spec?.ports ?? []) as Obj[]).map((p) => portNumber(gw.c, p.targetPort ?? p.port));
    if (!targets.includes(adminPort)) continue;
    if ((svc.spec?.type ?? 'ClusterIP') !== 'ClusterIP') problems.push(`Service ${svc.metadata.name}: exposes the admin port as ${svc.spec.type}; keep it inside the cluster (ClusterIP)`);
    if (targets.includes(gw.config.listen.port)) problems.push(`Service ${svc.metadata.name}: exposes the admin port beside the public one; give the admin port a Service of its own`);
  }
  const app = sts.containers.find(isApp);
  if (!app) return [...problems, `${sts.name}: no app container`];
  const where = `${sts.name}/${app.name}`;
  const preStop = hookScript(app, 'preStop');
  if (!preStop.includes(' drain ')) return problems;
  const port = argFlag(app, '--port');
  if (!preStop.includes(`$POD_NAME:${port}`)) problems.push(`${where}: the preStop drain does not name this pod's backend id ($POD_NAME:${port})`);
  if (!/drain "\$id" --handoff/.test(preStop)) problems.push(`${where}: the preStop drain is not --handoff: the rooms would wait or be reset`);
  if (!/undrain "\$POD_NAME:\d+"/.test(hookScript(app, 'postStart'))) problems.push(`${where}: no postStart undrain: a restarted pod would stay draining`);
  const env = containerEnv(base.docs, app, problems, where);
  if ('ROOMGATE_ADMIN_TOKEN' in env) problems.push(`${where}: holds ROOMGATE_ADMIN_TOKEN; the app pods get a drain token only`);
  const token = (env.ROOMGATE_DRAIN_TOKENS ?? '').split(',')[0]?.trim() ?? '';
  if (!gw.config.admin.drainTokens.includes(token)) problems.push(`${where}: ROOMGATE_DRAIN_TOKENS's first token is not one of the gateways' admin.drainTokens`);
  problems.push(...callKeyProblems(base.docs, sts, app, env, gw.config.backendCalls.secrets, port, where));
  const url = new URL(env.ROOMGATE_ADMIN_URL ?? 'http://127.0.0.1:9090');
  const svc = find(base.docs, 'Service', url.hostname.split('.')[0] as string);
  const svcPort = ((svc?.spec?.ports ?? []) as Obj[]).find((p) => p.port === Number(url.port || 80));
  if (!svc || !subset(svc.spec?.selector, gw.w.labels)) problems.push(`${where}: ROOMGATE_ADMIN_URL ${url.href} is not a Service of the gateways`);
  else if (!svcPort || portNumber(gw.c, svcPort.targetPort ?? svcPort.port) !== adminPort) problems.push(`${where}: ROOMGATE_ADMIN_URL ${url.href} does not reach the admin port ${adminPort}`);
  if (!gw.config.admin.allowedHosts.includes(url.hostname)) problems.push(`${where}: ROOMGATE_ADMIN_URL host ${url.hostname} is not in admin.allowedHosts: the admin port would answer 421`);
  const wait = Number(/\$\(date \+%s\) \+ (\d+)/.exec(preStop)?.[1] ?? Number.NaN);
  const grace = sts.pod.terminationGracePeriodSeconds ?? 30;
  // The wait, the drain before it (a CLI call, up to its 10 s timeout) and the app's 2 s shutdown.
  if (!(grace >= wait + 10 + 2)) problems.push(`${sts.name}: terminationGracePeriodSeconds ${grace} does not cover the preStop wait (${wait} s) + the drain call (10 s) + the app's shutdown (2 s)`);
  return problems;
}

/** The sidecar: one pod, roomgate the only entry, the apps on 127.0.0.1 ports listed as backends. */
function sidecarProblems(base: KustomizeBase, checked: Checked): string[] {
  const problems: string[] = [];
  const gw = checked.gateways[0];
  if (!gw || checked.gateways.length !== 1) return [`expected one roomgate container, found ${checked.gateways.length}`];
  const apps = gw.w.containers.filter(isApp);
  if (apps.length < 2) problems.push(`${gw.w.name}: ${apps.length} app containers; a sidecar pod runs K >= 2`);
  for (const c of gw.w.containers) if (c !== gw.c && (c.ports ?? []).length > 0) problems.push(`${gw.w.name}/${c.name}: declares ports; roomgate is the pod's only entry`);
  for (const b of gw.config.backends) {
    if (b.host !== '127.0.0.1') problems.push(`backend ${b.id} ${b.url}: not on localhost`);
    const app = apps.find((a) => Number(argFlag(a, '--port')) === b.port);
    if (!app) problems.push(`backend ${b.id} ${b.url}: no app container listens on port ${b.port}`);
    else if (argFlag(app, '--host') !== '127.0.0.1') problems.push(`${app.name}: --host ${argFlag(app, '--host')}; 127.0.0.1 keeps it behind roomgate`);
  }
  for (const a of apps) if (!gw.config.backends.some((b) => b.port === Number(argFlag(a, '--port')))) problems.push(`${a.name}: not among roomgate's backends`);
  const svc = base.docs.find((d) => d.doc.kind === 'Service')?.doc;
  const target = svc?.spec?.ports?.[0]?.targetPort;
  if (portNumber(gw.c, target) !== gw.config.listen.port) problems.push(`Service ${svc?.metadata?.name}: targets ${target}, not roomgate's public port`);
  if (gw.config.redis.url === null && (gw.w.doc.spec?.replicas ?? 1) !== 1) problems.push(`${gw.w.name}: more than one replica with in-memory rooms`);
  return problems;
}

const BASE = loadKustomize('deploy/kubernetes');
const SIDECAR = loadKustomize('deploy/kubernetes/sidecar');

describe('deploy/kubernetes (base)', () => {
  it('parses every resource, and holds the expected objects', () => {
    const kinds = BASE.docs.map((d) => `${d.doc.kind}/${d.doc.metadata.name}`).sort();
    expect(kinds).toEqual(
      [
        'ConfigMap/roomgate-config',
        'Deployment/redis',
        'Deployment/roomgate',
        'Namespace/roomgate',
        'PodDisruptionBudget/demo-backend',
        'PodDisruptionBudget/roomgate',
        'Secret/roomgate-secrets',
        'Service/demo-backend',
        'Service/redis',
        'Service/roomgate',
        'Service/roomgate-admin',
        'StatefulSet/demo-backend',
      ].sort(),
    );
    const rg = find(BASE.docs, 'Deployment', 'roomgate')!;
    expect(rg.spec.replicas).toBe(2);
    // The Redis Deployment says to use a managed Redis in production.
    expect(readText('deploy/kubernetes/redis.yaml')).toMatch(/managed Redis/);
  });

  it('keeps every rule (config, env, secrets, probes, grace, selectors, resources)', () => {
    expect(baseProblems(BASE).problems).toEqual([]);
  });

  it('discovers the backends by DNS: headless Service, StatefulSet and config agree', () => {
    const checked = baseProblems(BASE);
    expect(discoveryProblems(BASE, checked)).toEqual([]);
    expect(checked.gateways[0]?.config.discovery.dns?.type).toBe('SRV');
  });

  it('lets a backend pod drain itself: preStop drain with handoff through the admin Service, a drain token, never the admin token', () => {
    expect(drainHookProblems(BASE, baseProblems(BASE))).toEqual([]);
    const app = find(BASE.docs, 'StatefulSet', 'demo-backend')!.spec.template.spec.containers[0];
    expect(hookScript(app, 'preStop')).toContain('node dist/src/main.js drain "$id" --handoff');
    // The public Service is only the public port.
    expect(find(BASE.docs, 'Service', 'roomgate')!.spec.ports).toEqual([{ name: 'http', port: 80, targetPort: 'http' }]);
  });

  const app = (b: KustomizeBase): Obj => find(b.docs, 'StatefulSet', 'demo-backend')!.spec.template.spec.containers[0];
  const appEnv = (b: KustomizeBase, name: string): Obj => app(b).env.find((e: Obj) => e.name === name);
  const initEnv = (b: KustomizeBase, name: string): Obj => find(b.docs, 'StatefulSet', 'demo-backend')!.spec.template.spec.initContainers[0].env.find((e: Obj) => e.name === name);
  const brokenDrain: [string, (b: KustomizeBase) => void, RegExp][] = [
    ['the admin token in the app pods', (b) => app(b).env.push({ name: 'ROOMGATE_ADMIN_TOKEN', valueFrom: { secretKeyRef: { name: 'roomgate-secrets', key: 'admin-token' } } }), /holds ROOMGATE_ADMIN_TOKEN/],
    ['the admin token as the drain token', (b) => (appEnv(b, 'ROOMGATE_DRAIN_TOKENS').valueFrom.secretKeyRef.key = 'admin-token'), /first token is not one of the gateways' admin\.drainTokens/],
    ['other call secrets in the key init container', (b) => (initEnv(b, 'ROOMGATE_CALL_SECRETS').valueFrom.secretKeyRef.key = 'cookie-secrets'), /shares no secret/],
    ['the call secrets in the app', (b) => app(b).env.push({ name: 'ROOMGATE_CALL_SECRETS', valueFrom: { secretKeyRef: { name: 'roomgate-secrets', key: 'call-secrets' } } }), /holds ROOMGATE_CALL_SECRETS/],
    ['another backend id in the app', (b) => (appEnv(b, 'ROOMGATE_BACKEND_ID').value = '$(POD_NAME)'), /is not this pod's backend id/],
    ['no key init container', (b) => delete find(b.docs, 'StatefulSet', 'demo-backend')!.spec.template.spec.initContainers, /not on a volume an init container writes/],
    ['the public Service as the admin URL', (b) => (appEnv(b, 'ROOMGATE_ADMIN_URL').value = 'http://roomgate:80'), /does not reach the admin port 9090/],
    [
      'the admin Service not in allowedHosts',
      (b) => {
        const cm = find(b.docs, 'ConfigMap', 'roomgate-config')!;
        cm.data['roomgate.yaml'] = String(cm.data['roomgate.yaml']).replace('allowedHosts: [roomgate-admin]', 'allowedHosts: []');
      },
      /host roomgate-admin is not in admin\.allowedHosts/,
    ],
    ['a grace shorter than the drain', (b) => (find(b.docs, 'StatefulSet', 'demo-backend')!.spec.template.spec.terminationGracePeriodSeconds = 30), /terminationGracePeriodSeconds 30 does not cover/],
    ['no postStart undrain', (b) => delete app(b).lifecycle.postStart, /no postStart undrain/],
    ['a drain without handoff', (b) => (app(b).lifecycle.preStop.exec.command[2] = String(app(b).lifecycle.preStop.exec.command[2]).replace(' --handoff', '')), /not --handoff/],
    ['the admin port on the public Service', (b) => find(b.docs, 'Service', 'roomgate')!.spec.ports.push({ name: 'admin', port: 9090, targetPort: 'admin' }), /roomgate: exposes the admin port beside the public one/],
    ['the admin Service as a LoadBalancer', (b) => (find(b.docs, 'Service', 'roomgate-admin')!.spec.type = 'LoadBalancer'), /exposes the admin port as LoadBalancer/],
    ['a rolling update without the preStop drain', (b) => delete app(b).lifecycle.preStop, /RollingUpdate without a preStop drain/],
  ];
  it.each(brokenDrain)('fails with %s', (_name, breakIt, problem) => {
    const copy = clone(BASE);
    breakIt(copy);
    const checked = baseProblems(copy);
    expect([...checked.problems, ...discoveryProblems(copy, checked), ...drainHookProblems(copy, checked)].join('\n')).toMatch(problem);
  });

  const rg = (d: KustomizeBase): Obj => find(d.docs, 'Deployment', 'roomgate')!;
  const rgc = (d: KustomizeBase): Obj => rg(d).spec.template.spec.containers[0];
  const broken: [string, (b: KustomizeBase) => void, RegExp][] = [
    ['a liveness timeout of 1 s', (b) => (rgc(b).livenessProbe.timeoutSeconds = 1), /livenessProbe timeoutSeconds 1/],
    ['readiness on the wrong path', (b) => (rgc(b).readinessProbe.httpGet.path = '/ready'), /readinessProbe path \/ready; expected \/readyz/],
    ['a probe on the admin port', (b) => (rgc(b).livenessProbe.httpGet.port = 'admin'), /livenessProbe on port 9090/],
    ['a grace period shorter than the shutdown', (b) => (rg(b).spec.template.spec.terminationGracePeriodSeconds = 25), /terminationGracePeriodSeconds 25/],
    ['no preStop', (b) => delete rgc(b).lifecycle, /no preStop sleep/],
    ['a secretKeyRef to a missing key', (b) => (rgc(b).env.find((e: Obj) => e.name === 'ROOMGATE_ADMIN_TOKEN').valueFrom.secretKeyRef.key = 'admin'), /Secret roomgate-secrets key admin, which does not exist/],
    ['an env name roomgate does not read', (b) => rgc(b).env.push({ name: 'ROOMGATE_REDIS_URL', value: 'redis://redis:6379' }), /ROOMGATE_REDIS_URL is not a variable/],
    ['a too-short API token in the Secret', (b) => (find(b.docs, 'Secret', 'roomgate-secrets')!.stringData['api-tokens'] = 'short'), /api\.tokens/],
    ['an invalid roomgate.yaml', (b) => (find(b.docs, 'ConfigMap', 'roomgate-config')!.data['roomgate.yaml'] += 'listen:\n  port: 70000\n'), /roomgate-config roomgate\.yaml/],
    ['a PDB that selects nothing', (b) => (find(b.docs, 'PodDisruptionBudget', 'roomgate')!.spec.selector.matchLabels['app.kubernetes.io/name'] = 'gateway'), /PodDisruptionBudget roomgate: selector matches 0 workloads/],
    ['a PDB that blocks every eviction', (b) => (find(b.docs, 'PodDisruptionBudget', 'roomgate')!.spec.minAvailable = 2), /minAvailable 2 blocks/],
    ['a container without limits', (b) => delete rgc(b).resources.limits, /no resources\.limits\.cpu/],
    ['a Service with a wrong targetPort', (b) => (find(b.docs, 'Service', 'roomgate')!.spec.ports[0].targetPort = 'web'), /targetPort web is not a port/],
    ['a missing resource file', (b) => b.kustomization.resources.push('ingress.yaml'), /resource ingress\.yaml does not exist/],
    ['one replica too many without Redis', (b) => (rgc(b).env = rgc(b).env.filter((e: Obj) => e.name !== 'REDIS_URL')), /2 replicas without Redis/],
    [
      'an HTTP health check of a route the backends do not probe',
      (b) => {
        const cm = find(b.docs, 'ConfigMap', 'roomgate-config')!;
        cm.data['roomgate.yaml'] = String(cm.data['roomgate.yaml']).replace('path: /healthz', 'path: /status');
      },
      /health\.path \/status, but demo-backend\/app's readinessProbe checks \/healthz/,
    ],
  ];
  it.each(broken)('fails with %s', (_name, breakIt, problem) => {
    const copy = clone(BASE);
    breakIt(copy);
    const checked = baseProblems(copy);
    expect([...checked.problems, ...discoveryProblems(copy, checked)].join('\n')).toMatch(problem);
  });

  const brokenDiscovery: [string, (b: KustomizeBase) => void, RegExp][] = [
    ['a Service that is not headless', (b) => delete find(b.docs, 'Service', 'demo-backend')!.spec.clusterIP, /not headless/],
    ['a StatefulSet with another serviceName', (b) => (find(b.docs, 'StatefulSet', 'demo-backend')!.spec.serviceName = 'backends'), /no StatefulSet has serviceName demo-backend/],
    ['another namespace than the DNS name', (b) => (b.kustomization.namespace = 'games'), /namespace roomgate, but the kustomization deploys to games/],
    ['a renamed Service port', (b) => (find(b.docs, 'Service', 'demo-backend')!.spec.ports[0].name = 'web'), /no port named http/],
    ['a backend listening elsewhere', (b) => (find(b.docs, 'StatefulSet', 'demo-backend')!.spec.template.spec.containers[0].args[3] = '9000'), /listens on --port 9000/],
  ];
  it.each(brokenDiscovery)('fails with %s', (_name, breakIt, problem) => {
    const copy = clone(BASE);
    breakIt(copy);
    const checked = baseProblems(copy);
    expect([...checked.problems, ...discoveryProblems(copy, checked)].join('\n')).toMatch(problem);
  });
});

describe('deploy/kubernetes/sidecar', () => {
  it('parses every resource: one Deployment with roomgate and K apps, its Service, config and Secret', () => {
    const kinds = SIDECAR.docs.map((d) => `${d.doc.kind}/${d.doc.metadata.name}`).sort();
    expect(kinds).toEqual(['ConfigMap/roomgate-config', 'Deployment/roomgate-sidecar', 'Namespace/roomgate-sidecar', 'Secret/roomgate-secrets', 'Service/roomgate'].sort());
  });

  it('keeps every rule (config, env, secrets, probes, grace, selectors, resources)', () => {
    expect(baseProblems(SIDECAR).problems).toEqual([]);
  });

  it('routes to K app containers on localhost ports; roomgate is the only entry; one replica, Recreate', () => {
    const checked = baseProblems(SIDECAR);
    expect(sidecarProblems(SIDECAR, checked)).toEqual([]);
    const d = find(SIDECAR.docs, 'Deployment', 'roomgate-sidecar')!;
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.strategy.type).toBe('Recreate');
  });

  const dep = (b: KustomizeBase): Obj => find(b.docs, 'Deployment', 'roomgate-sidecar')!;
  const app = (b: KustomizeBase, n: number): Obj => dep(b).spec.template.spec.containers.find((c: Obj) => c.name === `app-${n}`);
  const broken: [string, (b: KustomizeBase) => void, RegExp][] = [
    ['a rolling update with in-memory rooms', (b) => (dep(b).spec.strategy = { type: 'RollingUpdate' }), /in-memory store with a RollingUpdate strategy/],
    ['an app on another port', (b) => (app(b, 2).args[3] = '8009'), /backend app-2 http:\/\/127\.0\.0\.1:8002: no app container/],
    ['an app reachable from outside', (b) => (app(b, 1).args[1] = '0.0.0.0'), /app-1: --host 0\.0\.0\.0/],
    ['an app with a published port', (b) => (app(b, 3).ports = [{ name: 'app', containerPort: 8003 }]), /app-3: declares ports/],
    ['an app probe on the wrong port', (b) => (app(b, 3).readinessProbe.exec.command[2] = "fetch('http://127.0.0.1:8001/healthz')"), /app-3: readinessProbe exec does not check 127\.0\.0\.1:8003\/healthz/],
    ['two replicas', (b) => (dep(b).spec.replicas = 2), /2 replicas without Redis/],
    ['an app that does not answer the gateway health path', (b) => (app(b, 2).readinessProbe.exec.command[2] = "fetch('http://127.0.0.1:8002/ready')"), /health\.path \/healthz, but roomgate-sidecar\/app-2's readinessProbe checks \/ready/],
  ];
  it.each(broken)('fails with %s', (_name, breakIt, problem) => {
    const copy = clone(SIDECAR);
    breakIt(copy);
    const checked = baseProblems(copy);
    expect([...checked.problems, ...sidecarProblems(copy, checked)].join('\n')).toMatch(problem);
  });
});

describe('the image name', () => {
  it('is the same in the compose files, both kustomizations and every manifest', () => {
    for (const f of ['deploy/docker-compose.yml', 'deploy/docker-compose.sidecar.yml']) {
      const services = (yamlDocs(f)[0]?.services ?? {}) as Record<string, Obj>;
      for (const [n, s] of Object.entries(services)) if (String(s.image).startsWith('roomgate')) expect(s.image, `${f} ${n}`).toBe(IMAGE);
    }
    for (const base of [BASE, SIDECAR]) {
      for (const w of workloads(base.docs)) for (const c of w.containers) if (String(c.image).startsWith('roomgate')) expect(c.image, `${w.name}/${c.name}`).toBe(IMAGE);
    }
  });
});

/** A JSON patch (add, replace) applied in place, as kustomize applies a Component's patches. */
function applyJsonPatch(doc: Obj, ops: readonly Obj[]): void {
  for (const op of ops) {
    const parts = String(op.path).split('/').slice(1);
    const last = parts.pop() as string;
    let at: Obj = doc;
    for (const p of parts) {
      if (at[p] === undefined) throw new Error(`patch ${op.path}: no ${p}`);
      at = at[p];
    }
    if (op.op === 'add' && Array.isArray(at) && last === '-') (at as unknown[]).push(op.value);
    else if (op.op === 'add' || op.op === 'replace') {
      const target = at as Record<string, unknown>;
      if (op.op === 'replace' && target[last] === undefined) throw new Error(`patch ${op.path}: nothing to replace`);
      target[last] = op.value;
    } else throw new Error(`patch ${op.path}: op ${op.op} not applied here`);
  }
}

/** The base with the tls Component applied. */
function withTlsComponent(base: KustomizeBase, component: Obj): KustomizeBase {
  const b = clone(base);
  for (const p of component.patches as Obj[]) {
    const target = b.docs.find((d) => d.doc.kind === p.target.kind && d.doc.metadata?.name === p.target.name);
    if (!target) throw new Error(`patch target ${p.target.kind}/${p.target.name} not in the base`);
    applyJsonPatch(target.doc, yamlDocsOf(p.patch as string)[0] as Obj[]);
  }
  return b;
}

describe('deploy/kubernetes/tls (a Component: TLS from a Secret)', () => {
  const [component] = yamlDocs('deploy/kubernetes/tls/kustomization.yaml');

  it('is a Component whose patches apply to the base, and the result keeps every rule with TLS on', () => {
    expect(component!.kind).toBe('Component');
    const tls = withTlsComponent(BASE, component!);
    const checked = baseProblems(tls);
    expect(checked.problems).toEqual([]);
    const gw = checked.gateways[0]!;
    expect(gw.config.tls.certs).toEqual([{ cert: '/etc/roomgate-tls/tls.crt', key: '/etc/roomgate-tls/tls.key' }]);
    const svc = find(tls.docs, 'Service', 'roomgate')!;
    expect(svc.spec.ports[0]).toEqual({ name: 'https', port: 443, targetPort: 'http' });
  });

  it('fails without the probes on HTTPS, or with the files outside a Secret volume', () => {
    const noScheme = clone(component!);
    noScheme.patches[0].patch = (noScheme.patches[0].patch as string).replace(/\n- op: add\n\s+path: \/spec\/template\/spec\/containers\/0\/readinessProbe\/httpGet\/scheme\n\s+value: HTTPS/, '');
    expect(noScheme.patches[0].patch).not.toBe(component!.patches[0].patch);
    expect(baseProblems(withTlsComponent(BASE, noScheme)).problems.join('\n')).toMatch(/readinessProbe scheme HTTP while TLS is on/);
    const elsewhere = clone(component!);
    elsewhere.patches[0].patch = (elsewhere.patches[0].patch as string).replace('value: /etc/roomgate-tls/tls.crt:/etc/roomgate-tls/tls.key', 'value: /tmp/tls.crt:/tmp/tls.key');
    expect(baseProblems(withTlsComponent(BASE, elsewhere)).problems.join('\n')).toMatch(/\/tmp\/tls\.crt is not in a volume mounted from a Secret/);
  });
});
