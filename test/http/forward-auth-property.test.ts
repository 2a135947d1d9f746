import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServeConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/observability/index.js';
import { startSidecar, type SidecarHandle } from '../../src/assembly/sidecar.js';

// Fail-closed through forward-auth, as a property: whatever the service answers, a proxy gets a
// 2xx only for a well-formed, matching, unexpired ALLOW, a 403 only for a well-formed DENY, and a
// 503 otherwise. Real sidecar, real scripted upstream on loopback, cache off so each case asks.

interface Scripted {
  status: number;
  body: string;
}

const KEY = 'flow-orders';
let next: Scripted;
let upstream: Server;
let sidecar: SidecarHandle;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(next.status, { 'content-type': 'application/json' });
      res.end(next.body);
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const config = loadServeConfig(
    {
      'upstream-url': `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      'api-key': 'test-key',
      listen: '127.0.0.1:0',
      'admin-listen': '127.0.0.1:0',
      // The service answers at once, every time: the deadline only has to outlast a busy machine.
      'upstream-timeout-ms': '10000',
      'breaker-failure-threshold': '10000',
      'cache-max-entries': '0',
    },
    {},
  );
  sidecar = await startSidecar(config, { logger: silentLogger() });
});

afterAll(async () => {
  await sidecar?.close();
  await new Promise((r) => upstream?.close(r));
});

/** Whether the service's answer is a well-formed, matching, unexpired ALLOW, judged here independently of src/. */
function isGoodAllow(s: Scripted, now: number): boolean {
  if (s.status !== 200) return false;
  let v: unknown;
  try {
    v = JSON.parse(s.body);
  } catch {
    return false;
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const o = v as Record<string, unknown>;
  return o.decision === 'ALLOW' && o.configKey === KEY && !('reason' in o) && Number.isSafeInteger(o.validUntil) && (o.validUntil as number) > now;
}

const field = fc.oneof(fc.constant(undefined), fc.constant(null), fc.boolean(), fc.integer(), fc.string({ maxLength: 12 }));
const body = (now: number) =>
  fc.oneof(
    fc.integer({ min: now + 5_000, max: now + 600_000 }).map((validUntil) => JSON.stringify({ decision: 'ALLOW', configKey: KEY, validUntil })),
    fc.constantFrom(JSON.stringify({ decision: 'DENY', configKey: KEY }), JSON.stringify({ decision: 'DENY', reason: 'customer_not_found' })),
    fc
      .record(
        {
          decision: fc.oneof(fc.constantFrom('ALLOW', 'DENY', 'allow'), field),
          configKey: fc.oneof(fc.constantFrom(KEY, 'flow-other', ''), field),
          validUntil: fc.oneof(fc.integer({ min: now - 60_000, max: now + 600_000 }), fc.double(), field),
          reason: fc.oneof(fc.constantFrom('customer_not_found', 'odd reason\t!'), field),
        },
        { requiredKeys: [] },
      )
      .map((o) => JSON.stringify(o)),
    fc.json(),
    fc.string(),
  );

describe('forward-auth fails closed (property)', () => {
  it('2xx only for a well-formed matching unexpired ALLOW; otherwise 403 (a DENY) or 503, never anything else', async () => {
    const now = Date.now();
    const seen = { 200: 0, 403: 0, 503: 0 };
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.constant(200), fc.integer({ min: 200, max: 599 })), body(now), async (status, text) => {
        next = { status, body: status === 204 || status === 304 ? '' : text };
        const res = await request(`${sidecar.urls.decision}/sidecar/forward-auth?configKey=${KEY}`, { headers: { 'x-user-reference': 'cust-9' } });
        await res.body.text();
        const goodAllow = isGoodAllow(next, Date.now());
        expect([200, 403, 503]).toContain(res.statusCode);
        seen[res.statusCode as 200 | 403 | 503]++;
        if (res.statusCode === 200) {
          expect(goodAllow).toBe(true);
          expect(Number(res.headers['x-consent-valid-until'])).toBe((JSON.parse(next.body) as { validUntil: number }).validUntil);
        } else if (res.statusCode === 403) {
          // Only a status-200 object saying DENY can be a denial.
          expect((JSON.parse(next.body) as { decision: unknown }).decision).toBe('DENY');
          expect(next.status).toBe(200);
          expect(res.headers['x-consent-deny-reason']).toMatch(/^[A-Za-z0-9_.:-]+$/);
        } else {
          expect(res.headers['x-consent-decision-error']).toMatch(/^[a-z_0-9]+$/);
          // A well-formed ALLOW may only be lost by expiring in flight.
          if (goodAllow) expect((JSON.parse(next.body) as { validUntil: number }).validUntil - Date.now()).toBeLessThan(1000);
        }
      }),
      { numRuns: 250 },
    );
    // Every branch must be reached, or the property proves little.
    expect(seen[200]).toBeGreaterThan(0);
    expect(seen[403]).toBeGreaterThan(0);
    expect(seen[503]).toBeGreaterThan(0);
  });
});
