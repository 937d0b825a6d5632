// room.pinInject's configuration (docs/per-tab-rooms.md#injection-by-roomgate): off by default, a
// boolean, and refused with a clear line when pages could not carry a pin anything reads or signs.
import { describe, expect, it } from 'vitest';
import { validate } from '../../src/config/load.js';

const problemsOf = (raw: Record<string, unknown>): readonly string[] => validate(raw).problems;

describe('room.pinInject', () => {
  it('is off by default', () => {
    const r = validate({});
    expect(r.problems).toEqual([]);
    expect(r.config?.room.pinInject).toBe(false);
  });
  it('takes a boolean only, named in the problem', () => {
    const p = problemsOf({ room: { pinInject: 'yes' } });
    expect(p).toHaveLength(1);
    expect(p[0]).toMatch(/^room\.pinInject: got "yes"; expected /);
  });
  it('needs pin in room.sources and a secret to sign with', () => {
    expect(problemsOf({ room: { pinInject: true } })).toEqual([]);
    expect(problemsOf({ room: { pinInject: true, sources: ['cookie'] } })).toEqual([
      'room.pinInject: got true while room.sources (["cookie"]) has no "pin"; expected false, or add "pin" to room.sources (pages would carry a pin nothing reads)',
    ]);
    expect(problemsOf({ room: { pinInject: true }, cookie: { signed: false } })).toEqual([
      'room.pinInject: got true while cookie.signed is false and cookie.secrets is empty; expected false, or set cookie.secrets (pins are signed with them)',
    ]);
    expect(problemsOf({ room: { pinInject: true }, cookie: { signed: false, secrets: ['s'.repeat(20)] } })).toEqual([]);
  });
});
