// What `roomgate move` prints on a terminal (src/cli/commands/move.ts): the room, where it went,
// the time and where the time went (the handoff's steps), and what became of its sockets.
import { describe, expect, it } from 'vitest';
import { sentence, type Handoff } from '../../src/cli/commands/move.js';

const base: Handoff = { id: 'h-1', room: 'chess-42', from: 'b2', to: 'b1', result: 'moved', release: 'released', bytes: 5120, ms: 41 };

describe('roomgate move on a terminal', () => {
  it("says each step's time, then the sockets", () => {
    const h = { ...base, steps: { hello: 1, hold: 3, export: 9, import: 11, move: 3, release: 8, resume: 6 }, held: { sockets: 2, resumed: 2, messages: 3, lostSockets: 0 } };
    expect(sentence(h)).toBe('chess-42 moved from b2 to b1 with its state (5120 bytes) in 41 ms (hello 1, hold 3, export 9, import 11, move 3, release 8, resume 6 ms); sockets: 2 resumed, 0 reconnected; 3 held messages delivered');
  });

  it('a record without steps (an older gateway): the line as before', () => {
    expect(sentence(base)).toBe('chess-42 moved from b2 to b1 with its state (5120 bytes) in 41 ms');
  });
});
