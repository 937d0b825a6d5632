// The roomgate command as a user runs it: exit codes, messages, where and sign.
import { afterAll, describe, expect, it } from 'vitest';
import { buildRing } from '../../src/placement/ring.js';
import { createRoomSigner } from '../../src/room/signing.js';
import { TEST_SECRET, runCli, stopAll, writeConfig } from '../support/processes.js';

afterAll(stopAll);

describe('roomgate CLI', () => {
  it('prints help and the version', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Usage: roomgate <command>/);
    for (const cmd of ['start', 'check-config', 'where ROOM', 'sign ROOM']) expect(help.stdout).toContain(cmd);
    expect((await runCli(['--version'])).stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('refuses unknown commands and flags with usage and exit 2', async () => {
    const r = await runCli(['frobnicate']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown command "frobnicate"/);
    const f = await runCli(['start', '--prot', '1']);
    expect(f.code).toBe(2);
    expect(f.stderr).toMatch(/--prot/);
    expect((await runCli([])).code).toBe(2);
  });

  it('check-config validates without starting and names every problem', async () => {
    const ok = await runCli(['check-config', '--backend', 'b1=http://127.0.0.1:9001'], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/configuration is valid/);
    expect(ok.stdout).toContain('"id": "b1"');
    expect(ok.stdout).not.toContain(TEST_SECRET);
    expect(ok.stdout).toContain('<redacted>');

    const file = writeConfig({ listen: { port: 'eighty' }, cookie: { format: 'django' }, backends: [{ url: 'ftp://x' }] });
    const bad = await runCli(['check-config', '--config', file]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('listen.port: got "eighty"; expected a number');
    expect(bad.stderr).toContain('cookie.format: got "django"; expected one of "roomgate" | "django-signer" | "django-cookie"');
    expect(bad.stderr).toMatch(/backends\.0\.url: got "ftp:\/\/x"; expected an http:\/\/ URL/);
    // start refuses the same configuration before listening.
    const start = await runCli(['start', '--config', file]);
    expect(start.code).toBe(2);
    expect(start.stderr).toContain('listen.port: got "eighty"');
  });

  it('check-config notes demo mode and a missing secret', async () => {
    const r = await runCli(['check-config']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/no backends configured; start will run 3 demo backends/);
    expect(r.stdout).toMatch(/no cookie secret/);
  });

  it('where names the ring owner for each room, in text and JSON', async () => {
    const backends = ['a=http://127.0.0.1:9001', 'b=http://127.0.0.1:9002', 'c=http://127.0.0.1:9003'];
    const rooms = Array.from({ length: 50 }, (_, i) => `room-${i}`).concat(['__proto__', 'constructor']);
    const r = await runCli(['where', ...rooms, '--json', ...backends.flatMap((b) => ['--backend', b])]);
    expect(r.code).toBe(0);
    const rows = JSON.parse(r.stdout) as { room: string; backend: string; url: string }[];
    const ring = buildRing(['a', 'b', 'c'].map((id) => ({ id, weight: 1 })));
    expect(rows.map((x) => x.room)).toEqual(rooms);
    for (const row of rows) expect(row.backend).toBe(ring.first(row.room));
    expect(new Set(rows.map((x) => x.backend)).size).toBe(3);
    const text = await runCli(['where', 'room-1', ...backends.flatMap((b) => ['--backend', b])]);
    expect(text.stdout).toBe(`room-1\t${ring.first('room-1')}\thttp://127.0.0.1:900${'abc'.indexOf(ring.first('room-1')!) + 1}\n`);
  });

  it('where reports invalid keys and exits 2; demo backends when none are configured', async () => {
    const r = await runCli(['where', 'ok', 'a b', 'x'.repeat(200)]);
    expect(r.code).toBe(2);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ok\tdemo-[123]\thttp:\/\/127\.0\.0\.1:810[123]$/);
    expect(lines[1]).toMatch(/^a b\terror: invalid room key/);
    expect(lines[2]).toMatch(/error: invalid room key/);
    expect((await runCli(['where'])).code).toBe(2);
  });

  it('sign prints a cookie value the gateway verifies, and refuses without a secret', async () => {
    const r = await runCli(['sign', 'room-7'], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    expect(r.code).toBe(0);
    const signer = createRoomSigner({ secrets: [TEST_SECRET], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 });
    expect(signer.verify(r.stdout.trim(), Date.now())).toEqual({ ok: true, room: 'room-7' });
    const none = await runCli(['sign', 'room-7']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no cookie secret configured: set ROOMGATE_COOKIE_SECRETS/);
    expect((await runCli(['sign', 'bad key'], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET })).code).toBe(2);
    const django = await runCli(['sign', 'r1', '--config', writeConfig({ cookie: { format: 'django-signer', salt: 's' } })], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    expect(django.stdout.trim()).toMatch(/^r1:[A-Za-z0-9_-]{43}$/);
  });
});
