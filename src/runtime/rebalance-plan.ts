// Rebalancing's decision (docs/handoff.md, "Rebalancing"): given the live rooms per backend, which
// room moves where next, or nothing. Pure: no I/O, no clock, so every rule is a row in a table test.
//
// - Rooms move only TO a target: a backend that joined or came back (recovered, undrained) and
//   takes new rooms, and serves the handoff hooks.
// - Rooms move only FROM a backend that takes new rooms (not draining: a drain moves its own) and
//   serves the hooks: a room whose backend lacks them is never moved by rebalancing.
// - Loads are live rooms per unit of weight. A room moves while the most loaded source holds more
//   than `factor` times the target's load, and only if the target then holds no more than the
//   source (so a room never moves back and forth over one room of difference).

export interface PlanBackend {
  readonly id: string;
  readonly weight: number;
  /** Live rooms on it now (every gateway's), in a stable order. */
  readonly rooms: readonly string[];
  /** Takes new rooms now: routable, not draining, weight above 0. */
  readonly acceptsNew: boolean;
  /** Serves the handoff hooks: hello answered yes, no, or could not be asked (yet). */
  readonly hooks: 'yes' | 'no' | 'unknown';
}

export interface PlanInput {
  readonly backends: readonly PlanBackend[];
  /** The backends that joined or came back, for which rooms may move. */
  readonly targets: readonly string[];
  /** handoff.rebalance.skewFactor (> 1). */
  readonly factor: number;
  /** Rooms not to pick (tried already in this rebalance). */
  readonly skip: ReadonlySet<string>;
}

export interface PlannedMove {
  readonly room: string;
  readonly from: string;
  readonly to: string;
}

/** Why nothing moves for a target. */
export type PlanIdle = 'balanced' | 'target-unavailable' | 'target-without-hooks' | 'target-hooks-unknown' | 'no-movable-room';

export interface Plan {
  /** The next room to move, or null. */
  readonly move: PlannedMove | null;
  /** For each target with nothing to move: why (the driver stops rebalancing toward it). */
  readonly idle: ReadonlyMap<string, PlanIdle>;
}

const load = (b: PlanBackend, extra = 0): number => (b.rooms.length + extra) / b.weight;

/** The next move toward the least loaded target that has one; each target with none says why. */
export function planRebalance(input: PlanInput): Plan {
  const idle = new Map<string, PlanIdle>();
  const byId = new Map(input.backends.map((b) => [b.id, b]));
  const targets = input.targets.flatMap((id) => {
    const t = byId.get(id);
    if (t === undefined || !t.acceptsNew || t.weight <= 0) {
      idle.set(id, 'target-unavailable');
      return [];
    }
    if (t.hooks !== 'yes') {
      idle.set(id, t.hooks === 'no' ? 'target-without-hooks' : 'target-hooks-unknown');
      return [];
    }
    return [t];
  });
  targets.sort((a, b) => load(a) - load(b) || (a.id < b.id ? -1 : 1));
  let move: PlannedMove | null = null;
  // Every target is looked at (one with nothing to move is dropped now); the first move wins.
  for (const t of targets) {
    const found = moveTo(t, input);
    if (typeof found === 'string') idle.set(t.id, found);
    else move ??= found;
  }
  return { move, idle };
}

/** A move toward `t`, or why there is none. */
function moveTo(t: PlanBackend, input: PlanInput): PlannedMove | PlanIdle {
  const sources = input.backends
    .filter((s) => s.id !== t.id && s.acceptsNew && s.hooks === 'yes' && s.weight > 0)
    .sort((a, b) => load(b) - load(a) || (a.id < b.id ? -1 : 1));
  const top = sources[0];
  if (top === undefined || !(load(top) > input.factor * load(t))) return 'balanced';
  let skew = false;
  for (const s of sources) {
    if (!(load(s) > input.factor * load(t))) break;
    // The target after the move holds no more than the source after it.
    if (load(t, 1) > load(s, -1)) continue;
    skew = true;
    const room = s.rooms.find((r) => !input.skip.has(r));
    if (room !== undefined) return { room, from: s.id, to: t.id };
  }
  return skew ? 'no-movable-room' : 'balanced';
}
