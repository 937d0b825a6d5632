// roomgate_kit, the Python package of python/ (docs/python-kit.md): its pytest suite (python/tests)
// under Debian's /usr/bin/python3 and python3-pytest, failing on a non-zero exit with pytest's own
// output; and the proof vectors its tests verify, checked to be what roomgate's signer
// (src/http/call-proof.ts) computes, so the two languages cannot drift apart.
// ROOMGATE_WRITE_PROOF_VECTORS=1 writes the vectors file first (after a change of the proof).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';
import { proofVectors } from './proof-vectors.js';
import { ROOM_PIN_SCRIPT_PATH, ROOM_PIN_SCRIPT_SRI } from '../../src/pages/room-pin-script.js';
import { createPinSigner } from '../../src/room/signing.js';
import { wrap } from '../../src/backend-kit/socket-states.js';

const VECTORS = join(ROOT, 'python/tests/fixtures/call-proofs.json');
const PIN_VECTORS = join(ROOT, 'python/tests/fixtures/room-pins.json');
const ENVELOPES = join(ROOT, 'python/tests/fixtures/socket-envelopes.json');

/** Exports with sockets' states as the Node kit wraps them: roomgate_kit.resume must wrap the same bytes and read them back. */
function envelopeVectors(): unknown {
  const cases = [
    { room: '{"v":1,"clicks":3}', sockets: { AAAAAAAAAAAAAAAAAAAAAA: { session: 's-é', version: 4 } } },
    { room: 'é 日本', sockets: {} },
    { room: '', sockets: { 'A-_AAAAAAAAAAAAAAAAAAA': null, BBBBBBBBBBBBBBBBBBBBBB: [1, 'two'] } },
  ];
  return cases.map((c) => ({ ...c, blob: wrap(Buffer.from(c.room, 'utf8'), new Map(Object.entries(c.sockets))).toString('utf8') }));
}

/** Room pins as roomgate signs them (roomgate_kit.pins.sign_pin must make the same), and the script's name and SRI. */
function pinVectors(): unknown {
  const cases = [
    { room: '42', secret: 'pin-secret-0123456789abcdef', nowS: 1_800_000_000 },
    { room: 'game:a.b_c-d', secret: 'django-insecure-key-with-$pecial#chars', nowS: 0 },
    { room: 'x'.repeat(128), secret: 'ünïcode-secret-0123456789', nowS: 2_000_000_123 },
  ];
  const pins = cases.map((c) => ({ ...c, pin: createPinSigner([c.secret], 0).sign(c.room, c.nowS * 1000) }));
  return { scriptPath: ROOM_PIN_SCRIPT_PATH, scriptSri: ROOM_PIN_SCRIPT_SRI, pins };
}

function pytest(): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    // -p no:cacheprovider: no .pytest_cache left in the checkout; PYTHONDONTWRITEBYTECODE: no __pycache__;
    // --basetemp: the tests' tmp_path under a dir of this run, removed after it (pytest's default,
    // /tmp/pytest-of-<user>, is kept between runs).
    const basetemp = mkdtempSync(join(tmpdir(), 'roomgate-pytest-'));
    const child = spawn('/usr/bin/python3', ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', `--basetemp=${basetemp}`, 'python/tests'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (out += c.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(timer);
      rmSync(basetemp, { recursive: true, force: true });
      resolve({ code, out });
    });
  });
}

describe('roomgate_kit (python/)', () => {
  it("the proof vectors python/tests uses are what roomgate's signer makes", () => {
    const made = `${JSON.stringify(proofVectors(), null, 2)}\n`;
    if (process.env.ROOMGATE_WRITE_PROOF_VECTORS === '1') writeFileSync(VECTORS, made);
    expect(readFileSync(VECTORS, 'utf8')).toBe(made);
  });

  it("the room pins and the script SRI python/tests uses are roomgate's", () => {
    const made = `${JSON.stringify(pinVectors(), null, 2)}\n`;
    if (process.env.ROOMGATE_WRITE_PROOF_VECTORS === '1') writeFileSync(PIN_VECTORS, made);
    expect(readFileSync(PIN_VECTORS, 'utf8')).toBe(made);
  });

  it("the sockets' envelopes python/tests uses are the Node kit's", () => {
    const made = `${JSON.stringify(envelopeVectors(), null, 2)}\n`;
    if (process.env.ROOMGATE_WRITE_PROOF_VECTORS === '1') writeFileSync(ENVELOPES, made);
    expect(readFileSync(ENVELOPES, 'utf8')).toBe(made);
  });

  it('its pytest suite passes', async () => {
    const { code, out } = await pytest();
    expect(code, out).toBe(0);
    expect(out).toMatch(/\d+ passed/);
  }, 130_000);
});
