// Cutting off a client that reads nothing: an orderly close (FIN) would queue behind the unread
// data in the kernel's send buffer, which the kernel then keeps (megabytes per socket on Linux)
// while it probes a window that never opens. A TCP reset drops that data and frees the buffer at
// once. TLS sockets (and h2 streams) have no reset of their own: they are destroyed.
import { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

export function resetConnection(s: Duplex): void {
  if (s.destroyed) return;
  if (s instanceof Socket && (s as Socket & { encrypted?: boolean }).encrypted !== true) {
    try {
      s.resetAndDestroy();
      return;
    } catch {
      // not a TCP handle after all (a socket wrapping another stream)
    }
  }
  s.destroy();
}
