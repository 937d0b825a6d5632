/**
 * `npm run conformance:compare`: the request and response corpora and a short fuzz run against
 * roomgate, nginx, HAProxy and the http-proxy-3 reference, each in front of a fresh byte-logging
 * backend, side by side. Writes bench/results/conformance.md: by class (what the client got, how
 * many cases went as roomgate intends, markers where an invariant broke), the fuzz run, and every
 * case. Not part of `npm test`; proxies that are not installed are left out.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { accept101, startRawBackend, type Answer } from '../../test/conformance/backend.js';
import { FUZZ_GATEWAY_CONFIG, runFuzz } from '../../test/conformance/fuzz.js';
import { GATEWAY_CONFIGS, REQUEST_CASES, type RequestCase } from '../../test/conformance/request-cases.js';
import { RESPONSE_CASES, type ResponseCase } from '../../test/conformance/response-cases.js';
import {
  ClientAddresses,
  handshakeConnProblems,
  judgeRequest,
  responseProblems,
  runRequestCase,
  runResponseCase,
  scriptedByClient,
  summarize,
  summarizeResponse,
  unclaimed,
} from '../../test/conformance/runner.js';
import { cleanupAll } from '../suite/procs.js';
import { merge, ROOT, versions } from '../suite/proxies.js';
import { installed, PROXIES, startConformanceTarget, type ProxyName } from './targets.js';

const { values } = parseArgs({ options: { 'fuzz-cases': { type: 'string', default: '3000' }, out: { type: 'string', default: join(ROOT, 'bench/results/conformance.md') } } });
const say = (s: string): void => void process.stdout.write(`${s}\n`);

interface Cell {
  readonly text: string;
  /** As roomgate intends (docs/proxying.md, "Routing and proxying"). */
  readonly intended: boolean;
}

interface ProxyResult {
  readonly requests: Map<string, Cell>;
  readonly responses: Map<string, Cell>;
  readonly notes: string[];
  fuzz: string[];
}

const ROOMGATE_CONFIG = merge(GATEWAY_CONFIGS.base, { proxy: { maxIdleSocketsPerBackend: 1, responseTimeoutMs: 3_000 } });

