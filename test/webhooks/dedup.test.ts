import { createServer } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { MemoryDedupStore } from '../../src/webhooks/index.js';
import { deliveryHeaders, envelope, metricValue, post, SECRET_A, startApp, startSidecar, VECTOR_TS, type FakeApp, type SidecarUnderTest } from '../helpers/webhooks.js';

let app: FakeApp;
let sidecar: SidecarUnderTest;

beforeEach(async () => {
  app = await startApp();
  // Forwards that must succeed never race this on a busy machine (300 ms did: 20 copies all 503);
  // the cases of an app too slow wait it out.
  sidecar = await startSidecar({ appUrl: app.url, forwardTimeoutMs: 3000, now: () => VECTOR_TS * 1000 });
});
afterEach(async () => {
  await sidecar.close();
  await app.close();
});

const deliver = (body: Buffer, id: string, url = sidecar.url) => post(url, body, deliveryHeaders(SECRET_A, VECTOR_TS, body, id));

describe('deduplication over HTTP', () => {
  it('20 concurrent copies of one event reach the app exactly once; all get 200', async () => {
    app.delayMs = 100;
    const body = envelope({ id: 'evt_same' });
    const replies = await Promise.all(Array.from({ length: 20 }, () => deliver(body, 'evt_same')));
    expect(replies.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(app.received).toHaveLength(1);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'accepted' })).toBe(1);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'duplicate' })).toBe(19);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_in_flight')).toBe(0);
  });

  it('a later copy of an accepted event gets 200 without forwarding (new delivery id, new timestamp)', async () => {
    const body = envelope({ id: 'evt_dup' });
    expect((await deliver(body, 'evt_dup')).status).toBe(200);
    const again = await post(sidecar.url, body, deliveryHeaders(SECRET_A, VECTOR_TS + 60, body, 'evt_dup'));
    expect(again.status).toBe(200);
    expect(JSON.parse(again.body)).toEqual({ status: 'duplicate' });
    expect(app.received).toHaveLength(1);
  });

  it('dedup is by envelope id, not by the event-id header', async () => {
    await deliver(envelope({ id: 'evt_x' }), 'same-header');
    await deliver(envelope({ id: 'evt_y' }), 'same-header');
    expect(app.received).toHaveLength(2);
  });

  it('copies waiting on a first copy that fails get 503, and none is forwarded a second time', async () => {
    // The five copies must all arrive while the first is in flight: with a 100 ms app and a loaded
    // machine a late copy arrived after the first had failed and was (rightly) forwarded afresh.
    // So the app takes 1.5 s to fail, within a forward timeout of its own.
    await sidecar.close();
    sidecar = await startSidecar({ appUrl: app.url, forwardTimeoutMs: 5000, now: () => VECTOR_TS * 1000 });
    app.behaviour = { status: 500 };
    app.delayMs = 1500;
    const body = envelope({ id: 'evt_fail_many' });
    const replies = await Promise.all(Array.from({ length: 5 }, () => deliver(body, 'evt_fail_many')));
    expect(replies.map((r) => r.status)).toEqual(Array(5).fill(503));
    expect(app.received).toHaveLength(1);
  });
});

describe('app failure, then the service retries', () => {
  it.each([
    ['500', (a: FakeApp): void => { a.behaviour = { status: 500 }; }, 'status'],
    ['timeout', (a: FakeApp): void => { a.behaviour = 'hang'; }, 'timeout'],
    ['slow answer past the timeout', (a: FakeApp): void => { a.delayMs = 4000; }, 'timeout'],
  ] as const)('%s → 503, not accepted; retry → 200 once', async (_name, breakApp, cause) => {
    breakApp(app);
    const body = envelope({ id: 'evt_retry' });
    const first = await deliver(body, 'evt_retry');
    expect(first.status).toBe(503);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_forward_failures_total', { cause })).toBe(1);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'failed' })).toBe(1);

    app.behaviour = { status: 200 };
    app.delayMs = 0;
    const before = app.received.length;
    expect((await deliver(body, 'evt_retry')).status).toBe(200);
    expect((await deliver(body, 'evt_retry')).status).toBe(200);
    expect(app.received.length - before).toBe(1);
    expect(await metricValue(sidecar.registry, 'consent_sidecar_webhook_deliveries_total', { outcome: 'accepted' })).toBe(1);
  });

  it('connection refused → 503; once the app is up the retry is accepted once', async () => {
    // A port that was free a moment ago: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const down = await startSidecar({ appUrl: `http://127.0.0.1:${port}/hooks`, now: () => VECTOR_TS * 1000 });
    try {
      const body = envelope({ id: 'evt_refused' });
      expect((await deliver(body, 'evt_refused', down.url)).status).toBe(503);
      expect(await metricValue(down.registry, 'consent_sidecar_webhook_forward_failures_total', { cause: 'network' })).toBe(1);
    } finally {
      await down.close();
    }
  });

  it('2xx other than 200 counts as accepted', async () => {
    app.behaviour = { status: 202 };
    expect((await deliver(envelope({ id: 'evt_202' }), 'evt_202')).status).toBe(200);
  });

  it('a 3xx or 4xx from the app is not acceptance', async () => {
    app.behaviour = { status: 302 };
    expect((await deliver(envelope({ id: 'evt_302' }), 'evt_302')).status).toBe(503);
    app.behaviour = { status: 400 };
    expect((await deliver(envelope({ id: 'evt_302' }), 'evt_302')).status).toBe(503);
    expect(app.received).toHaveLength(2);
  });
});

