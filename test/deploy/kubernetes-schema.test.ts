// deploy/kubernetes, deploy/kubernetes/sidecar and the base with the tls Component, rendered the way
// `kubectl apply -k` renders them (Debian's kubectl 1.20 has a kustomize too old for these files, so
// the test resolves them itself: resources, components, namespace, labels, images) and every object
// validated against the Kubernetes schemas of the npm package kubernetes-models (types, required
// fields, enums). On the rendered objects: every roomgate container probes roomgate's own health
// paths (/healthz alive, /readyz ready) on the port roomgate listens on (listen.port of its
// ConfigMap), and the pod's termination grace covers preStop + shutdown.readinessDelayMs +
// shutdown.graceMs. Broken copies show each check failing.
// (test/deploy/kubernetes.test.ts checks the same files as data, rule by rule, before rendering.)
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { clone, ROOT, yamlDocs, yamlDocsOf, type Obj } from '../support/deploy-files.js';

const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'StorageClass', 'CustomResourceDefinition', 'PriorityClass']);
const HANDLED = new Set(['apiVersion', 'kind', 'namespace', 'labels', 'resources', 'components', 'images', 'patches']);

/** A JSON patch (RFC 6902: add, replace, remove) applied in place. */
function applyJsonPatch(doc: Obj, ops: readonly Obj[]): void {
  for (const op of ops) {
    const parts = String(op.path).split('/').slice(1).map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = parts.pop() as string;
    let at: Obj = doc;
    for (const p of parts) {
      if (at[p] === undefined) throw new Error(`patch ${op.path}: no ${p}`);
      at = at[p];
    }
    if (Array.isArray(at)) {
      const i = last === '-' ? at.length : Number(last);
      if (op.op === 'add') at.splice(i, 0, op.value);
      else if (op.op === 'replace') at[i] = op.value;
      else if (op.op === 'remove') at.splice(i, 1);
      else throw new Error(`patch ${op.path}: op ${op.op} not resolved by this test`);
    } else if (op.op === 'add') at[last] = op.value;
    else if (op.op === 'replace' || op.op === 'remove') {
      if (at[last] === undefined) throw new Error(`patch ${op.path}: nothing to ${op.op}`);
      if (op.op === 'replace') at[last] = op.value;
      else delete at[last];
    } else throw new Error(`patch ${op.path}: op ${op.op} not resolved by this test`);
  }
}

function applyPatches(docs: Obj[], patches: readonly Obj[] = [], where: string): void {
  for (const p of patches) {
    const matches = docs.filter((d) => (!p.target?.kind || d.kind === p.target.kind) && (!p.target?.name || d.metadata?.name === p.target.name));
    if (matches.length === 0) throw new Error(`${where}: patch target ${p.target?.kind}/${p.target?.name} matches nothing`);
    const ops = yamlDocsOf(String(p.patch), where)[0];
    if (!Array.isArray(ops)) throw new Error(`${where}: only JSON patches (a list of ops) are resolved by this test`);
    for (const d of matches) applyJsonPatch(d, ops as Obj[]);
  }
}

/** Every pod template of a workload (Deployment, StatefulSet, DaemonSet, Job). */
function podSpecs(d: Obj): Obj[] {
  return d.spec?.template?.spec ? [d.spec.template.spec] : [];
}

/** A kustomization key render() does not resolve is an error: a silently skipped key would render wrong. */
function refuseUnresolved(k: Obj, dir: string): void {
  const unknown = Object.keys(k).filter((key) => !HANDLED.has(key));
  if (unknown.length) throw new Error(`${dir}: ${unknown.join(', ')} not resolved by this test; extend render()`);
}

