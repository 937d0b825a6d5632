import { describe, expect, it } from 'vitest';
import { decide, type BackendView } from '../../src/placement/decide.js';
import { buildRing } from '../../src/placement/ring.js';

const ring = buildRing([{ id: 'a', weight: 1 }, { id: 'b', weight: 1 }, { id: 'c', weight: 1 }]);
const up = (load = 0): BackendView[] => ['a', 'b', 'c'].map((id) => ({ id, routable: true, load }));
const view = (backends: BackendView[], over = {}) => ({ ring, backends, noRoom: 'least-loaded' as const, tieBreak: 0, retryAfterS: 3, ...over });

describe('decide', () => {
  it('routes a room to its ring owner', () => {
    for (let i = 0; i < 200; i++) {
      const room = `room-${i}`;
      expect(decide(room, view(up()))).toEqual({ route: ring.first(room), reason: 'ring' });
    }
  });

  it('skips an unroutable owner to the next on the ring, the same on every call', () => {
    for (let i = 0; i < 200; i++) {
      const room = `room-${i}`;
      const [owner, next] = ring.walk(room);
      const backends = up().map((b) => (b.id === owner ? { ...b, routable: false } : b));
      expect(decide(room, view(backends))).toEqual({ route: next, reason: 'ring-skip' });
    }
  });

  it('answers 503 with Retry-After when nothing is routable', () => {
    const none = up().map((b) => ({ ...b, routable: false }));
    expect(decide('x', view(none))).toEqual({ reject: 503, reason: 'no-backend', retryAfterS: 3 });
    expect(decide(null, view(none))).toEqual({ reject: 503, reason: 'no-backend', retryAfterS: 3 });
  });

  it('sends keyless requests to the least-loaded routable backend, rotating ties', () => {
    const loads: BackendView[] = [{ id: 'a', routable: true, load: 5 }, { id: 'b', routable: true, load: 2 }, { id: 'c', routable: false, load: 0 }];
    expect(decide(null, view(loads))).toEqual({ route: 'b', reason: 'no-room' });
    const ties = [0, 1, 2].map((t) => decide(null, view(up(), { tieBreak: t })));
    expect(ties.map((d) => ('route' in d ? d.route : null)).sort()).toEqual(['a', 'b', 'c']);
  });

  it('rejects keyless requests when the policy says so', () => {
    expect(decide(null, view(up(), { noRoom: 'reject' }))).toEqual({ reject: 400, reason: 'no-room' });
  });
});
