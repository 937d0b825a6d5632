// Every connection roomgate opens toward a backend looks its host name up in the kept answers of
// src/backends/host-addresses.ts (backendHosts.lookup), never in the system resolver directly: a
// DNS server that stops answering for a moment must delay no page, tunnel, health check or call.
// A file that opens connections (net/tls connect, http(s).request, an Agent) names that lookup,
// or is listed here with the reason it connects to no backend.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT, sourceFiles } from '../support/source-files.js';

const NO_BACKEND: Record<string, string> = {
  // The cluster primary's admin port forwards to a worker on 127.0.0.1: an address, no name.
  'src/cluster/admin.ts': 'connects to its own workers on 127.0.0.1',
};
const OPENS = /netConnect\(|tlsConnect\(|net\.connect\(|tls\.connect\(|[^.\w]connect\(\{|\.request\(\{|new https?\.Agent\(/;
// The request of these files goes through a BackendAgents agent, which carries the lookup.
const THROUGH_AGENTS = /agent:\s*(this\.)?(o\.)?agents\.for\(/;

/** Files that open connections without the kept-address lookup (or an agent that has it). */
export function unkeptConnectors(files: readonly { name: string; text: string }[]): string[] {
  return files
    .filter((f) => OPENS.test(f.text) && !f.text.includes('backendHosts.lookup') && !THROUGH_AGENTS.test(f.text))
    .map((f) => f.name)
    .filter((name) => !(name in NO_BACKEND));
}

describe('backend connections', () => {
  it('look backend host names up in the kept answers', () => {
    const files = sourceFiles('src');
    expect(unkeptConnectors(files)).toEqual([]);
    // The agents carry it for the paths that use them.
    expect(readFileSync(path.join(ROOT, 'src/forward/backend-agents.ts'), 'utf8')).toContain('lookup: backendHosts.lookup');
  });

  it('a connection opened with the system resolver is found', () => {
    const plain = { name: 'src/proxy/x.ts', text: "const s = netConnect({ host: b.host, port: b.port });\n" };
    const request = { name: 'src/runtime/y.ts', text: 'return http.request({ host, port, agent: false });\n' };
    const kept = { name: 'src/proxy/z.ts', text: 'connect({ host, port, lookup: backendHosts.lookup });\n' };
    expect(unkeptConnectors([plain, request, kept])).toEqual(['src/proxy/x.ts', 'src/runtime/y.ts']);
  });
});