async function measure(name: ProxyName): Promise<ProxyResult> {
  const result: ProxyResult = { requests: new Map(), responses: new Map(), notes: [], fuzz: [] };
  const scripts = new Map<string, Answer>();
  const backend = await startRawBackend({ answer: scriptedByClient(scripts), upgrade: scriptedByClient(scripts, accept101) });
  let target = await startConformanceTarget(name, backend.port, ROOMGATE_CONFIG);
  const clients = new ClientAddresses(500_000);
  const client = (): string => clients.next();
  // After each case: requests no client claims (one case at a time: they are this case's), and
  // the proxy's health; a proxy that died is noted and started again for the next case.
  const after = async (what: string, from: number, problems: string[]): Promise<string> => {
    await new Promise((r) => setTimeout(r, 50));
    const stray = unclaimed(backend, clients.all, from);
    if (stray.length > 0) problems.push(`SMUGGLED: the backend parsed ${stray.map((r) => `${r.method} ${r.target}`).join('; ')} with no client's X-Forwarded-For`);
    const dead = await target.alive();
    if (!dead) return '';
    // The line that names the error (a stack trace's first line), not the last lines of the trace.
    const why = target.logTail(40).find((l) => /Error\b|ERR_|uncaught/i.test(l));
    result.notes.push(`died at ${what}: ${dead}${why ? ` (${why.trim()})` : ''}`);
    await target.stop();
    target = await startConformanceTarget(name, backend.port, ROOMGATE_CONFIG);
    return ' **DIED**';
  };
  try {
    for (const c of REQUEST_CASES) {
      const from = backend.requests.length;
      const o = await runRequestCase(target.port, backend, c, client(), { timeoutMs: 3_000 });
      const v = judgeRequest(c, o);
      const died = await after(`request case ${c.name}`, from, v.problems);
      result.requests.set(c.name, { text: summarize(o, v.problems) + (v.variant ? ` (${v.variant.split(':')[0]} variant)` : '') + died, intended: v.problems.length === 0 && died === '' });
    }
    for (const c of RESPONSE_CASES) {
      const from = backend.requests.length;
      const address = client();
      scripts.set(address, c.answer);
      const o = await runResponseCase(target.port, c, address, client());
      const problems = responseProblems(c, o);
      if (c.request === 'upgrade') problems.push(...handshakeConnProblems(backend, address));
      const died = await after(`answer case ${c.name}`, from, problems);
      result.responses.set(c.name, { text: summarizeResponse(o, problems) + died, intended: problems.length === 0 && died === '' });
    }
    // The fuzzer swaps the backend's answers for its own.
    const report = await runFuzz(target, backend, { seed: 1, cases: Number(values['fuzz-cases']), maxFailures: 20, keepGoing: true });
    const count = (n: number): string => (n > 0 ? `**${n}**` : '0');
    const lenient = [...report.leniencies.values()].reduce((sum, l) => sum + l.count, 0);
    result.fuzz = [
      String(report.cases),
      String(report.backendRequests),
      count(report.counts.smuggled),
      count(report.counts.xff),
      count(report.counts.crossed),
      report.counts.died > 0 ? '**died**' : 'lived',
      String(lenient),
    ];
    for (const kind of ['smuggled', 'crossed', 'died'] as const) {
      const f = report.failures.find((x) => x.kind === kind);
      if (f) result.notes.push(`fuzz, ${kind}: ${f.detail}${f.caseIndex !== null ? ` (case ${f.caseIndex} of seed 1: \`npm run fuzz -- --target ${name} --seed 1 --case ${f.caseIndex}\`)` : ''}`);
    }
  } finally {
    await target.stop();
    await backend.close();
  }
  return result;
}

function intendedRequest(c: RequestCase): string {
  const e = c.expect;
  return `${e.statuses.join(' ') || 'closed'}${e.forwarded.length ? `, fwd ${e.forwarded.length}` : ''}`;
}
function intendedResponse(c: ResponseCase): string {
  return `${c.expect.statuses.join(' ')}${c.expect.cut ? ' cut' : ''}`;
}

/** One cell per class: the distinct outcomes with counts, and how many cases went as intended. */
function classCell(names: readonly string[], cells: Map<string, Cell> | undefined): string {
  if (!cells) return 'n/a';
  const counts = new Map<string, number>();
  let ok = 0;
  for (const name of names) {
    const cell = cells.get(name);
    if (!cell) continue;
    if (cell.intended) ok++;
    counts.set(cell.text, (counts.get(cell.text) ?? 0) + 1);
  }
  const outcomes = [...counts].map(([t, k]) => (k > 1 ? `${t} ×${k}` : t)).join('; ');
  return `${ok}/${names.length} · ${outcomes}`;
}

function classes<T extends { cls: string; name: string }>(cases: readonly T[]): Map<string, string[]> {
  const m = new Map<string, string[]>();
  for (const c of cases) m.set(c.cls, [...(m.get(c.cls) ?? []), c.name]);
  return m;
}

const esc = (s: string): string => s.replaceAll('|', '\\|');

async function main(): Promise<void> {
  const proxies = PROXIES.filter(installed);
  const results = new Map<ProxyName, ProxyResult>();
  for (const p of proxies) {
    say(`${p}...`);
    results.set(p, await measure(p));
  }
  const v = versions();
  const hp3 = (JSON.parse(readFileSync(join(ROOT, 'node_modules/http-proxy-3/package.json'), 'utf8')) as { version: string }).version;
  const head = `| class (cases) | ${proxies.join(' | ')} |\n|---|${proxies.map(() => '---').join('|')}|`;
  const out: string[] = [
    '# HTTP/1.1 conformance, side by side',
    '',
    `Generated by \`npm run conformance:compare\` (bench/conformance/compare.ts). roomgate ${v.roomgate} on Node ${v.node}; ${v.nginx}; ${v.haproxy}; http-proxy-3 ${hp3} (bench/conformance/reference-proxy.ts).`,
    'nginx and HAProxy are configured as in `npm run bench` (bench/suite/proxies.ts: nginx 1 worker, `proxy_http_version 1.1`, keep-alive upstream; HAProxy `mode http`, `option forwardfor`).',
    '',
    'Each cell: how many cases of the class went as roomgate intends (docs/proxying.md), then the distinct outcomes:',
    'the statuses the client read (`closed`: the connection closed with no answer), `fwd N`: requests the backend parsed for that client.',
    'Markers: **SMUGGLED** the backend parsed a request that carries no client\'s X-Forwarded-For (bytes the proxy passed on raw and the backend read as a request);',
    '**RESYNC** the proxy read past an invalid or ambiguous part and forwarded the request hidden behind it (as the client\'s own);',
    '**FWD-BEHIND** after refusing a handshake, the proxy forwarded the request the client sent behind it; **XFF** not exactly one X-Forwarded-For equal to the client\'s address;',
    '**EXTRA** another unexpected request reached the backend; **CROSSED** a client read an answer meant for another; **BODY-LEAK** a body that must not be relayed was;',
    '**CUT-LOOKS-COMPLETE** a cut body reached the client as a complete response; **DIED** the proxy process died (it was started again for the next case).',
    '(lenient variant) / (stricter variant): an outcome the corpus accepts as a known departure of Node\'s parser from the RFC without smuggling.',
    'Not every departure from roomgate\'s intent is a defect of the other proxies (nginx and HAProxy trust a client\'s X-Forwarded-For by appending to it, for example); the markers are what matters.',
    '',
    '## Requests',
    '',
    head,
  ];
  for (const [cls, names] of classes(REQUEST_CASES)) out.push(`| ${cls} (${names.length}) | ${proxies.map((p) => esc(classCell(names, results.get(p)?.requests))).join(' | ')} |`);
  out.push('', '## Backend answers', '', head);
  for (const [cls, names] of classes(RESPONSE_CASES)) out.push(`| ${cls} (${names.length}) | ${proxies.map((p) => esc(classCell(names, results.get(p)?.responses))).join(' | ')} |`);
  out.push('', `## Fuzz run (seed 1, ${values['fuzz-cases']} cases)`, '', `| | ${proxies.join(' | ')} |`, `|---|${proxies.map(() => '---').join('|')}|`);
  const rows = [
    'cases',
    'requests the backend parsed',
    '(a) smuggled: no client claims it, or not from its client\'s bytes',
    '(a) X-Forwarded-For not exactly the client\'s address',
    '(b) a client read another\'s answer',
    '(c) proxy',
    'forwarded although the referee refused',
  ];
  rows.forEach((r, i) => out.push(`| ${r} | ${proxies.map((p) => results.get(p)?.fuzz[i] ?? 'n/a').join(' | ')} |`));
  out.push('', '## Notes', '');
  for (const p of proxies) for (const note of results.get(p)?.notes ?? []) out.push(`- ${p}: ${esc(note)}`);
  out.push('', '## Every case', '', `| case | class | intended | ${proxies.join(' | ')} |`, `|---|---|---|${proxies.map(() => '---').join('|')}|`);
  const mark = (c: Cell | undefined): string => (c ? `${c.intended ? '✓ ' : ''}${esc(c.text)}` : 'n/a');
  for (const c of REQUEST_CASES) out.push(`| ${c.name} | ${c.cls} | ${intendedRequest(c)} | ${proxies.map((p) => mark(results.get(p)?.requests.get(c.name))).join(' | ')} |`);
  for (const c of RESPONSE_CASES) out.push(`| answer: ${c.name} | ${c.cls} | ${intendedResponse(c)} | ${proxies.map((p) => mark(results.get(p)?.responses.get(c.name))).join(' | ')} |`);
  writeFileSync(values.out, `${out.join('\n')}\n`);
  say(`wrote ${values.out}`);
}

try {
  await main();
} finally {
  await cleanupAll();
}
// Keep-alive agents of the fetches may hold the loop open.
process.exit(0);