/** `kubectl kustomize dir` for the subset these files use; anything else is an error, not a skip. */
function render(dir: string, extraComponents: readonly string[] = []): Obj[] {
  const [k] = yamlDocs(join(dir, 'kustomization.yaml'));
  if (!k) throw new Error(`${dir}/kustomization.yaml is empty`);
  refuseUnresolved(k, dir);
  const docs: Obj[] = [];
  for (const r of (k.resources ?? []) as string[]) {
    const rel = join(dir, r);
    docs.push(...(existsSync(join(ROOT, rel, 'kustomization.yaml')) ? render(rel) : yamlDocs(rel).map((d) => clone(d))));
  }
  for (const c of [...((k.components ?? []) as string[]), ...extraComponents]) {
    const [component] = yamlDocs(join(dir, c, 'kustomization.yaml'));
    if (component?.kind !== 'Component') throw new Error(`${dir}/${c} is not a kustomize Component`);
    applyPatches(docs, component.patches as Obj[], `${dir}/${c}`);
  }
  applyPatches(docs, k.patches as Obj[] | undefined, dir);
  for (const d of docs) {
    if (k.namespace && !CLUSTER_SCOPED.has(d.kind)) d.metadata = { ...d.metadata, namespace: k.namespace };
    if (k.namespace && d.kind === 'Namespace') d.metadata.name = k.namespace;
    for (const l of (k.labels ?? []) as Obj[]) {
      d.metadata = { ...d.metadata, labels: { ...d.metadata?.labels, ...l.pairs } };
      if (l.includeSelectors || l.includeTemplates) {
        const t = d.spec?.template;
        if (t) t.metadata = { ...t.metadata, labels: { ...t.metadata?.labels, ...l.pairs } };
      }
      if (l.includeSelectors && d.spec?.selector) {
        if (d.spec.selector.matchLabels) Object.assign(d.spec.selector.matchLabels, l.pairs);
        else if (d.kind === 'Service') Object.assign(d.spec.selector, l.pairs);
      }
    }
    for (const spec of podSpecs(d)) {
      for (const c of [...(spec.containers ?? []), ...(spec.initContainers ?? [])] as Obj[]) {
        const name = String(c.image).replace(/[@:][^/]*$/, '');
        const img = ((k.images ?? []) as Obj[]).find((i) => i.name === name);
        if (img) c.image = `${img.newName ?? name}${img.digest ? `@${img.digest}` : `:${img.newTag ?? 'latest'}`}`;
      }
    }
  }
  return docs;
}

/** The kubernetes-models class for an object: kubernetes-models/<group>/<version>/<Kind>. */
async function modelFor(d: Obj): Promise<(new (data: Obj) => { validate(): void }) | undefined> {
  try {
    const mod = (await import(`kubernetes-models/${String(d.apiVersion)}/${String(d.kind)}`)) as Record<string, new (data: Obj) => { validate(): void }>;
    return mod[String(d.kind)];
  } catch {
    return undefined;
  }
}

/** Schema problems of every object ("Kind/name: what"). */
async function schemaProblems(docs: readonly Obj[]): Promise<string[]> {
  const out: string[] = [];
  for (const d of docs) {
    const where = `${d.kind}/${d.metadata?.name}`;
    const Model = await modelFor(d);
    if (!Model) {
      out.push(`${where}: no Kubernetes schema for apiVersion ${d.apiVersion} kind ${d.kind}`);
      continue;
    }
    try {
      new Model(d).validate();
    } catch (err) {
      out.push(`${where}: ${(err as Error).message}`);
    }
  }
  return out;
}

function find(docs: readonly Obj[], kind: string, name: string): Obj | undefined {
  return docs.find((d) => d.kind === kind && d.metadata?.name === name);
}

/** A container's environment with Secret and ConfigMap references resolved from the rendered objects. */
function envOf(docs: readonly Obj[], c: Obj): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of (c.env ?? []) as Obj[]) {
    const s = e.valueFrom?.secretKeyRef;
    const m = e.valueFrom?.configMapKeyRef;
    if (e.value !== undefined) env[e.name] = String(e.value);
    else if (s) {
      const secret = find(docs, 'Secret', s.name);
      const v = secret?.stringData?.[s.key] ?? (secret?.data?.[s.key] !== undefined ? Buffer.from(String(secret.data[s.key]), 'base64').toString() : undefined);
      if (v !== undefined) env[e.name] = String(v);
    } else if (m && find(docs, 'ConfigMap', m.name)?.data?.[m.key] !== undefined) env[e.name] = String(find(docs, 'ConfigMap', m.name)!.data[m.key]);
  }
  return env;
}

