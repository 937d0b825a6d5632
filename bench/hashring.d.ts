// Minimal types for hashring@3.2.0 (CommonJS, ships none); only what bench/ring.ts uses.
declare module 'hashring' {
  /** 'host:port' strings, or a map of them to a weight or to { weight, vnodes }. */
  type Servers = string | string[] | Record<string, number | { weight?: number; vnodes?: number }>;

  interface HashRingOptions {
    'vnode count'?: number;
    'max cache size'?: number;
    replicas?: number;
    compatibility?: 'ketama' | 'hash_ring';
  }

  class HashRing {
    constructor(servers?: Servers, algorithm?: string, options?: HashRingOptions);
    /** Owner of key; undefined on an empty ring. Never pass '__proto__': it pollutes Object.prototype. */
    get(key: string): string | undefined;
    /** Up to `size` servers in ring order from the key's point. */
    range(key: string, size?: number, unique?: boolean): string[];
  }

  export = HashRing;
}
