import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadServeConfig } from '../../src/config/index.js';
import { silentLogger } from '../../src/observability/index.js';
import { startSidecar, type SidecarHandle } from '../../src/assembly/sidecar.js';
import { answers, type GeneratedAnswer } from './answer-gen.js';

/** What the upstream answers to the next check, set by each generated case. */
interface Scripted {
  status: number;
  headers: Record<string, string>;
  date: string | undefined;
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
      // No generated Date means none at all: node:http would add its own.
      res.sendDate = false;
      try {
        res.writeHead(next.status, next.date === undefined ? next.headers : { ...next.headers, date: next.date });
      } catch {
        res.writeHead(500);
      }
      res.end(next.status === 204 || next.status === 304 ? undefined : next.body);
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
      // The service answers at once, every time: the deadline only has to outlast a busy machine
      // (1 s did not: a generated valid ALLOW came back upstream_timeout under load).
      'upstream-timeout-ms': '10000',
      // Generated 5xx must not open the breaker and hide later cases from the parser.
      'breaker-failure-threshold': '10000',
      // The cache is on (the default size): each case asks for its own user, then asks again to
      // see what the cache kept.
      'cache-safety-margin-ms': '1000',
    },
    {},
  );
  sidecar = await startSidecar(config, { logger: silentLogger() });
});

afterAll(async () => {
  await sidecar?.close();
  await new Promise((r) => upstream?.close(r));
});

const headerValue = fc.stringMatching(/^[\x20-\x7e]{0,40}$/);
const headers = fc.dictionary(fc.constantFrom('content-type', 'x-decision', 'cache-control', 'x-forwarded-for', 'warning'), headerValue, {
  maxKeys: 3,
});

async function check(userReference: string) {
  const res = await request(`${sidecar.urls.decision}/v1/authorization/check`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ userReference, configKey: KEY }),
  });
  const answer = (await res.body.json()) as Record<string, unknown>;
  return { status: res.statusCode, answer, source: res.headers['x-consent-decision-source'] };
}

const explain = (a: GeneratedAnswer): string => `faults [${a.faults.join(', ')}], benign [${a.benign.join(', ')}], status ${a.status}, date ${a.date}, body ${a.body}`;

describe('fail-closed end to end (property, cache on, Date headers, duplicated members)', () => {
  it('ALLOW, fresh or cached, exactly when the recorded answer had no fault', async () => {
    let allows = 0;
    let n = 0;
    await fc.assert(
      fc.asyncProperty(answers(KEY, Date.now), headers, async (a, hdrs) => {
        const user = `cust-${++n}`;
        next = { status: a.status, headers: hdrs, date: a.date, body: a.body };
        const first = await check(user);
        if (first.answer.decision === 'ALLOW') {
          allows++;
          expect(a.faults, explain(a)).toEqual([]);
          expect(first.status).toBe(200);
          expect(first.source).toBe('upstream');
        } else {
          // validUntil is at least a minute ahead, so a valid ALLOW cannot expire in flight.
          expect(a.faults.length, explain(a)).toBeGreaterThan(0);
          expect(first.answer.decision).toBe('DENY');
          if (first.status === 503) expect(first.source).toBe('fail-closed');
          else expect(first.status).toBe(200);
        }

        // The cached path: the service now fails, so only the cache can answer ALLOW.
        next = { status: 500, headers: {}, date: undefined, body: '' };
        const second = await check(user);
        if (a.faults.length === 0) {
          expect(second, explain(a)).toMatchObject({ status: 200, source: 'cache', answer: { decision: 'ALLOW', configKey: KEY, validUntil: a.validUntil } });
        } else {
          expect(second.answer.decision, explain(a)).toBe('DENY');
          expect(second.source).not.toBe('cache');
        }
      }),
      { numRuns: 500 },
    );
    // The generator must reach the ALLOW branch, or the property proves nothing.
    expect(allows).toBeGreaterThan(20);
  });
});
