import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsentClient, holdsAt, type CheckResult } from '../../src/client/index.js';
import { allowCaseArb, brokenCaseArb, configKeyArb, T0, type Case } from './answers.js';
import { response, HostileSidecar } from '../helpers/hostile-sidecar.js';

// The client against a sidecar that answers anything: not one allowed result unless the answer
// was a valid ALLOW, and every valid ALLOW recognised. One fake and one kept-alive client per
// transport, so ten thousand answers cost seconds.

const BROKEN_RUNS = 10_500;
const dir = mkdtempSync(join(tmpdir(), 'hostile-'));
const tcp = new HostileSidecar();
const unix = new HostileSidecar();
let overTcp: ConsentClient;
let overUnix: ConsentClient;
let n = 0;

beforeAll(async () => {
  overTcp = new ConsentClient({ baseUrl: await tcp.listen(), timeoutMs: 10_000 });
  overUnix = new ConsentClient({ baseUrl: await unix.listen(join(dir, 'hostile.sock')), timeoutMs: 10_000 });
});
afterAll(async () => {
  await Promise.allSettled([overTcp?.close(), overUnix?.close()]);
  await Promise.allSettled([tcp.close(), unix.close()]);
  rmSync(dir, { recursive: true, force: true });
});

/** Asks `client` with the case's script on `fake`; each case has a user reference of its own. */
async function ask(fake: HostileSidecar, client: ConsentClient, c: Case, timeoutMs?: number, signal?: AbortSignal): Promise<CheckResult> {
  const name = `case-${n++}`;
  fake.script(name, c.script);
  try {
    return await client.check({ userReference: name, configKey: c.configKey }, { ...(timeoutMs === undefined ? {} : { timeoutMs }), ...(signal ? { signal } : {}) });
  } finally {
    fake.forget(name);
  }
}

function expectNotAllowed(r: CheckResult, c: Case): void {
  if (r.allowed || holdsAt(r, Date.now()) || holdsAt(r, 0)) {
    throw new Error(`allowed for a ${c.family} answer:\n${c.script.bytes.toString('latin1').slice(0, 600)}`);
  }
}

describe('ConsentClient against a hostile sidecar', () => {
  it(`not one allowed result among at least 10,000 answers that are not a valid ALLOW`, async () => {
    const families = new Map<string, number>();
    const kinds = new Map<string, number>();
    const started = performance.now();
    await fc.assert(
      fc.asyncProperty(brokenCaseArb(), async (c) => {
        const r = await ask(tcp, overTcp, c);
        expectNotAllowed(r, c);
        families.set(c.family, (families.get(c.family) ?? 0) + 1);
        kinds.set(r.kind, (kinds.get(r.kind) ?? 0) + 1);
      }),
      { numRuns: BROKEN_RUNS },
    );
    const total = [...families.values()].reduce((a, b) => a + b, 0);
    console.info(`hostile sidecar: ${total} non-ALLOW answers in ${Math.round(performance.now() - started)} ms over ${tcp.connections} connections`, Object.fromEntries(families), Object.fromEntries(kinds));
    expect(total).toBeGreaterThanOrEqual(10_000);
    expect([...families.keys()].sort()).toEqual(
      ['bytes', 'config_key', 'content_type', 'decision', 'duplicate_member', 'extra_member', 'framing', 'junk', 'no_content', 'status', 'structure', 'valid_until'].sort(),
    );
  });

  it('every valid ALLOW is recognised, with its validUntil and decision id, and holds until then', async () => {
    await fc.assert(
      fc.asyncProperty(allowCaseArb, async (c) => {
        const r = await ask(tcp, overTcp, c);
        expect(r).toMatchObject({ allowed: true, kind: 'allow', configKey: c.configKey, validUntil: c.allow!.validUntil });
        expect(r.decisionId).toBe(c.allow!.decisionId);
        expect(holdsAt(r, Date.now())).toBe(true);
        expect(holdsAt(r, c.allow!.validUntil)).toBe(false);
      }),
      { numRuns: 1000 },
    );
  });

  it('over a Unix socket: the same two properties', async () => {
    await fc.assert(fc.asyncProperty(brokenCaseArb(), async (c) => expectNotAllowed(await ask(unix, overUnix, c), c)), { numRuns: 1000 });
    await fc.assert(fc.asyncProperty(allowCaseArb, async (c) => void expect((await ask(unix, overUnix, c)).allowed).toBe(true)), { numRuns: 300 });
  });

  it('keeps its connections: a thousand answers on a handful of connections', async () => {
    const before = tcp.connections;
    await fc.assert(fc.asyncProperty(allowCaseArb.filter((c) => c.script.then === 'keep'), async (c) => void expect((await ask(tcp, overTcp, c)).allowed).toBe(true)), { numRuns: 1000 });
    expect(tcp.connections - before).toBeLessThanOrEqual(2);
  });

  it('slow, silent, trickling and aborted answers: not allowed, unavailable', async () => {
    const holds = fc.record({
      configKey: configKeyArb,
      validUntil: fc.integer({ min: T0 + 3_600_000, max: T0 + 7_200_000 }),
      part: fc.constantFrom('nothing', 'head', 'half', 'all_but_last_byte'),
      abort: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(holds, async (h) => {
        const whole = response(200, [['content-type', 'application/json']], JSON.stringify({ decision: 'ALLOW', configKey: h.configKey, validUntil: h.validUntil }));
        const headEnd = whole.indexOf('\r\n\r\n') + 4;
        const upTo = { nothing: 0, head: headEnd, half: headEnd + Math.floor((whole.length - headEnd) / 2), all_but_last_byte: whole.length - 1 }[h.part];
        const c: Case = { family: 'held', configKey: h.configKey, script: { bytes: whole.subarray(0, upTo), then: 'hold' } };
        // The answer never completes: whichever ends the call first (deadline or abort), it ends not allowed.
        const r = await ask(tcp, overTcp, c, 100, h.abort ? AbortSignal.timeout(30) : undefined);
        expectNotAllowed(r, c);
        expect(r).toMatchObject({ kind: 'unavailable', cause: expect.stringMatching(/^(timeout|aborted)$/) });
      }),
      { numRuns: 40 },
    );
  });
});
