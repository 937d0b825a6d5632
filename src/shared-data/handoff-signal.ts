// The messages a version-2 handoff sends between gateways over the shared-data store's channel
// (docs/handoff.md, "Hold"): the gateway that runs a handoff asks every other one to hold its
// sockets of the room (`hold`), each answers once they are held (`held`), one that did not answer
// in time is told so (`late`), and the end says what to do with what was held (`end`). Another
// gateway's bytes are still parsed strictly: a malformed message is dropped, never half used.

export type HandoffSignal =
  /** Hold your sockets of `room` on `from` at a message boundary (the runner is `gateway`). */
  | { readonly kind: 'hold'; readonly id: string; readonly room: string; readonly from: string; readonly to: string; readonly gateway: string }
  /** Gateway `gateway` holds its `sockets` sockets of the handoff's room. */
  | { readonly kind: 'held'; readonly id: string; readonly gateway: string; readonly sockets: number }
  /** Not every gateway answered in time: every one but the runner (`gateway`) not in `answered` cuts its sockets of the room. */
  | { readonly kind: 'late'; readonly id: string; readonly room: string; readonly gateway: string; readonly answered: readonly string[] }
  /**
   * The handoff is over: `moved` (deliver what you held to `to` at `epoch`), `flush` (rolled back
   * and resumed: write it on to the old owner), `lost` (the room's owner cannot be told: cut).
   */
  | { readonly kind: 'end'; readonly id: string; readonly room: string; readonly outcome: 'moved' | 'flush' | 'lost'; readonly to: string; readonly epoch: number };

const str = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 1024;
const count = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** A signal from the channel, or undefined when `v` is not exactly one. */
export function parseHandoffSignal(v: unknown): HandoffSignal | undefined {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return undefined;
  const s = v as Record<string, unknown>;
  if (!str(s.id)) return undefined;
  switch (s.kind) {
    case 'hold':
      return str(s.room) && str(s.from) && str(s.to) && str(s.gateway) ? { kind: 'hold', id: s.id, room: s.room, from: s.from, to: s.to, gateway: s.gateway } : undefined;
    case 'held':
      return str(s.gateway) && count(s.sockets) ? { kind: 'held', id: s.id, gateway: s.gateway, sockets: s.sockets } : undefined;
    case 'late':
      return str(s.room) && str(s.gateway) && Array.isArray(s.answered) && s.answered.length <= 10_000 && s.answered.every(str)
        ? { kind: 'late', id: s.id, room: s.room, gateway: s.gateway, answered: [...s.answered] }
        : undefined;
    case 'end':
      return str(s.room) && (s.outcome === 'moved' || s.outcome === 'flush' || s.outcome === 'lost') && str(s.to) && count(s.epoch)
        ? { kind: 'end', id: s.id, room: s.room, outcome: s.outcome, to: s.to, epoch: s.epoch }
        : undefined;
    default:
      return undefined;
  }
}
