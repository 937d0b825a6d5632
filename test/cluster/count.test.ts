// --workers / ROOMGATE_WORKERS and --balance / ROOMGATE_BALANCE values.
import { describe, expect, it } from 'vitest';
import { MAX_WORKERS, parseBalance, parseWorkers } from '../../src/cluster/count.js';

describe('parseWorkers', () => {
  it('takes 1..64, "auto" (one per CPU, at most 64), and nothing as 1', () => {
    expect(parseWorkers(undefined)).toBe(1);
    expect(parseWorkers('')).toBe(1);
    expect(parseWorkers('1')).toBe(1);
    expect(parseWorkers(' 2 ')).toBe(2);
    expect(parseWorkers(String(MAX_WORKERS))).toBe(64);
    expect(parseWorkers('auto', '--workers', 6)).toBe(6);
    expect(parseWorkers('auto', '--workers', 200)).toBe(64);
  });

  it('refuses anything else, saying where the value came from and what is allowed', () => {
    for (const bad of ['0', '65', '-1', '1.5', '2e1', 'abc', 'AUTO', '0x2', '1000']) {
      expect(() => parseWorkers(bad, '--workers', 4), bad).toThrow(`--workers: got ${JSON.stringify(bad)}; expected a whole number from 1 to 64, or "auto" (one per CPU: 4 here)`);
    }
    expect(() => parseWorkers('many', 'ROOMGATE_WORKERS')).toThrow(/^ROOMGATE_WORKERS: got "many"/);
  });
});

describe('parseBalance', () => {
  it('defaults to kernel where SO_REUSEPORT balances (Linux, FreeBSD), to primary elsewhere', () => {
    expect(parseBalance(undefined, '--balance', 'linux')).toBe('kernel');
    expect(parseBalance(' ', '--balance', 'freebsd')).toBe('kernel');
    expect(parseBalance(undefined, '--balance', 'darwin')).toBe('primary');
    expect(parseBalance(undefined, '--balance', 'win32')).toBe('primary');
    expect(parseBalance('primary', '--balance', 'linux')).toBe('primary');
    expect(parseBalance(' kernel ', '--balance', 'linux')).toBe('kernel');
  });

  it('refuses other values, and kernel where the platform cannot balance, saying what to use', () => {
    for (const bad of ['KERNEL', 'rr', 'round-robin', '1']) {
      expect(() => parseBalance(bad, '--balance', 'linux'), bad).toThrow(`--balance: got ${JSON.stringify(bad)}; expected "kernel"`);
    }
    expect(() => parseBalance('kernel', 'ROOMGATE_BALANCE', 'darwin')).toThrow('ROOMGATE_BALANCE: "kernel" needs SO_REUSEPORT load balancing (linux, freebsd); this is darwin: use "primary"');
  });
});
