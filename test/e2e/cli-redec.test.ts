import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { runCli } from '../helpers/cli.js';

let sim: SimulatorHandle | undefined;
let fake: Server | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
  if (fake) await new Promise((r) => fake!.close(r));
  fake = undefined;
});

async function simWithObligations(): Promise<SimulatorHandle> {
  const s = await startSimulator({ apiKey: 'redec-key' });
  s.revokeConsent({ userReference: 'alice', configKey: 'credit-report' });
  for (const u of ['bob', 'carol', 'dave', 'erin']) s.grantConsent({ userReference: u, configKey: 'credit-report' });
  s.grantConsent({ userReference: 'bob', configKey: 'open-finance' }); // service responsibility: not pending
  return s;
}

/** A service that answers every listing request with `body`. */
async function fakeService(body: (url: URL) => string): Promise<string> {
  fake = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(body(new URL(req.url ?? '/', 'http://x')));
  });
  await new Promise<void>((r) => fake!.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(fake.address() as AddressInfo).port}`;
}

describe('consent-sidecar redec pending', () => {
  it('lists every page as JSON lines, following nextCursor', async () => {
    sim = await simWithObligations();
    const { code, stdout } = await runCli(['redec', 'pending', '--upstream-url', sim.url, '--api-key', 'redec-key', '--limit', '2']);
    expect(code).toBe(0);
    const items = stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(items.map((i) => i.customerTenantId)).toEqual(['alice', 'bob', 'carol', 'dave', 'erin']);
    expect(items.every((i) => i.status === 'pending')).toBe(true);
  });

  it('reads the upstream flags from CONSENT_SIDECAR_* variables and prints a table', async () => {
    sim = await simWithObligations();
    const { code, stdout } = await runCli(['redec', 'pending', '--output', 'table'], {
      CONSENT_SIDECAR_UPSTREAM_URL: sim.url,
      CONSENT_SIDECAR_API_KEY: 'redec-key',
    });
    expect(code).toBe(0);
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^notificationRequirementId\s+redecConsentId\s+notificationReason/);
    expect(lines).toHaveLength(6);
    expect(lines[1]).toMatch(/nrq_000001 .* revoke .* tenant .* pending/);
    // Times are ISO 8601 in the table (the listing gives epoch ms).
    expect(lines[0]).toMatch(/createdAt$/);
    expect(lines[1]).toMatch(/ \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it('learns the field rules: the only array of objects, or --redec-items-field; the cursor as --redec-cursor-param', async () => {
    const url = await fakeService((u) => {
      const after = u.searchParams.get('after');
      return JSON.stringify({
        meta: [{ page: after ?? 'first' }],
        records: after === null ? [{ id: 'r1', dueAt: 1767225600 }] : [{ id: 'r2', dueAt: 1767225600123 }],
        nextCursor: after === null ? 'c2' : null,
      });
    });
    // Two arrays of objects: no guessing.
    const guess = await runCli(['redec', 'pending', '--upstream-url', url, '--api-key', 'k']);
    expect(guess.code).toBe(1);
    expect(guess.stderr).toContain('--redec-items-field');
    const res = await runCli(['redec', 'pending', '--upstream-url', url, '--api-key', 'k', '--redec-items-field', 'records', '--redec-cursor-param', 'after', '--output', 'table']);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stderr).toContain('records read from "records"');
    expect(res.stdout.trim().split('\n')).toEqual(['id  dueAt', 'r1  2026-01-01T00:00:00.000Z', 'r2  2026-01-01T00:00:00.123Z']);
    // The same from the variables.
    const env = await runCli(['redec', 'pending', '--upstream-url', url, '--api-key', 'k'], { CONSENT_SIDECAR_REDEC_ITEMS_FIELD: 'records', CONSENT_SIDECAR_REDEC_CURSOR_PARAM: 'after' });
    expect(env.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { id: string }).id)).toEqual(['r1', 'r2']);
  });

  it('fails with exit 1 and a coded message on 401, malformed pages and cursor loops', async () => {
    sim = await simWithObligations();
    const denied = await runCli(['redec', 'pending', '--upstream-url', sim.url, '--api-key', 'wrong']);
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain('ERR_REDEC_HTTP_STATUS');

    const malformed = await fakeService(() => JSON.stringify({ items: 'nope', nextCursor: null }));
    const bad = await runCli(['redec', 'pending', '--upstream-url', malformed, '--api-key', 'k']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('ERR_REDEC_MALFORMED_PAGE');
  });

  it('stops on a cursor the service already returned', async () => {
    const url = await fakeService((u) =>
      JSON.stringify({ items: [{ id: u.searchParams.get('cursor') ?? 'first' }], nextCursor: u.searchParams.get('cursor') === 'a' ? 'b' : 'a' }),
    );
    const res = await runCli(['redec', 'pending', '--upstream-url', url, '--api-key', 'k']);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('ERR_REDEC_CURSOR_LOOP');
    expect(res.stdout.trim().split('\n')).toHaveLength(3);
  });

  it('respects the listing bounds of serve (issue 20): records, page bytes and listing bytes, from flags or variables, exit 1', async () => {
    // Pages of 2 records, 6 in all; each page about 2 KiB.
    const url = await fakeService((u) => {
      const page = Number(u.searchParams.get('cursor') ?? '0');
      const items = [0, 1].map((i) => ({ id: `nrq_${page * 2 + i}`, note: 'n'.repeat(1000) }));
      return JSON.stringify({ items, nextCursor: page < 2 ? String(page + 1) : null });
    });
    const all = await runCli(['redec', 'pending', '--upstream-url', url, '--api-key', 'k', '--output', 'table']);
    expect(all.code, all.stderr).toBe(0);
    const records = await runCli(['redec', 'pending', '--upstream-url', url, '--api-key', 'k', '--output', 'table', '--redec-max-records', '5']);
    expect(records.code).toBe(1);
    expect(records.stderr).toContain('ERR_REDEC_TOO_LARGE');
    expect(records.stderr).toContain('--redec-max-records');
    expect(records.stdout).toBe('');
    const page = await runCli(['redec', 'pending', '--upstream-url', url, '--api-key', 'k'], { CONSENT_SIDECAR_REDEC_MAX_PAGE_BYTES: '1024' });
    expect(page.code).toBe(1);
    expect(page.stderr).toContain('--redec-max-page-bytes');
    expect(page.stdout).toBe('');
    const listing = await runCli(['redec', 'pending', '--upstream-url', url, '--api-key', 'k', '--redec-max-page-bytes', '4096', '--redec-max-listing-bytes', '5000']);
    expect(listing.code).toBe(1);
    expect(listing.stderr).toContain('--redec-max-listing-bytes');
  }, 60_000); // four CLI processes from source

  it.each([
    [['--output', 'xml'], '--output'],
    [['--limit', '0'], '--limit'],
    [['--upstream-url', 'http://127.0.0.1:9', '--api-key', 'k', '--redec-cursor-param', 'a b'], '--redec-cursor-param'],
    [['--upstream-url', 'http://127.0.0.1:9', '--api-key', 'k', '--redec-max-records', '0'], '--redec-max-records'],
    [['--upstream-url', 'http://127.0.0.1:9', '--api-key', 'k', '--redec-max-page-bytes', 'big'], '--redec-max-page-bytes'],
    [[], '--upstream-url'],
  ])('rejects %j naming %s, exit 2', async (args, flag) => {
    const res = await runCli(['redec', 'pending', ...args]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain(flag);
    expect(res.stderr).not.toMatch(/\n\s+at /);
  });
});