/** roomgate's config as the container loads it: the ConfigMap file mounted at ROOMGATE_CONFIG, plus its env. */
function configOf(docs: readonly Obj[], spec: Obj, c: Obj): ReturnType<typeof loadConfig> {
  const env = envOf(docs, c);
  const path = env.ROOMGATE_CONFIG ?? '/etc/roomgate/roomgate.yaml';
  const mount = ((c.volumeMounts ?? []) as Obj[]).find((vm) => path.startsWith(`${vm.mountPath}/`) || vm.mountPath === path);
  const volume = ((spec.volumes ?? []) as Obj[]).find((v) => v.name === mount?.name);
  const key = mount?.subPath ?? path.split('/').pop()!;
  const text = find(docs, 'ConfigMap', volume?.configMap?.name)?.data?.[key];
  if (typeof text !== 'string') throw new Error(`${c.name}: ${path} is not mounted from a ConfigMap key`);
  const dir = mkdtempSync(join(tmpdir(), 'roomgate-k8s-schema-'));
  try {
    const file = join(dir, key);
    writeFileSync(file, text);
    return loadConfig({ file, env: { ...env, ROOMGATE_CONFIG: file } });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function preStopSeconds(c: Obj): number {
  const hook = c.lifecycle?.preStop;
  if (!hook) return 0;
  if (hook.sleep?.seconds !== undefined) return Number(hook.sleep.seconds);
  const cmd = (hook.exec?.command ?? []) as string[];
  return cmd[0] === 'sleep' || cmd[0] === '/bin/sleep' ? Number(cmd[1]) : Number.NaN;
}

/** Probes and termination grace of every roomgate gateway container, against its loaded config. */
function gatewayProblems(docs: readonly Obj[]): { problems: string[]; gateways: number } {
  const problems: string[] = [];
  let gateways = 0;
  for (const d of docs) {
    for (const spec of podSpecs(d)) {
      for (const c of (spec.containers ?? []) as Obj[]) {
        const isGateway = String(c.image).startsWith('roomgate') && !c.command && ((c.args as string[] | undefined) ?? ['start'])[0] === 'start';
        if (!isGateway) continue;
        gateways++;
        const where = `${d.kind}/${d.metadata.name}/${c.name}`;
        const config = configOf(docs, spec, c);
        for (const [label, path] of [
          ['livenessProbe', '/healthz'],
          ['readinessProbe', '/readyz'],
        ] as const) {
          const get = c[label]?.httpGet;
          if (!get) {
            problems.push(`${where}: ${label} is not an httpGet`);
            continue;
          }
          if (get.path !== path) problems.push(`${where}: ${label} GETs ${get.path}; roomgate answers ${path}`);
          const port = typeof get.port === 'number' ? get.port : ((c.ports ?? []) as Obj[]).find((p) => p.name === get.port)?.containerPort;
          if (port !== config.listen.port) problems.push(`${where}: ${label} on port ${get.port} (${port}); roomgate listens on ${config.listen.port}`);
          const tls = config.tls.certs.length > 0;
          if ((get.scheme === 'HTTPS') !== tls) problems.push(`${where}: ${label} scheme ${get.scheme ?? 'HTTP'} while TLS is ${tls ? 'on' : 'off'}`);
        }
        const needed = preStopSeconds(c) + (config.shutdown.readinessDelayMs + config.shutdown.graceMs) / 1000;
        const grace = spec.terminationGracePeriodSeconds ?? 30;
        if (!(grace > needed)) problems.push(`${where}: terminationGracePeriodSeconds ${grace} does not cover preStop + readinessDelayMs + graceMs (${needed} s)`);
      }
    }
  }
  return { problems, gateways };
}

const RENDERINGS: [string, () => Obj[]][] = [
  ['deploy/kubernetes', () => render('deploy/kubernetes')],
  ['deploy/kubernetes with components: [tls]', () => render('deploy/kubernetes', ['tls'])],
  ['deploy/kubernetes/sidecar', () => render('deploy/kubernetes/sidecar')],
];

describe.each(RENDERINGS)('%s, rendered', (dir, rendered) => {
  it('is every object valid against the Kubernetes schemas', async () => {
    const docs = rendered();
    expect(docs.length).toBeGreaterThanOrEqual(5);
    expect(await schemaProblems(docs)).toEqual([]);
  });

  it('has the namespace, labels and image the kustomization sets', () => {
    const [k] = yamlDocs(join(dir.split(' ')[0]!, 'kustomization.yaml'));
    const docs = rendered();
    for (const d of docs.filter((x) => x.kind !== 'Namespace')) expect(d.metadata.namespace, `${d.kind}/${d.metadata.name}`).toBe(k!.namespace);
    for (const d of docs) expect(d.metadata.labels, `${d.kind}/${d.metadata.name}`).toMatchObject(k!.labels[0].pairs);
    const images = docs.flatMap((d) => podSpecs(d).flatMap((s) => (s.containers as Obj[]).map((c) => String(c.image))));
    expect(images.filter((i) => i.startsWith('roomgate')).every((i) => i === 'roomgate:local')).toBe(true);
  });

  it("probes roomgate's health paths on its port, and the termination grace covers preStop + shutdown.graceMs", () => {
    const { problems, gateways } = gatewayProblems(rendered());
    expect(gateways).toBeGreaterThanOrEqual(1);
    expect(problems).toEqual([]);
  });
});

describe('the rendered manifests, broken', () => {
  const base = (): Obj[] => render('deploy/kubernetes');
  const gateway = (docs: Obj[]): Obj => find(docs, 'Deployment', 'roomgate')!.spec.template.spec.containers[0];

  it.each<[string, (docs: Obj[]) => void, RegExp]>([
    ['replicas as a string', (docs) => (find(docs, 'Deployment', 'roomgate')!.spec.replicas = '2'), /Deployment\/roomgate: .*spec\/replicas must be integer/],
    ['a container without a name', (docs) => delete gateway(docs).name, /Deployment\/roomgate: .*containers\/0 must have required property name/],
    ['a probe without a port', (docs) => delete gateway(docs).readinessProbe.httpGet.port, /readinessProbe\/httpGet must have required property port/],
    ['a Service port that is not a number', (docs) => (find(docs, 'Service', 'roomgate')!.spec.ports[0].port = 'eighty'), /Service\/roomgate: .*ports\/0\/port must be integer/],
    ['a kind with no schema', (docs) => (find(docs, 'PodDisruptionBudget', 'roomgate')!.apiVersion = 'policy/v1beta9'), /no Kubernetes schema for apiVersion policy\/v1beta9/],
  ])('fails the schema check with %s', async (_name, breakIt, problem) => {
    const docs = base();
    breakIt(docs);
    expect((await schemaProblems(docs)).join('\n')).toMatch(problem);
  });

  it.each<[string, (docs: Obj[]) => void, RegExp]>([
    ['liveness on /readyz', (docs) => (gateway(docs).livenessProbe.httpGet.path = '/readyz'), /livenessProbe GETs \/readyz; roomgate answers \/healthz/],
    ['readiness on the admin port', (docs) => (gateway(docs).readinessProbe.httpGet.port = 'admin'), /readinessProbe on port admin \(9090\); roomgate listens on 8080/],
    ['a grace shorter than preStop + graceMs', (docs) => (find(docs, 'Deployment', 'roomgate')!.spec.template.spec.terminationGracePeriodSeconds = 20), /terminationGracePeriodSeconds 20 does not cover/],
    ['probes over HTTP with TLS on', (docs) => gateway(docs).env.push({ name: 'ROOMGATE_TLS_CERTS', value: '/etc/roomgate-tls/tls.crt:/etc/roomgate-tls/tls.key' }), /scheme HTTP while TLS is on/],
  ])('fails the probe and grace check with %s', (_name, breakIt, problem) => {
    const docs = base();
    breakIt(docs);
    expect(gatewayProblems(docs).problems.join('\n')).toMatch(problem);
  });

  it('refuses a kustomization key it does not resolve, rather than skipping it', () => {
    const [k] = yamlDocs('deploy/kubernetes/kustomization.yaml');
    expect(() => refuseUnresolved(k!, 'deploy/kubernetes')).not.toThrow();
    expect(() => refuseUnresolved({ ...k, configMapGenerator: [] }, 'deploy/kubernetes')).toThrow(/configMapGenerator not resolved by this test/);
  });
});
