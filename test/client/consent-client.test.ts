import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsentClient, holdsAt, MAX_BATCH_CHECKS } from '../../src/client/index.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { decisionsByUser, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { freePort } from '../helpers/ports.js';
import { HostileSidecar, response } from '../helpers/hostile-sidecar.js';

const KEY = 'marketing-email';
const dir = mkdtempSync(join(tmpdir(), 'client-'));
let up: ScriptedUpstream;
let tcpSidecar: TestSidecar;
let unixSidecar: TestSidecar;
const fake = new HostileSidecar();
let fakeUrl: string;

beforeAll(async () => {
  up = await startUpstream();
  up.reply(decisionsByUser(KEY));
  [tcpSidecar, unixSidecar] = await Promise.all([startTestSidecar(up.url), startTestSidecar(up.url, { listen: `unix:${join(dir, 'decision.sock')}` })]);
  fakeUrl = await fake.listen();
});
afterAll(async () => {
  await Promise.allSettled([tcpSidecar?.close(), unixSidecar?.close(), fake.close()]);
  await up?.close();
  rmSync(dir, { recursive: true, force: true });
});

const json = (status: number, body: unknown, headers: [string, string][] = []): Buffer =>
  response(status, [['content-type', 'application/json'], ...headers], typeof body === 'string' ? body : JSON.stringify(body));

