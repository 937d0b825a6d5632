// The admin port's Host rule (DNS rebinding guard), as a table: what passes and what gets 421.
// The listeners themselves are tested with real requests in test/integration/admin.test.ts and
// workers.test.ts.
import { describe, expect, it } from 'vitest';
import { adminHostAllowed, allowedHostSet } from '../../src/http/host-check.js';

const allowed = allowedHostSet(['Roomgate-Admin', 'admin.example.com']);

describe('adminHostAllowed', () => {
  it('passes IP literals (IPv4, IPv6 in brackets), localhost and the configured names, with or without a port', () => {
    for (const host of ['127.0.0.1', '127.0.0.1:9090', '10.0.0.5:65535', '[::1]', '[::1]:9090', '[fe80::1%25eth0]', '[2001:db8::1]:80', 'localhost', 'LocalHost:9090', 'roomgate-admin', 'ROOMGATE-ADMIN:9090', 'admin.example.com']) {
      expect(adminHostAllowed(host, allowed), host).toBe(true);
    }
    // No Host at all (HTTP/1.0): a browser always sends one, so nothing is rebound.
    expect(adminHostAllowed(undefined, allowed)).toBe(true);
  });

  it('refuses every other name, and anything that only looks like an address or an allowed name', () => {
    const refused = [
      '',
      'evil.example',
      'evil.example:9090',
      'localhost.',
      'localhost.evil.example',
      'sub.localhost',
      '127.0.0.1.nip.io',
      '2130706433', // 127.0.0.1 as one number: browsers accept it, it is not an IP literal here
      '0x7f.1',
      '127.1',
      '::1', // IPv6 without brackets is not a Host
      '[::1',
      '[evil.example]',
      '127.0.0.1:',
      '127.0.0.1:port',
      '127.0.0.1:123456',
      'roomgate-admin.evil.example',
      'admin.example.com.evil.example',
      'admin.example.com:80:80',
      'user@127.0.0.1',
    ];
    for (const host of refused) expect(adminHostAllowed(host, allowed), host).toBe(false);
    expect(adminHostAllowed('roomgate-admin', allowedHostSet([])), 'not configured').toBe(false);
  });
});
