// The byte-level page path's client connection as the code answering its requests sees it
// (src/server/lean-connection.ts implements it; src/proxy/lean-pages.ts and the page cache's
// socket writer use it).
import type { Socket } from 'node:net';

/** The client connection a request came on (src/server/lean-connection.ts). */
export interface PageClient {
  readonly socket: Socket;
  readonly peer: string;
  readonly encrypted: boolean;
  /** Whether the answer to the request being answered may leave the connection open. */
  keepAlive(): boolean;
  /** The answer is out; open: the connection carries the next request, else it ends. */
  answered(open: boolean): void;
  /** Not for this path after all (nothing was written): node:http takes the connection, this request first. */
  handOver(reason: string): void;
  /** Told when the client's connection closes under the request. */
  current: { clientGone(): void } | null;
  /** The connection closed: nothing more is written to it. */
  readonly closed: boolean;
}
