// Keep-alive connection pools toward backends for the requests made with node:http's client (the
// node:http page path, and the page cache's fetches): one agent per backend, created on first use
// (backends come and go at run time). An https:// backend gets an https.Agent under its own key,
// so that a reload from http:// to https:// finds the right kind.
import http from 'node:http';
import https from 'node:https';
import type { Backend } from '../runtime/pool.js';
import { backendHosts } from '../backends/host-addresses.js';

export class BackendAgents {
  private readonly agents = new Map<string, http.Agent>();

  constructor(
    private readonly maxIdleSocketsPerBackend: number,
    private readonly backendIdleTimeoutMs: number,
  ) {}

  /**
   * The backend's pooled agent; with `fresh`, one that keeps no connection (the retry of a request
   * whose pooled connection was closed under it: another pooled one may be as stale).
   */
  for(backend: Backend, fresh = false): http.Agent {
    const { id, tls } = backend.config;
    const name = `${tls ? 'https' : 'http'}${fresh ? ' fresh' : ''} ${id}`;
    let a = this.agents.get(name);
    if (!a) {
      // `timeout` is set on a socket when it goes back to the pool (each request sets its own while
      // it runs); the agent destroys a pooled socket whose timeout fires.
      const pool = fresh
        ? ({ keepAlive: false, lookup: backendHosts.lookup } as const)
        : ({ keepAlive: true, maxFreeSockets: this.maxIdleSocketsPerBackend, scheduling: 'lifo', timeout: this.backendIdleTimeoutMs, lookup: backendHosts.lookup } as const);
      a = tls ? new https.Agent(pool) : new http.Agent(pool);
      this.agents.set(name, a);
    }
    return a;
  }

  close(): void {
    for (const a of this.agents.values()) a.destroy();
    this.agents.clear();
  }
}
