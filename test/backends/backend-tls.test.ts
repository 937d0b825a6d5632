// The pure parts of https backends: discovery's scheme, the options of one connection (SNI), the
// names of TLS failures (their kind for metrics and retries, their reason for logs and the admin
// API). Real connections are in test/integration/backend-tls.test.ts.
import { describe, expect, it } from 'vitest';
import { defaultBackendTls, tlsFailure, tlsOptions } from '../../src/backends/backend-tls.js';
import { backendsFromA, backendsFromSrv } from '../../src/backends/discovery.js';
import { classifyError, downReason, isConnectFailure } from '../../src/forward/errors.js';

const err = (code: string, message: string, reason?: string): NodeJS.ErrnoException => Object.assign(new Error(message), { code }, reason ? { reason } : {});

describe('https backends (pure)', () => {
  it('discovery with scheme https makes https:// backends that carry tls; http stays as it was', () => {
    expect(backendsFromA(['10.0.0.5'], 8443, 1, 'https')).toEqual([{ id: '10.0.0.5:8443', url: 'https://10.0.0.5:8443', host: '10.0.0.5', port: 8443, weight: 1, tls: true }]);
    expect(backendsFromSrv([{ name: 'app-0.app.ns.svc.cluster.local.', port: 8443, priority: 0, weight: 50 }], 1, 'https')).toEqual([
      { id: 'app-0:8443', url: 'https://app-0.app.ns.svc.cluster.local:8443', host: 'app-0.app.ns.svc.cluster.local', port: 8443, weight: 1, tls: true },
    ]);
    expect(backendsFromA(['10.0.0.5'], 8000, 1)).toEqual([{ id: '10.0.0.5:8000', url: 'http://10.0.0.5:8000', host: '10.0.0.5', port: 8000, weight: 1 }]);
  });

  it('SNI is the host when it is a name, none for an address, or the configured servername', () => {
    const t = defaultBackendTls();
    expect(tlsOptions(t, 'app-1.internal')).toMatchObject({ servername: 'app-1.internal', rejectUnauthorized: true });
    expect(tlsOptions(t, '10.0.0.5').servername).toBe('');
    expect(tlsOptions(t, '::1').servername).toBe('');
    expect(tlsOptions({ ...t, servername: 'app.internal', verify: false }, '10.0.0.5')).toMatchObject({ servername: 'app.internal', rejectUnauthorized: false });
  });

  it('TLS failures are their own kind, a connect failure, with the reason in full', () => {
    const expired = err('CERT_HAS_EXPIRED', 'certificate has expired');
    expect(classifyError(expired)).toBe('tls');
    expect(isConnectFailure('tls')).toBe(true);
    expect(downReason(expired, 'tls')).toBe('tls: CERT_HAS_EXPIRED (certificate has expired)');
    expect(tlsFailure(err('ERR_SSL_WRONG_VERSION_NUMBER', 'C0:error:0A00010B:SSL routines::wrong version number', 'wrong version number'))).toBe('tls: ERR_SSL_WRONG_VERSION_NUMBER (wrong version number)');
    expect(tlsFailure(err('ERR_TLS_CERT_ALTNAME_INVALID', `Hostname/IP does not match certificate's altnames: ${'x'.repeat(300)}`))?.length).toBeLessThan(200);
    // Not TLS: unchanged.
    expect(classifyError(err('ECONNREFUSED', 'refused'))).toBe('refused');
    expect(downReason(err('ECONNREFUSED', 'refused'), 'refused')).toBe('refused');
    expect(tlsFailure(err('ECONNRESET', 'socket hang up'))).toBeNull();
  });
});
