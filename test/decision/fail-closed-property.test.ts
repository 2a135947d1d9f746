import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServeConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/observability/index.js';
import { startSidecar, type SidecarHandle } from '../../src/sidecar.js';

/** What the upstream answers to the next check, set by each generated case. */
interface Scripted {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const KEY = 'flow-payments';
let next: Scripted;
let upstream: Server;
let sidecar: SidecarHandle;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      try {
        res.writeHead(next.status, next.headers);
      } catch {
        res.writeHead(500);
      }
      res.end(next.body);
    });
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  const port = (upstream.address() as AddressInfo).port;
  const config = loadServeConfig(
    {
      'upstream-url': `http://127.0.0.1:${port}`,
      'api-key': 'test-key',
      listen: '127.0.0.1:0',
      'admin-listen': '127.0.0.1:0',
      'upstream-timeout-ms': '1000',
      // Generated 5xx must not open the breaker and hide later cases from the parser.
      'breaker-failure-threshold': '10000',
      // Each case asks fresh: the cache would answer later cases from earlier ones.
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

function wellFormedAllow(s: Scripted, now: number): boolean {
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

const headerValue = fc.stringMatching(/^[\x20-\x7e]{0,40}$/);
const headers = fc.dictionary(fc.constantFrom('content-type', 'x-decision', 'cache-control', 'x-forwarded-for', 'warning'), headerValue, {
  maxKeys: 3,
});
const field = fc.oneof(fc.constant(undefined), fc.constant(null), fc.boolean(), fc.integer(), fc.string({ maxLength: 12 }));
const validAllow = (now: number) =>
  fc.integer({ min: now + 5_000, max: now + 600_000 }).map((validUntil) => ({ decision: 'ALLOW', configKey: KEY, validUntil }) as Record<string, unknown>);
/** A valid ALLOW with one field removed or replaced: the answers most likely to slip through. */
const mutatedAllow = (now: number) =>
  fc
    .tuple(validAllow(now), fc.constantFrom('decision', 'configKey', 'validUntil', 'reason'), fc.oneof(fc.constant('__drop__'), field, fc.constantFrom('ALLOW', KEY)))
    .map(([o, key, value]) => {
      const copy = { ...o };
      if (value === '__drop__') delete copy[key];
      else copy[key] = value;
      return JSON.stringify(copy);
    });
const body = (now: number) =>
  fc.oneof(
    validAllow(now).map((o) => JSON.stringify(o)),
    mutatedAllow(now),
    fc.record(
      {
        decision: fc.oneof(fc.constantFrom('ALLOW', 'DENY', 'allow', 'ALLOW '), field),
        configKey: fc.oneof(fc.constantFrom(KEY, 'flow-other', ''), field),
        validUntil: fc.oneof(fc.integer({ min: now - 60_000, max: now + 600_000 }), fc.double(), field),
        reason: fc.oneof(fc.constantFrom('customer_not_found', 'config_not_published'), field),
      },
      { requiredKeys: [] },
    ).map((o) => JSON.stringify(o)),
    fc.json(),
    fc.string(),
  );

describe('fail-closed end to end (property)', () => {
  it('only a well-formed, matching, unexpired ALLOW from the service yields ALLOW', async () => {
    const now = Date.now();
    let allows = 0;
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.constant(200), fc.integer({ min: 200, max: 599 })), headers, body(now), async (status, hdrs, text) => {
        next = { status, headers: hdrs, body: status === 204 || status === 304 ? '' : text };
        const res = await request(`${sidecar.urls.decision}/v1/authorization/check`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ userReference: 'cust-1', configKey: KEY }),
        });
        const answer = (await res.body.json()) as Record<string, unknown>;
        const source = res.headers['x-consent-decision-source'];
        const expectAllow = wellFormedAllow(next, Date.now());
        if (answer.decision === 'ALLOW') {
          allows++;
          expect(expectAllow).toBe(true);
          expect(res.statusCode).toBe(200);
          expect(source).toBe('upstream');
        } else {
          expect(answer.decision).toBe('DENY');
          // A well-formed ALLOW so close to its validUntil may expire in flight; nothing else may be lost.
          if (expectAllow) expect((JSON.parse(next.body) as { validUntil: number }).validUntil - Date.now()).toBeLessThan(1000);
          if (res.statusCode === 503) expect(source).toBe('fail-closed');
          else expect(res.statusCode).toBe(200);
        }
      }),
      { numRuns: 300 },
    );
    // The generator must reach the ALLOW branch, or the property proves nothing.
    expect(allows).toBeGreaterThan(0);
  });
});