describe('ConsentClient', () => {
  it('throws at construction for bad options, and only there', () => {
    for (const o of [{}, { baseUrl: 'https://127.0.0.1:7700' }, { baseUrl: 'http://127.0.0.1:7700/prefix' }, { baseUrl: 'unix:relative.sock' }, { baseUrl: 'nope' }]) {
      expect(() => new ConsentClient(o as never), JSON.stringify(o)).toThrow(TypeError);
    }
    for (const timeoutMs of [0, -1, 1.5, '100']) expect(() => new ConsentClient({ baseUrl: 'http://127.0.0.1:1', timeoutMs } as never)).toThrow(RangeError);
  });

  it.each([
    ['TCP', () => tcpSidecar.handle.urls.decision],
    ['a Unix socket', () => unixSidecar.handle.urls.decision],
  ])('against a real sidecar over %s: ALLOW, both DENYs, a 503 with its cause', async (_, base) => {
    const client = new ConsentClient({ baseUrl: base() });
    try {
      const allowed = await client.check({ userReference: 'alice', configKey: KEY });
      expect(allowed).toMatchObject({ allowed: true, kind: 'allow', configKey: KEY, source: 'upstream' });
      expect(holdsAt(allowed, Date.now())).toBe(true);
      expect(await client.check({ userReference: 'alice', configKey: KEY })).toMatchObject({ allowed: true, source: 'cache' });
      expect(await client.check({ userReference: 'bob', configKey: KEY })).toMatchObject({ allowed: false, kind: 'deny', cause: 'evaluated', status: 200 });
      expect(await client.check({ userReference: 'nobody', configKey: KEY })).toMatchObject({ allowed: false, kind: 'deny', cause: 'customer_not_found' });
      const none = await client.check({ userReference: 's500', configKey: KEY });
      expect(none).toMatchObject({ allowed: false, kind: 'no_decision', cause: 'upstream_5xx', status: 503 });
      expect(holdsAt(none, 0)).toBe(false);
    } finally {
      await client.close();
    }
  });

  it('a dead sidecar, a missing socket, a closed client, a refused input: not allowed, never a throw, nothing sent', async () => {
    const port = await freePort();
    const dead = new ConsentClient({ baseUrl: `http://127.0.0.1:${port}` });
    expect(await dead.check({ userReference: 'alice', configKey: KEY })).toMatchObject({ allowed: false, kind: 'unavailable', cause: 'unreachable' });
    await dead.close();
    const gone = new ConsentClient({ baseUrl: `unix:${join(dir, 'nobody-here.sock')}` });
    expect(await gone.check({ userReference: 'alice', configKey: KEY })).toMatchObject({ allowed: false, kind: 'unavailable', cause: 'unreachable' });
    await gone.close();
    expect(await dead.check({ userReference: 'alice', configKey: KEY })).toMatchObject({ kind: 'unavailable', cause: 'closed' });

    const client = new ConsentClient({ baseUrl: fakeUrl });
    const before = fake.requests;
    for (const input of [{ userReference: '', configKey: KEY }, { userReference: 'a', configKey: 'k'.repeat(1025) }, { userReference: 1, configKey: KEY }, null]) {
      expect(await client.check(input as never)).toMatchObject({ allowed: false, kind: 'invalid_request', cause: 'invalid_argument' });
    }
    expect(await client.check({ userReference: 'a', configKey: KEY }, { timeoutMs: 0 })).toMatchObject({ kind: 'invalid_request' });
    expect(await client.check({ userReference: 'a', configKey: KEY }, { signal: AbortSignal.abort() })).toMatchObject({ kind: 'unavailable', cause: 'aborted' });
    expect(fake.requests).toBe(before);
    await client.close();
  });

  it('never follows a redirect; carries the decision id of any answer; a 400 is invalid_request', async () => {
    const client = new ConsentClient({ baseUrl: fakeUrl });
    fake.script('r', { bytes: json(307, { decision: 'ALLOW', configKey: KEY, validUntil: Date.now() + 60_000 }, [['location', '/v1/authorization/check']]), then: 'keep' });
    const before = fake.requests;
    expect(await client.check({ userReference: 'r', configKey: KEY })).toMatchObject({ allowed: false, kind: 'unexpected_answer', cause: 'redirect', status: 307 });
    expect(fake.requests).toBe(before + 1);
    fake.script('d', { bytes: json(200, { decision: 'DENY', configKey: KEY }, [['x-consent-decision-id', 'dec-42']]), then: 'keep' });
    expect(await client.check({ userReference: 'd', configKey: KEY })).toMatchObject({ kind: 'deny', decisionId: 'dec-42' });
    fake.script('x', { bytes: json(400, { decision: 'DENY', error: 'invalid_request', field: 'configKey', detail: '…' }, [['x-consent-decision-id', 'dec-43']]), then: 'keep' });
    expect(await client.check({ userReference: 'x', configKey: KEY })).toMatchObject({ kind: 'invalid_request', detail: 'field configKey', decisionId: 'dec-43' });
    fake.script('e', { bytes: json(200, { decision: 'DENY', error: 'upstream_5xx' }), then: 'keep' });
    expect(await client.check({ userReference: 'e', configKey: KEY })).toMatchObject({ kind: 'unexpected_answer', cause: 'malformed' });
    await client.close();
  });

  describe('checkBatch', () => {
    const asked = [
      { userReference: 'b-1', configKey: 'k1' },
      { userReference: 'b-2', configKey: 'k2' },
      { userReference: 'b-3', configKey: 'k3' },
      { userReference: 'b-4', configKey: 'k4' },
    ];
    const later = Date.now() + 3_600_000;
    const good = [
      { decision: 'ALLOW', configKey: 'k1', validUntil: later, source: 'cache', decisionId: 'i1' },
      { decision: 'DENY', configKey: 'k2', source: 'upstream', decisionId: 'i2' },
      { decision: 'DENY', reason: 'customer_not_found', source: 'upstream', decisionId: 'i3' },
      { decision: 'DENY', error: 'upstream_timeout', source: 'fail-closed', decisionId: 'i4' },
    ];
    const run = async (answer: Buffer): Promise<unknown[]> => {
      const client = new ConsentClient({ baseUrl: fakeUrl });
      fake.script('b-1', { bytes: answer, then: 'keep' });
      try {
        return await client.checkBatch(asked);
      } finally {
        await client.close();
      }
    };

    it('reads each item as a single check, with its decisionId', async () => {
      expect(await run(json(200, { results: good }))).toEqual([
        { allowed: true, kind: 'allow', configKey: 'k1', validUntil: later, source: 'cache', decisionId: 'i1' },
        { allowed: false, kind: 'deny', cause: 'evaluated', status: 200, decisionId: 'i2' },
        { allowed: false, kind: 'deny', cause: 'customer_not_found', status: 200, decisionId: 'i3' },
        { allowed: false, kind: 'no_decision', cause: 'upstream_timeout', status: 200, decisionId: 'i4' },
      ]);
    });

    it('an item for another configKey, malformed, or without its id is not allowed; the others stand', async () => {
      const items = [{ ...good[0], configKey: 'k2' }, good[1], { ...good[0], configKey: 'k3', validUntil: String(later) }, { ...good[0], configKey: 'k4', decisionId: undefined }];
      const r = (await run(json(200, { results: items }))) as { allowed: boolean; cause?: string }[];
      expect(r.map((x) => [x.allowed, x.cause])).toEqual([[false, 'other_config_key'], [false, 'evaluated'], [false, 'malformed'], [false, 'malformed']]);
    });

    it('a results array of the wrong length, a duplicated member anywhere, a refusal: no item allowed', async () => {
      const allAllow = asked.map((a, i) => ({ decision: 'ALLOW', configKey: a.configKey, validUntil: later, source: 'upstream', decisionId: `i${i}` }));
      expect((await run(json(200, { results: allAllow }))).every((x) => (x as { allowed: boolean }).allowed)).toBe(true);
      for (const body of [
        { results: allAllow.slice(0, 3) },
        { results: [...allAllow, allAllow[0]] },
        `{"results":${JSON.stringify(allAllow)},"results":${JSON.stringify(allAllow)}}`,
        JSON.stringify({ results: allAllow }).replace('"source":"upstream"', '"source":"upstream","source":"cache"'),
        { results: allAllow, more: 1 },
      ]) {
        expect((await run(json(200, body))).every((x) => !(x as { allowed: boolean }).allowed), String(body).slice(0, 80)).toBe(true);
      }
      expect((await run(json(400, { decision: 'DENY', error: 'invalid_request', field: 'checks[2]', index: 2, detail: '…' }))).every((x) => (x as { kind: string }).kind === 'invalid_request')).toBe(true);
    });

    it('refuses more than 100 checks, or any bad check, before sending; an empty batch is no call', async () => {
      const client = new ConsentClient({ baseUrl: fakeUrl });
      const before = fake.requests;
      expect(await client.checkBatch([])).toEqual([]);
      const many = await client.checkBatch(Array.from({ length: MAX_BATCH_CHECKS + 1 }, () => asked[0]!));
      expect(many).toHaveLength(MAX_BATCH_CHECKS + 1);
      expect(many.every((x) => !x.allowed && x.cause === 'batch_too_large')).toBe(true);
      expect((await client.checkBatch([asked[0]!, { userReference: '', configKey: 'k' }])).map((x) => x.allowed)).toEqual([false, false]);
      expect(fake.requests).toBe(before);
      await client.close();
    });
  });
});
