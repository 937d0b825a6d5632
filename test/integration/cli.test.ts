// The roomgate command as a user runs it: exit codes, messages, where and sign. What a command
// prints is checked in this process (runCliHere: the CLI's run(), as the binary calls it); the
// binary itself (runCli, runCliPiped) for its exit codes and streams, a closed pipe and start.
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { buildRing } from '../../src/placement/ring.js';
import { createPinSigner, createRoomSigner } from '../../src/room/signing.js';
import { TEST_SECRET, runCli, stopAll, writeConfig } from '../support/processes.js';
import { runCliHere } from '../cli/in-process.js';
import { runCliPiped } from '../cli/support.js';

afterAll(stopAll);

describe('roomgate CLI', () => {
  it('prints help, help COMMAND, COMMAND --help and the version', async () => {
    // The binary: exit 0 and the text on stdout; exit 2, nothing on stdout and one error line and one hint on stderr; its version.
    const [help, unknown, version] = await Promise.all([runCli(['--help']), runCli(['help', 'stauts']), runCli(['--version'])]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Usage: roomgate <command>/);
    for (const cmd of ['start', 'check-config', 'where ROOM', 'sign ROOM', 'status', 'drain BACKEND', 'undrain BACKEND', 'maintenance BACKEND', 'help [COMMAND]']) {
      expect(help.stdout).toContain(cmd);
    }
    expect((await runCliHere(['help'])).stdout).toBe(help.stdout);
    const whereHelp = await runCliHere(['help', 'where']);
    expect(whereHelp.code).toBe(0);
    expect(whereHelp.stdout).toMatch(/^Usage: roomgate where ROOM \[ROOM\.\.\.\] \[options\]/);
    expect(whereHelp.stdout).toContain('--json');
    expect(whereHelp.stdout).not.toContain('--workers');
    for (const args of [['where', '--help'], ['where', '-h'], ['-h', 'where']]) expect((await runCliHere(args)).stdout, args.join(' ')).toBe(whereHelp.stdout);
    const startHelp = await runCliHere(['start', '--help']);
    expect(startHelp.stdout).toMatch(/^Usage: roomgate start \[options\]/);
    expect(startHelp.stdout).toContain('--workers N');
    expect(unknown).toMatchObject({ code: 2, stdout: '' });
    expect(unknown.stderr).toBe('roomgate: unknown command "stauts"; did you mean status?\nsee: roomgate help\n');
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('names an unknown command or option with a suggestion and one hint line, exit 2', async () => {
    const cases: [string[], string][] = [
      [['frobnicate'], 'roomgate: unknown command "frobnicate"\nsee: roomgate help\n'],
      [['wehre', 'a'], 'roomgate: unknown command "wehre"; did you mean where?\nsee: roomgate help\n'],
      [['start', '--prot', '1'], 'roomgate: unknown option --prot; did you mean --port?\nsee: roomgate start --help\n'],
      [['where', 'a', '--bakend', 'b1=http://127.0.0.1:9001'], 'roomgate: unknown option --bakend; did you mean --backend?\nsee: roomgate where --help\n'],
      [['status', '--frob'], 'roomgate: unknown option --frob\nsee: roomgate status --help\n'],
      [['drain', 'b1', '--dedline', '1m'], 'roomgate: unknown option --dedline; did you mean --deadline?\nsee: roomgate drain --help\n'],
      [['undrain', 'b1', '--tokne', 'x'], 'roomgate: unknown option --tokne; did you mean --token?\nsee: roomgate undrain --help\n'],
      [['maintenance', 'b1', '--jsno'], 'roomgate: unknown option --jsno; did you mean --json?\nsee: roomgate maintenance --help\n'],
      [['start', '--hots', '0.0.0.0'], 'roomgate: unknown option --hots; did you mean --host?\nsee: roomgate start --help\n'],
      [['status', '--deadline', '1m'], 'roomgate: --deadline is for drain only (not status)\nsee: roomgate status --help\n'],
      [['drain', 'b1', '--json=yes'], 'roomgate: --json takes no value (got --json=yes)\nsee: roomgate drain --help\n'],
      [['drain', 'b1', '--deadline'], 'roomgate: --deadline needs a value (--deadline D)\nsee: roomgate drain --help\n'],
      [['drain'], 'roomgate: drain needs exactly one BACKEND\nsee: roomgate drain --help\n'],
      [['where'], 'roomgate: where needs at least one ROOM\nsee: roomgate where --help\n'],
      [['start', 'now'], 'roomgate: start takes no arguments (got now)\nsee: roomgate start --help\n'],
      [[], 'roomgate: no command given\nsee: roomgate help\n'],
    ];
    for (const [args, stderr] of cases) {
      const r = await runCliHere(args);
      expect(r, args.join(' ')).toEqual({ code: 2, stdout: '', stderr });
    }
    // The binary with no arguments at all.
    expect(await runCli([])).toEqual({ code: 2, stdout: '', stderr: 'roomgate: no command given\nsee: roomgate help\n' });
  });

  it('exits 0 without a word when the reader of its output goes away (EPIPE)', async () => {
    // ~200 KB of output: more than a pipe holds, so the CLI is still writing when head exits.
    const rooms = Array.from({ length: 5_000 }, (_, i) => `room-${i}`);
    // A reader that is gone before the first byte: every command that prints.
    const gone = [['check-config'], ['help'], ['where', '--offline', 'a', 'b', 'c'], ['start', '--help'], ['sign', 'r1']];
    // The six pipelines are independent: run at once.
    const [head, ...results] = await Promise.all([
      runCliPiped(['where', '--offline', ...rooms], 'head -1'),
      ...gone.map((args) => runCliPiped(args, 'true', { ROOMGATE_COOKIE_SECRETS: TEST_SECRET })),
    ]);
    expect(head).toEqual({ code: 0, stdout: expect.stringMatching(/^room-0\tdemo-[123]\t[^\n]*\n$/), stderr: expect.not.stringMatching(/EPIPE|Error/) });
    for (const [i, args] of gone.entries()) {
      const r = results[i]!;
      expect(r.stderr, args.join(' ')).not.toMatch(/EPIPE|Error|at /);
      expect(r.code, args.join(' ')).toBe(0);
    }
  });

  it('check-config validates without starting and names every problem', async () => {
    const ok = await runCliHere(['check-config', '--backend', 'b1=http://127.0.0.1:9001'], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/configuration is valid/);
    expect(ok.stdout).toContain('"id": "b1"');
    expect(ok.stdout).not.toContain(TEST_SECRET);
    expect(ok.stdout).toContain('<redacted>');
    const json = await runCliHere(['check-config', '--json', '--backend', 'b1=http://127.0.0.1:9001'], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    expect(JSON.parse(json.stdout)).toMatchObject({ valid: true, config: { backends: [{ id: 'b1' }], cookie: { secrets: ['<redacted>'] } }, notes: [] });

    const file = writeConfig({ listen: { port: 'eighty' }, cookie: { format: 'django' }, backends: [{ url: 'ftp://x' }] });
    const bad = await runCliHere(['check-config', '--config', file]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('listen.port: got "eighty"; expected a whole number from 0 to 65535\n');
    expect(bad.stderr).toContain('cookie.format: got "django"; expected one of "roomgate", "django-signer" or "django-cookie"; did you mean "django-signer" or "django-cookie"?\n');
    expect(bad.stderr).toMatch(/backends\.0\.url: got "ftp:\/\/x"; expected an http:\/\/ or https:\/\/ URL/);
    // start refuses the same configuration before listening.
    const start = await runCli(['start', '--config', file]);
    expect(start.code).toBe(2);
    expect(start.stderr).toContain('listen.port: got "eighty"');
  });

  it('check-config names every problem in one run, in plain words, with suggestions and only secrets hidden', async () => {
    const dir = join(tmpdir(), `roomgate-cli-missing-${process.pid}`);
    const file = writeConfig({
      listen: { prot: 8080, maxHeaders: 'many' },
      admin: { token: 'hunter2' },
      backends: [
        { id: 'b1', url: 'http://10.0.0.5:8000' },
        { id: 'b1', url: 'http://10.0.0.6:8000' },
      ],
      placement: { boundedLoadFactor: 'high' },
      room: { pattern: '([' },
      redis: { url: 'http://cache:6379' },
      static: { mounts: [{ prefix: '/static/', dir }] },
    });
    const r = await runCliHere(['check-config', '--config', file]);
    expect(r.code).toBe(2);
    const lines = r.stderr.trimEnd().split('\n');
    expect(lines[0]).toBe('roomgate: invalid configuration:');
    // Type errors, unknown keys and the rules across keys (duplicate ids, a missing directory) together.
    expect(lines.slice(1).sort()).toEqual(
      [
        'listen.prot: unknown key; did you mean "port"?',
        'listen.maxHeaders: got "many"; expected a whole number from 16 to 10000',
        'admin.token: got <redacted, 7 characters>; expected empty (admin writes off) or a token of at least 16 characters',
        'placement.boundedLoadFactor: got "high"; expected 0 (bounded loads off: pure consistent hashing) or a number from 1 to 10',
        'redis.url: got "http://cache:6379"; expected a redis:// or rediss:// URL, e.g. "redis://:password@10.0.0.7:6379/0"',
        'room.pattern: got "(["; expected a regular expression (JavaScript syntax) that compiles; this one does not: unterminated character class',
        'backends.1.id: got "b1", also the id of backends.0; expected an id no other backend has; give one of them another id',
        `static.mounts.0.dir: got ${JSON.stringify(dir)}, which does not exist; expected a readable directory: create it (e.g. python manage.py collectstatic) or fix the path`,
      ]
        .map((p) => `  - ${p}`)
        .sort(),
    );
    expect(r.stderr).not.toContain('hunter2');
    expect(r.stderr).not.toMatch(/Invalid input|Too small|Unrecognized key|expected a array|expected not/);

    // A YAML mistake: line, column, the line itself and a caret under the spot (a secret on it starred out).
    writeFileSync(file, 'admin:\n  token: hunter2hunter2hunter2\nlisten:\n  port: 80: 1\n');
    const y = await runCliHere(['check-config', '--config', file]);
    expect(y.code).toBe(2);
    expect(y.stderr).toBe(
      [
        'roomgate: invalid configuration:',
        `  - config file ${file}: not valid YAML at line 4, column 9: a key and a nested key on one line; put the nested key on its own, indented line (e.g. "listen:" then "  port: 8080")`,
        '      4 |   port: 80: 1',
        '        |         ^',
        '',
      ].join('\n'),
    );

    // A valid configuration is printed with its secrets hidden, and only the password of a URL.
    const ok = await runCliHere(['check-config'], { REDIS_URL: 'redis://app:pa55word-secret@cache:6379/2', ROOMGATE_ADMIN_TOKEN: 'admin-token-0123456789' });
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stdout).toContain('"url": "redis://app:<redacted>@cache:6379/2"');
    expect(ok.stdout).toContain('"token": "<redacted>"');
    expect(ok.stdout).not.toMatch(/pa55word|admin-token-0123456789/);
  });

  it('check-config notes demo mode and a missing secret', async () => {
    const r = await runCliHere(['check-config']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/no backends configured; start will run 3 demo backends/);
    expect(r.stdout).toMatch(/no cookie secret/);
  });

  it('where names the ring owner for each room, in text and JSON', async () => {
    const backends = ['a=http://127.0.0.1:9001', 'b=http://127.0.0.1:9002', 'c=http://127.0.0.1:9003'];
    const rooms = Array.from({ length: 50 }, (_, i) => `room-${i}`).concat(['__proto__', 'constructor']);
    const r = await runCliHere(['where', ...rooms, '--json', ...backends.flatMap((b) => ['--backend', b])]);
    expect(r.code).toBe(0);
    const rows = JSON.parse(r.stdout) as { room: string; backend: string; url: string }[];
    const ring = buildRing(['a', 'b', 'c'].map((id) => ({ id, weight: 1 })));
    expect(rows.map((x) => x.room)).toEqual(rooms);
    for (const row of rows) expect(row.backend).toBe(ring.first(row.room));
    expect(new Set(rows.map((x) => x.backend)).size).toBe(3);
    // In a pipe: ROOM BACKEND URL REASON EPOCH SOCKETS_HERE, tab-separated ("-": not known offline).
    const text = await runCliHere(['where', 'room-1', ...backends.flatMap((b) => ['--backend', b])]);
    expect(text.stdout).toBe(`room-1\t${ring.first('room-1')}\thttp://127.0.0.1:900${'abc'.indexOf(ring.first('room-1')!) + 1}\tring\t-\t-\n`);
  });

  it('where reports invalid keys and exits 2; demo backends when none are configured', async () => {
    const r = await runCliHere(['where', '--offline', 'ok', 'a b', 'x'.repeat(200)]);
    expect(r.code).toBe(2);
    const lines = r.stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^ok\tdemo-[123]\thttp:\/\/127\.0\.0\.1:810[123]\tring\t-\t-$/);
    // The admin API's words (GET /rooms/KEY answers 400 with them).
    const refusal = 'error: invalid room key: it must match room.pattern ^[A-Za-z0-9_.:-]{1,128}$ and be 1 to 1024 characters';
    expect(lines.slice(1)).toEqual([`a b\t${refusal}`, `${'x'.repeat(200)}\t${refusal}`]);
    expect((await runCliHere(['where'])).code).toBe(2);
  });

  it('sign prints a cookie value the gateway verifies, and refuses without a secret', async () => {
    const r = await runCli(['sign', 'room-7'], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    expect(r.code).toBe(0);
    const signer = createRoomSigner({ secrets: [TEST_SECRET], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 });
    expect(signer.verify(r.stdout.trim(), Date.now())).toEqual({ ok: true, room: 'room-7' });
    const none = await runCliHere(['sign', 'room-7']);
    expect(none.code).toBe(2);
    expect(none.stderr).toMatch(/no cookie secret configured: set ROOMGATE_COOKIE_SECRETS/);
    expect((await runCliHere(['sign', 'bad key'], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET })).code).toBe(2);
    const django = await runCliHere(['sign', 'r1', '--config', writeConfig({ cookie: { format: 'django-signer', salt: 's' } })], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    expect(django.stdout.trim()).toMatch(/^r1:[A-Za-z0-9_-]{43}$/);
    const json = await runCliHere(['sign', 'room-7', '--json'], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    const signed = JSON.parse(json.stdout) as { room: string; cookie: string; value: string };
    expect(signed).toMatchObject({ room: 'room-7', cookie: 'roomgate_room' });
    expect(signer.verify(signed.value, Date.now())).toEqual({ ok: true, room: 'room-7' });
  });

  it('sign --pin prints the room pin the gateway verifies (under its own purpose, whatever cookie.format), not a cookie value', async () => {
    const pins = createPinSigner([TEST_SECRET], 604_800);
    const cookies = createRoomSigner({ secrets: [TEST_SECRET], format: 'roomgate', cookieName: 'roomgate_room', salt: '', maxAgeS: 86_400 });
    const r = await runCliHere(['sign', '--pin', 'room-7'], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    expect(r.code, r.stderr).toBe(0);
    expect(pins.verify(r.stdout.trim(), Date.now())).toEqual({ ok: true, room: 'room-7' });
    expect(cookies.verify(r.stdout.trim(), Date.now())).not.toMatchObject({ ok: true }); // a pin is no cookie
    // A Django cookie format and an unsigned cookie change nothing: the pin is keyed with the secret.
    const django = await runCliHere(['sign', '--pin', 'r1', '--json', '--config', writeConfig({ cookie: { format: 'django-cookie', salt: 's' }, room: { pinParam: 'tab' } })], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    const signed = JSON.parse(django.stdout) as { room: string; param: string; value: string };
    expect(signed).toMatchObject({ room: 'r1', param: 'tab' });
    expect(pins.verify(signed.value, Date.now())).toEqual({ ok: true, room: 'r1' });
    const unsigned = await runCliHere(['sign', '--pin', 'r1', '--config', writeConfig({ cookie: { signed: false } })], { ROOMGATE_COOKIE_SECRETS: TEST_SECRET });
    expect(pins.verify(unsigned.stdout.trim(), Date.now())).toEqual({ ok: true, room: 'r1' });
    expect((await runCliHere(['sign', '--pin', 'r1'])).code).toBe(2);
  });
});
