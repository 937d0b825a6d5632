// Rebalancing's decision (src/runtime/rebalance-plan.ts), pure: live rooms per backend, the
// targets, the factor -> the next room to move and where, or why nothing moves. One row per rule.
import { describe, expect, it } from 'vitest';
import { planRebalance, type PlanBackend, type PlanInput } from '../../src/runtime/rebalance-plan.js';

/** A backend with `n` live rooms named `<id>-0`, `<id>-1`, ... */
function be(id: string, n: number, o: Partial<Omit<PlanBackend, 'id' | 'rooms'>> = {}): PlanBackend {
  return { id, weight: 1, acceptsNew: true, hooks: 'yes', ...o, rooms: Array.from({ length: n }, (_, i) => `${id}-${i}`) };
}

function input(backends: PlanBackend[], targets: string[], o: Partial<Pick<PlanInput, 'factor' | 'skip'>> = {}): PlanInput {
  return { backends, targets, factor: o.factor ?? 1.5, skip: o.skip ?? new Set() };
}

interface Row {
  readonly name: string;
  readonly in: PlanInput;
  /** The move expected ('room from->to'), or null. */
  readonly move: string | null;
  /** Why each target has nothing to move. */
  readonly idle?: Record<string, string>;
}

const ROWS: Row[] = [
  { name: 'an empty backend back: a room of the most loaded moves to it', in: input([be('b1', 10), be('b2', 6), be('b3', 0)], ['b3']), move: 'b1-0 b1->b3' },
  { name: 'the most loaded by weight: 10 rooms at weight 2 are less than 6 at weight 1', in: input([be('b1', 10, { weight: 2 }), be('b2', 6), be('b3', 0)], ['b3']), move: 'b2-0 b2->b3' },
  { name: 'the target counts by its weight too: 4 rooms at weight 4 against 3 at weight 1 is skewed', in: input([be('b1', 3), be('b3', 4, { weight: 4 })], ['b3']), move: 'b1-0 b1->b3' },
  { name: 'skew at the factor exactly: nothing moves', in: input([be('b1', 15), be('b3', 10)], ['b3']), move: null, idle: { b3: 'balanced' } },
  { name: 'skew just over the factor: a room moves', in: input([be('b1', 16), be('b3', 10)], ['b3']), move: 'b1-0 b1->b3' },
  { name: 'a larger factor tolerates more skew', in: input([be('b1', 16), be('b3', 10)], ['b3'], { factor: 2 }), move: null, idle: { b3: 'balanced' } },
  { name: 'one room against none: moving it would only swap the skew', in: input([be('b1', 1), be('b3', 0)], ['b3']), move: null, idle: { b3: 'balanced' } },
  { name: 'two rooms against none: one moves', in: input([be('b1', 2), be('b3', 0)], ['b3']), move: 'b1-0 b1->b3' },
  { name: 'the target would end above the source: nothing moves', in: input([be('b1', 3, { weight: 1 }), be('b3', 0, { weight: 0.25 })], ['b3'], { factor: 1.1 }), move: null, idle: { b3: 'balanced' } },
  {
    name: 'the most loaded lacks the hooks: its rooms stay, the next loaded gives one',
    in: input([be('b1', 30, { hooks: 'no' }), be('b2', 10), be('b3', 0)], ['b3']),
    move: 'b2-0 b2->b3',
  },
  { name: 'no backend with the hooks has rooms to spare', in: input([be('b1', 30, { hooks: 'no' }), be('b3', 0)], ['b3']), move: null, idle: { b3: 'balanced' } },
  { name: 'a draining (or down) backend gives no room: its drain moves them', in: input([be('b1', 30, { acceptsNew: false }), be('b3', 0)], ['b3']), move: null, idle: { b3: 'balanced' } },
  { name: 'a target without the hooks takes none', in: input([be('b1', 30), be('b3', 0, { hooks: 'no' })], ['b3']), move: null, idle: { b3: 'target-without-hooks' } },
  { name: 'a target whose hooks could not be asked (yet) takes none', in: input([be('b1', 30), be('b3', 0, { hooks: 'unknown' })], ['b3']), move: null, idle: { b3: 'target-hooks-unknown' } },
  {
    name: 'a source whose hooks could not be asked gives none',
    in: input([be('b1', 30, { hooks: 'unknown' }), be('b2', 10), be('b3', 0)], ['b3']),
    move: 'b2-0 b2->b3',
  },
  { name: 'a target that went down or drains takes none', in: input([be('b1', 30), be('b3', 0, { acceptsNew: false })], ['b3']), move: null, idle: { b3: 'target-unavailable' } },
  { name: 'a target no longer listed takes none', in: input([be('b1', 30)], ['b3']), move: null, idle: { b3: 'target-unavailable' } },
  { name: 'a target of weight 0 takes none', in: input([be('b1', 30), be('b3', 0, { weight: 0 })], ['b3']), move: null, idle: { b3: 'target-unavailable' } },
  { name: 'rooms tried already are skipped', in: input([be('b1', 10), be('b3', 0)], ['b3'], { skip: new Set(['b1-0', 'b1-1']) }), move: 'b1-2 b1->b3' },
  {
    name: 'every room of the most loaded tried: the next source gives one',
    in: input([be('b1', 3), be('b2', 3), be('b3', 0)], ['b3'], { skip: new Set(['b1-0', 'b1-1', 'b1-2']) }),
    move: 'b2-0 b2->b3',
  },
  {
    name: 'the most loaded tried out, the next exactly at the factor: nothing moves',
    in: input([be('b1', 20), be('b2', 15), be('b3', 10)], ['b3'], { skip: new Set(be('b1', 20).rooms) }),
    move: null,
    idle: { b3: 'no-movable-room' },
  },
  { name: 'every room tried: nothing left to move', in: input([be('b1', 2), be('b3', 0)], ['b3'], { skip: new Set(['b1-0', 'b1-1']) }), move: null, idle: { b3: 'no-movable-room' } },
  { name: 'two targets: the less loaded one first', in: input([be('b1', 20), be('b3', 4), be('b4', 2)], ['b3', 'b4']), move: 'b1-0 b1->b4' },
  { name: 'two targets: one balanced, the other still takes rooms', in: input([be('b1', 20), be('b3', 18), be('b4', 2)], ['b3', 'b4']), move: 'b1-0 b1->b4', idle: { b3: 'balanced' } },
  { name: 'a target is never its own source', in: input([be('b3', 10)], ['b3']), move: null, idle: { b3: 'balanced' } },
  { name: 'nothing live anywhere', in: input([be('b1', 0), be('b3', 0)], ['b3']), move: null, idle: { b3: 'balanced' } },
];

