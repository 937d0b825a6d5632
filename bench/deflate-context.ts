/**
 * What a resume's compression rule costs (docs/handoff.md, "Deliver", item 1; issue 37 guarantee
 * 5): permessage-deflate with context takeover (each direction's deflate stream keeps up to 32 KiB
 * of history across messages) against server_no_context_takeover (each message compressed alone,
 * what roomgate asks for on tunnels to backends that resume), on djust-like patch frames: small
 * JSON diffs, similar to each other (a counter, a list row, a chat line, a version number).
 *
 *   npm run build && node dist/bench/deflate-context.js [--messages 20000] [--rounds 3]
 *
 * Each message is compressed as a backend's WebSocket library does (zlib raw deflate, the default
 * level, window 15, memLevel 8, a sync flush per message and its 4-byte tail removed; no context:
 * the stream reset after each message) and inflated as a browser does; every round trip is
 * checked. Prints a markdown table per mode and round: bytes on the wire per message (payload,
 * as sent) against the JSON's size, and CPU per message (deflate + inflate, process.cpuUsage:
 * user + system, zlib's thread pool and the event-loop turns of each flush included: what a Node
 * endpoint pays; a C endpoint pays less of the overhead, the same zlib work). Runs alternate, so both modes share the machine's
 * state. Not part of npm test: speed is measured here only.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import zlib from 'node:zlib';

const { values } = parseArgs({ options: { messages: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '3' } } });
const MESSAGES = Number(values.messages);
const ROUNDS = Number(values.rounds);
const TAIL = Buffer.from([0x00, 0x00, 0xff, 0xff]);

/** A small deterministic generator, so every run sends the same frames. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1_664_525 + 1_013_904_223) >>> 0;
    return s / 2 ** 32;
  };
}

const WORDS = ['move', 'room', 'click', 'player', 'ready', 'score', 'board', 'turn', 'again', 'nice', 'wait', 'go'];

/** djust-shaped patch frames: `{"type":"patch","patches":[...],"version":n}` with VDOM ops on a page. */
function patches(n: number): Buffer[] {
  const r = random(42);
  const out: Buffer[] = [];
  for (let v = 1; v <= n; v++) {
    const kind = r();
    let ops: unknown[];
    if (kind < 0.5) ops = [{ type: 'SetText', path: [0, 2, 1, 0], d: 'dj-7', text: `Count: ${Math.floor(r() * 1000)}` }];
    else if (kind < 0.8) {
      const row = Math.floor(r() * 20);
      ops = [
        { type: 'SetAttr', path: [0, 3, row], d: `row-${row}`, key: 'class', value: r() < 0.5 ? 'item done' : 'item' },
        { type: 'SetText', path: [0, 3, row, 1, 0], d: `row-${row}-t`, text: `${WORDS[Math.floor(r() * WORDS.length)]} #${row}` },
      ];
    } else {
      const line = Array.from({ length: 3 + Math.floor(r() * 8) }, () => WORDS[Math.floor(r() * WORDS.length)]).join(' ');
      ops = [{ type: 'InsertChild', path: [0, 4], d: 'chat', index: v, html: `<li class="msg" dj-id="m${v}"><b>player${Math.floor(r() * 4)}</b> ${line}</li>` }];
    }
    out.push(Buffer.from(JSON.stringify({ type: 'patch', patches: ops, version: v })));
  }
  return out;
}

/**
 * One direction of a permessage-deflate pair, as ws runs it: a write and a sync flush per message
 * on one zlib stream (zlib's thread pool), reset after each message when no context is kept.
 * (Node has no public synchronous streaming zlib; its internal sync path closes the stream.)
 */
function endpoint(stream: zlib.DeflateRaw | zlib.InflateRaw, reset: boolean): (b: Buffer) => Promise<Buffer> {
  return (b) =>
    new Promise((resolve, reject) => {
      const chunks: Buffer[] = [];
      const on = (c: Buffer): void => void chunks.push(c);
      stream.on('data', on);
      stream.once('error', reject);
      stream.write(b);
      stream.flush(zlib.constants.Z_SYNC_FLUSH, () => {
        stream.off('data', on);
        stream.off('error', reject);
        if (reset) stream.reset();
        resolve(Buffer.concat(chunks));
      });
    });
}

async function run(frames: readonly Buffer[], noContext: boolean): Promise<{ wire: number; cpuUs: number }> {
  const deflate = endpoint(zlib.createDeflateRaw({ windowBits: 15, memLevel: 8 }), noContext);
  const inflate = endpoint(zlib.createInflateRaw({ windowBits: 15 }), noContext);
  let wire = 0;
  const t0 = process.cpuUsage();
  for (const f of frames) {
    const out = await deflate(f);
    const payload = out.subarray(0, out.length - 4);
    wire += payload.length;
    const back = await inflate(Buffer.concat([payload, TAIL]));
    if (!back.equals(f)) throw new Error('a round trip changed a message');
  }
  const cpu = process.cpuUsage(t0);
  return { wire, cpuUs: cpu.user + cpu.system };
}

async function main(): Promise<void> {
  const frames = patches(MESSAGES);
  const raw = frames.reduce((n, f) => n + f.length, 0);
  const model = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? 'unknown CPU';
  console.log(`${MESSAGES} djust-like patch frames, ${(raw / MESSAGES).toFixed(1)} bytes of JSON each on average; ${model}; Node ${process.version}\n`);
  console.log('| mode | round | bytes per message on the wire | of the JSON | CPU per message, µs (deflate + inflate) |');
  console.log('|---|---|---|---|---|');
  for (let round = 1; round <= ROUNDS; round++) {
    for (const noContext of round % 2 === 1 ? [false, true] : [true, false]) {
      const r = await run(frames, noContext);
      const mode = noContext ? 'no_context_takeover' : 'context takeover';
      console.log(`| ${mode} | ${round} | ${(r.wire / MESSAGES).toFixed(1)} | ${((100 * r.wire) / raw).toFixed(1)} % | ${(r.cpuUs / MESSAGES).toFixed(1)} |`);
    }
  }
}

await main();