describe('MemoryDedupStore', () => {
  it('claim / duplicate / in-flight / release', async () => {
    const store = new MemoryDedupStore({ retentionMs: 1000, maxEntries: 10 });
    const first = await store.claim('a');
    expect(first.kind).toBe('claimed');
    const second = await store.claim('a');
    expect(second.kind).toBe('in_flight');
    if (first.kind !== 'claimed' || second.kind !== 'in_flight') throw new Error('unreachable');
    await store.release('a', 'not-the-token');
    expect((await store.claim('a')).kind).toBe('in_flight');
    await store.release('a', first.token);
    expect(await second.outcome).toBe('released');
    const third = await store.claim('a');
    if (third.kind !== 'claimed') throw new Error('expected claimed');
    await store.markAccepted('a', third.token);
    expect((await store.claim('a')).kind).toBe('duplicate');
  });

  it('forgets accepted ids after the retention', async () => {
    let now = 0;
    const store = new MemoryDedupStore({ retentionMs: 1000, maxEntries: 10, now: () => now });
    const c = await store.claim('a');
    if (c.kind !== 'claimed') throw new Error('expected claimed');
    await store.markAccepted('a', c.token);
    now = 999;
    expect((await store.claim('a')).kind).toBe('duplicate');
    now = 1000;
    expect((await store.claim('a')).kind).toBe('claimed');
  });

  it('is bounded: the oldest accepted ids are forgotten first', async () => {
    const store = new MemoryDedupStore({ retentionMs: 60_000, maxEntries: 3 });
    for (const id of ['a', 'b', 'c', 'd']) {
      const c = await store.claim(id);
      if (c.kind !== 'claimed') throw new Error('expected claimed');
      await store.markAccepted(id, c.token);
    }
    expect(store.size).toBe(3);
    expect((await store.claim('b')).kind).toBe('duplicate');
    expect((await store.claim('a')).kind).toBe('claimed');
  });

  it('close wakes waiters', async () => {
    const store = new MemoryDedupStore({ retentionMs: 1000, maxEntries: 10 });
    await store.claim('a');
    const waiting = await store.claim('a');
    if (waiting.kind !== 'in_flight') throw new Error('expected in_flight');
    await store.close();
    expect(await waiting.outcome).toBe('released');
  });

  it('rejects nonsense options at construction', () => {
    expect(() => new MemoryDedupStore({ retentionMs: 0, maxEntries: 10 })).toThrow(RangeError);
    expect(() => new MemoryDedupStore({ retentionMs: 10, maxEntries: 0 })).toThrow(RangeError);
  });
});

describe('MemoryDedupStore claim tokens', () => {
  it('are never the same in two stores (SharedDedup hands them to Redis as the claim token of every replica)', async () => {
    const tokens = new Set<string>();
    for (let replica = 0; replica < 3; replica++) {
      const store = new MemoryDedupStore({ retentionMs: 60_000, maxEntries: 100 });
      for (let i = 0; i < 3; i++) {
        const claim = await store.claim(`evt_${i}`);
        expect(claim.kind).toBe('claimed');
        tokens.add((claim as { token: string }).token);
      }
    }
    expect(tokens.size).toBe(9);
  });

  it('a copy that comes while the first is in flight waits for its outcome, made only then', async () => {
    const store = new MemoryDedupStore({ retentionMs: 60_000, maxEntries: 100 });
    const first = (await store.claim('evt_x')) as { kind: 'claimed'; token: string };
    const [a, b] = [await store.claim('evt_x'), await store.claim('evt_x')];
    expect(a.kind).toBe('in_flight');
    expect(b.kind).toBe('in_flight');
    await store.markAccepted('evt_x', first.token);
    expect(await (a as { outcome: Promise<string> }).outcome).toBe('accepted');
    expect(await (b as { outcome: Promise<string> }).outcome).toBe('accepted');
    expect((await store.claim('evt_x')).kind).toBe('duplicate');
    // released with a wrong token: nothing happens; with its own: the waiters hear 'released'
    const again = (await store.claim('evt_y')) as { token: string };
    const waiter = (await store.claim('evt_y')) as { outcome: Promise<string> };
    await store.release('evt_y', 'not-its-token');
    await store.release('evt_y', again.token);
    expect(await waiter.outcome).toBe('released');
  });
});
