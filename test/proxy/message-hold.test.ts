// A version-2 handoff's hold of one tunnel's client messages (src/proxy/message-hold.ts,
// tunnel-messages.ts) and of a room's sockets (src/runtime/room-hold.ts), in process: a hold
// begins at a message boundary (at once between messages, after the message being sent
// otherwise), keeps every later byte in order, gives them back on a rollback, and reads them as
// messages (unmasked, fragments joined, control frames left out, compressed ones inflated alone);
// the limits close the socket that passes them; a socket that never reaches a boundary is cut.
// End to end through a gateway: test/integration/handoff-hold.test.ts.
import { deflateRawSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { MessageHold, readMessages } from '../../src/proxy/message-hold.js';
import { TunnelMessages, withoutClientContext } from '../../src/proxy/tunnel-messages.js';
import { RoomHold, type TunnelHold } from '../../src/runtime/room-hold.js';

/** A client frame (masked, as clients send them). */
function frame(opcode: number, payload: Buffer | string, o: { fin?: boolean; rsv1?: boolean } = {}): Buffer {
  const data = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const len = data.length;
  const ext = len < 126 ? 0 : len < 65536 ? 2 : 8;
  const head = Buffer.alloc(2 + ext + 4);
  head[0] = (o.fin === false ? 0 : 0x80) | (o.rsv1 ? 0x40 : 0) | opcode;
  head[1] = 0x80 | (ext === 0 ? len : ext === 2 ? 126 : 127);
  if (ext === 2) head.writeUInt16BE(len, 2);
  if (ext === 8) head.writeBigUInt64BE(BigInt(len), 2);
  const key = Buffer.from([0x11, 0x22, 0x33, 0x44]);
  key.copy(head, 2 + ext);
  const masked = Buffer.from(data.map((b, i) => b ^ (key[i & 3] as number)));
  return Buffer.concat([head, masked]);
}

const text = (s: string, fin = true): Buffer => frame(1, s, { fin });

describe('MessageHold', () => {
  it('passes every chunk while no hold is asked for', () => {
    const h = new MessageHold();
    const a = text('one');
    expect(h.pass(a)).toBe(a);
    expect(h.heldBytes).toBe(0);
  });

  it('between messages, a hold begins at once and keeps every later byte in order; a flush gives them back', () => {
    const h = new MessageHold();
    h.pass(text('before'));
    let started = 0;
    expect(h.hold(() => started++)).toBe(true);
    const later = Buffer.concat([text('a'), text('b')]);
    expect(h.pass(later.subarray(0, 5))).toBeNull();
    expect(h.pass(later.subarray(5))).toBeNull();
    expect(h.messages().messages).toEqual([{ text: 'a' }, { text: 'b' }]);
    expect(h.flush()).toEqual(later);
    // Passing again after the flush, and the follower is where the stream is.
    const next = text('c');
    expect(h.pass(next)).toBe(next);
    expect(h.hold(() => started++)).toBe(true);
    expect(started).toBe(0);
  });

  it('control frames pass while held (a ping gets its pong, a close completes its handshake), even cut across chunks; data frames are kept', () => {
    const passed: Buffer[] = [];
    const h = new MessageHold((f) => passed.push(Buffer.from(f)));
    expect(h.hold(() => undefined)).toBe(true);
    const ping = frame(9, 'are you there');
    const close = frame(8, Buffer.from([0x03, 0xe8]));
    const all = Buffer.concat([text('kept'), ping, text('also kept'), close]);
    // Cut inside the ping's header and inside the close's payload.
    for (const [a, b] of [[0, 9], [9, 30], [30, all.length - 1], [all.length - 1, all.length]] as const) expect(h.pass(all.subarray(a, b))).toBeNull();
    expect(passed).toEqual([ping, close]);
    expect(h.messages().messages).toEqual([{ text: 'kept' }, { text: 'also kept' }]);
    expect(h.heldBytes).toBe(text('kept').length + text('also kept').length);
  });

  it('in the middle of a message, the hold begins when it ends: the rest of it passes, later messages are kept', () => {
    const h = new MessageHold();
    const first = Buffer.concat([text('frag-1 ', false), frame(9, 'ping'), frame(0, 'frag-2')]);
    const second = text('second');
    expect(h.pass(first.subarray(0, 4))).not.toBeNull();
    let started = 0;
    let kept = 0;
    expect(h.hold(() => started++, () => kept++)).toBe(false);
    // The rest of the first message and the whole second one arrive in one chunk.
    const rest = Buffer.concat([first.subarray(4), second]);
    const passed = h.pass(rest);
    expect(passed).toEqual(first.subarray(4));
    expect(started).toBe(1);
    expect(kept).toBe(1);
    expect(h.messages().messages).toEqual([{ text: 'second' }]);
  });

  it('reads held frames as messages: fragments joined, control frames left out, binary as base64, nothing after a close', () => {
    const bytes = Buffer.concat([
      text('he', false),
      frame(10, 'pong'),
      frame(0, 'llo'),
      frame(2, Buffer.from([1, 2, 3])),
      frame(1, 'x'.repeat(70_000)),
      frame(8, Buffer.from([0x03, 0xe8])),
      text('after the close'),
    ]);
    const { messages, unreadable } = readMessages(bytes, null);
    expect(messages).toEqual([{ text: 'hello' }, { binary: Buffer.from([1, 2, 3]).toString('base64') }, { text: 'x'.repeat(70_000) }]);
    expect(unreadable).toBe(0);
    // A message cut by the socket's end is not one.
    expect(readMessages(bytes.subarray(0, 20), null).messages).toEqual([]);
  });

  it('compressed messages: inflated alone when the tunnel negotiated deflate without the client context; counted unreadable otherwise, or when not deflate', () => {
    const deflated = deflateRawSync(Buffer.from('{"type":"event"}'));
    const payload = deflated.subarray(0, deflated.length - 4).length > 0 && deflated.subarray(-4).equals(Buffer.from([0, 0, 0xff, 0xff])) ? deflated.subarray(0, -4) : deflated;
    const bytes = Buffer.concat([frame(1, payload, { rsv1: true }), frame(1, Buffer.from('not deflate at all'), { rsv1: true })]);
    const t = new TunnelMessages({ writeUpstream: () => undefined, endForHold: () => undefined });
    t.deflate = true;
    t.hold(() => undefined, () => undefined);
    t.follower.pass(bytes);
    expect(t.messages()).toEqual({ messages: [{ text: '{"type":"event"}' }], unreadable: 1 });
    t.deflate = false;
    expect(t.messages()).toEqual({ messages: [], unreadable: 2 });
    expect(t.socketId).toMatch(/^[A-Za-z0-9_-]{22}$/);
  });

  it("asks the client to compress each message alone: client_no_context_takeover added to the 101's permessage-deflate", () => {
    expect(withoutClientContext('permessage-deflate; client_max_window_bits=15')).toBe('permessage-deflate; client_max_window_bits=15; client_no_context_takeover');
    expect(withoutClientContext('permessage-deflate; client_no_context_takeover')).toBe('permessage-deflate; client_no_context_takeover');
    expect(withoutClientContext('x-other')).toBeNull();
  });
});

/** A TunnelHold over a MessageHold, recording what the room hold did to it. */
function fakeSocket(id: string): TunnelHold & { follower: MessageHold; ended: number; written: Buffer[]; close(): void } {
  const follower = new MessageHold();
  const closers: (() => void)[] = [];
  let closed = false;
  const s = {
    socketId: id,
    follower,
    ended: 0,
    written: [] as Buffer[],
    hold: (onHeld: () => void, onKept: () => void) => follower.hold(onHeld, onKept),
    flush: () => {
      const b = follower.flush();
      if (b) s.written.push(b);
    },
    get heldBytes() {
      return follower.heldBytes;
    },
    messages: () => follower.messages(),
    onClosed: (run: () => void) => (closed ? run() : closers.push(run)),
    endSocket: () => {
      s.ended++;
    },
    close: () => {
      closed = true;
      closers.splice(0).forEach((r) => r());
    },
    // The room hold never resumes (handoff-resume.ts does): a socket that cannot be.
    resumable: false,
    openResume: () => Promise.resolve({ ok: false as const, why: 'not resumable' }),
    completeResume: () => Promise.resolve({ ok: false as const, why: 'not resumable' }),
    expectResume: () => false,
    oldStreamEnded: () => Promise.resolve(),
    cancelResume: () => undefined,
  };
  return s;
}

describe('RoomHold', () => {
  it('resolves once every socket is held; a socket still mid-message at the deadline is cut', async () => {
    const a = fakeSocket('a');
    const b = fakeSocket('b');
    b.follower.pass(text('unfinished', false));
    const hold = new RoomHold('r', [a, b], { perSocketBytes: 1_000, perRoomBytes: 10_000 });
    const cut: string[] = [];
    await hold.begin(50, (t) => cut.push(t.socketId));
    expect(cut).toEqual(['b']);
    expect(hold.holdTimeouts).toBe(1);
  });

  it('a socket past its limit, or the one that passes the room limit, is ended; what it kept stays', async () => {
    const a = fakeSocket('a');
    const b = fakeSocket('b');
    // Frames of 60 payload bytes are 66 held bytes (header and mask key included).
    const hold = new RoomHold('r', [a, b], { perSocketBytes: 100, perRoomBytes: 250 });
    await hold.begin(1_000, () => undefined);
    a.follower.pass(text('x'.repeat(120)));
    expect(a.ended).toBe(1);
    a.follower.pass(text('more after its end, still kept'));
    expect(a.ended).toBe(1);
    b.follower.pass(text('y'.repeat(60)));
    expect(b.ended).toBe(0);
    b.follower.pass(text('z'.repeat(60)));
    expect(b.ended).toBe(1);
    expect(hold.overLimit).toBe(2);
    expect(a.messages().messages).toEqual([{ text: 'x'.repeat(120) }, { text: 'more after its end, still kept' }]);
  });

  it('a rollback flushes each socket; closed() waits for every socket, cutting the ones still open at its deadline', async () => {
    const a = fakeSocket('a');
    const b = fakeSocket('b');
    const hold = new RoomHold('r', [a, b], { perSocketBytes: 1_000, perRoomBytes: 10_000 });
    await hold.begin(1_000, () => undefined);
    a.follower.pass(text('kept'));
    hold.flush();
    expect(a.written).toEqual([text('kept')]);
    a.close();
    const cut: string[] = [];
    await hold.closed(30, (t) => cut.push(t.socketId));
    expect(cut).toEqual(['b']);
  });
});