describe('planRebalance', () => {
  it.each(ROWS.map((r) => [r.name, r] as const))('%s', (_, row) => {
    const plan = planRebalance(row.in);
    expect(plan.move === null ? null : `${plan.move.room} ${plan.move.from}->${plan.move.to}`).toBe(row.move);
    expect(Object.fromEntries(plan.idle)).toEqual(row.idle ?? {});
  });

  it('moving the planned rooms one by one ends within the factor, with no room moved twice', () => {
    const backends = new Map([
      ['b1', be('b1', 30).rooms.slice()],
      ['b2', be('b2', 22).rooms.slice()],
      ['b3', [] as string[]],
    ]);
    const view = (): PlanBackend[] => [...backends].map(([id, rooms]) => ({ id, weight: 1, acceptsNew: true, hooks: 'yes' as const, rooms: [...rooms] }));
    const moved = new Set<string>();
    for (let i = 0; i < 100; i++) {
      const { move, idle } = planRebalance(input(view(), ['b3'], { skip: moved }));
      if (move === null) {
        expect(idle.get('b3')).toBe('balanced');
        break;
      }
      moved.add(move.room);
      backends.set(move.from, (backends.get(move.from) ?? []).filter((r) => r !== move.room));
      backends.get(move.to)?.push(move.room);
    }
    const sizes = [...backends.values()].map((r) => r.length);
    // 52 rooms: 30/22/0 -> within 1.5 of the target, every room once at most.
    expect(sizes.reduce((a, b) => a + b)).toBe(52);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(1.5 * (backends.get('b3')?.length ?? 0));
    expect(moved.size).toBe(backends.get('b3')?.length);
    expect(sizes).toEqual([19, 19, 14]);
  });
});
