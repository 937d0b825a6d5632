// Each command's --help lists the environment variables that command reads, not every variable
// of the configuration (sign once listed REDIS_TLS_KEY).
import { describe, expect, it } from 'vitest';
import { runCliHere } from './in-process.js';

/** The variable names of the help's Environment section. */
async function envOf(command: string): Promise<string[]> {
  const r = await runCliHere([command, '--help']);
  expect(r.code).toBe(0);
  const section = r.stdout.split('Environment (a flag wins over its variable):\n')[1]?.split('\n\n')[0] ?? '';
  return section.split('\n').map((l) => l.trim().split(/\s+/)[0] as string).filter(Boolean);
}

describe('--help lists the variables the command reads', () => {
  it.each([
    ['sign', ['ROOMGATE_CONFIG', 'ROOMGATE_COOKIE_SECRETS']],
    ['where', ['ROOMGATE_ADMIN_URL', 'ROOMGATE_CONFIG', 'ROOMGATE_BACKENDS', 'ROOMGATE_DEMO_BASE_PORT']],
    ['move', ['ROOMGATE_ADMIN_URL', 'ROOMGATE_ADMIN_TOKEN']],
    ['status', ['ROOMGATE_ADMIN_URL']],
  ])('%s: %j', async (command, names) => {
    expect(await envOf(command)).toEqual(names);
  });

  it('start and check-config read the whole configuration, start its process variables too', async () => {
    const start = await envOf('start');
    expect(start).toEqual(expect.arrayContaining(['REDIS_TLS_KEY', 'ROOMGATE_WORKERS', 'ROOMGATE_BALANCE']));
    const check = await envOf('check-config');
    expect(check).toContain('REDIS_TLS_KEY');
    expect(check).not.toContain('ROOMGATE_WORKERS');
  });

  it('start --help names the four secrets the demo banner prints', async () => {
    const r = await runCliHere(['start', '--help']);
    expect(r.stdout.replace(/\s+/g, ' ')).toContain('a cookie secret, an admin token, an API token and a push token are generated');
  });
});
