// Types of djust-client.mjs (plain ESM so a browser page can load it too; tsconfig has no allowJs).

export declare const DJUST_MAX_ATTEMPTS: 10;
export declare const DJUST_WS_PATH: '/ws/live/';
export declare const DJUST_TERMINAL_CODES: readonly number[];
export declare function djustReconnectDelay(n: number, random?: () => number): number;
export declare function djustWsPath(option: string | null | undefined, doc?: { querySelector(s: string): { getAttribute(n: string): string | null } | null } | null): string;

/**
 * The smallest WebSocket both the browser's and the `ws` package's satisfy (the handlers' event
 * types differ between the two; the client reads `data`, `code` and `reason` only).
 */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: ((e: never) => void) | null;
  onmessage: ((e: never) => void) | null;
  onerror: ((e: never) => void) | null;
  onclose: ((e: never) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  terminate?(): void;
}

export interface Timers {
  setTimeout(f: () => void, ms: number): unknown;
  clearTimeout(t: unknown): void;
  setInterval(f: () => void, ms: number): unknown;
  clearInterval(t: unknown): void;
}

export interface PageLocation {
  readonly protocol: string;
  readonly host: string;
  readonly pathname: string;
  readonly href: string;
}

export type Frame = Record<string, unknown>;

/** A frame vocabulary: how mounts, events and answers look on the wire. */
export interface Frames {
  mount(c: DjustClient): Frame;
  isMount(m: Frame): boolean;
  event(c: DjustClient, ev: SentEvent): Frame;
  acks(c: DjustClient, m: Frame): number[];
  appliedAs(m: Frame): number | undefined;
  version(m: Frame): number | undefined;
  httpBody(c: DjustClient, ev: SentEvent): unknown;
  /** The backend a frame says the socket was resumed on (the demo's `resumed`; djust has none). */
  resumedOn?(m: Frame): string | undefined;
}

export declare const djustFrames: Frames;
export declare const demoFrames: Frames;

export interface DjustClientOptions {
  readonly WebSocket: new (url: string) => WebSocketLike;
  readonly fetch: (url: string, init: { method: string; headers: Record<string, string>; body: string }) => Promise<{ ok: boolean; status: number; json(): Promise<unknown>; text(): Promise<string> }>;
  readonly location: PageLocation;
  readonly timers?: Timers;
  readonly random?: () => number;
  readonly now?: () => number;
  /** 'v1.1' (default): the fixed /ws/live/; '3186': wsPath / the meta tag, the fallback, 4401/4403 terminal. */
  readonly release?: 'v1.1' | '3186';
  readonly wsPath?: string | null;
  readonly document?: { querySelector(s: string): { getAttribute(n: string): string | null } | null } | null;
  readonly frames?: Frames;
  readonly id?: string;
  readonly view?: string;
  readonly params?: Record<string, unknown>;
  /** Whether the page was pre-rendered (then the mount's html is applied only with has_ids). */
  readonly prerendered?: boolean;
  readonly heartbeatMs?: number;
  readonly csrfToken?: string;
}

export interface SentEvent {
  readonly ref: number;
  readonly name: string;
  readonly params: Record<string, unknown>;
  readonly sentAt: number;
  via: 'ws' | 'http';
  ackedAt: number | null;
  ackedVia: 'ws' | 'http' | null;
  /** Answers telling of distinct applications (more than 1: applied twice). */
  answers: number;
  /** The app's numbers for its applications (the demo: move numbers). */
  applied: number[];
  httpStatus: number | null;
  /** Why the HTTP fallback failed (the event is gone), or null. */
  failed: string | null;
  /** The HTTP fallback's promise (settled once its answer is handled). */
  done?: Promise<void>;
}

export interface CloseRecord {
  readonly at: number;
  readonly code: number;
  readonly reason: string;
  readonly mounted: boolean;
  readonly path: string;
}

export interface MountRecord {
  readonly at: number;
  readonly version: number | null;
  readonly applied: boolean;
  readonly sessionId: string | null;
  /** The mount answer as it came (the demo's names its backend). */
  readonly frame: Frame;
}

export interface ReloadRecord {
  readonly at: number;
  readonly expected: number;
  readonly got: number;
  readonly via: 'ws' | 'http';
}

export declare class DjustClient {
  constructor(o: DjustClientOptions);
  readonly id: string;
  readonly events: SentEvent[];
  readonly closes: CloseRecord[];
  readonly mounts: MountRecord[];
  readonly reloads: ReloadRecord[];
  /** The socket resumed on another backend without a close (frames.resumedOn). */
  readonly resumes: { readonly at: number; readonly backend: string }[];
  readonly errors: { at: number; error: unknown; retry: boolean }[];
  readonly resyncs: number;
  readonly mountsRefused: number;
  readonly gaveUp: boolean;
  readonly attempts: number;
  readonly version: number | null;
  readonly sessionId: string | null;
  readonly pending: ReadonlyMap<number, SentEvent>;
  readonly params: Record<string, unknown>;
  readonly location: PageLocation;
  readonly view: string;
  readonly prerendered: boolean;
  /** Called after each mount, answer and close. */
  onChange: ((c: DjustClient) => void) | null;
  start(): this;
  readonly mounted: boolean;
  path(): string;
  sendEvent(name: string, params?: Record<string, unknown>): SentEvent;
  unacknowledged(): SentEvent[];
  doubled(): SentEvent[];
  stop(): void;
}
