import { describe, expect, it, vi } from 'vitest';
import { deadLetterBounds, listDeadLetters, replayDeadLetters, storeDelivery, type QueuedEvent } from '../../src/webhooks/index.js';
import { useTestRedis } from '../helpers/redis.js';
import { envelope, SECRET_A, sign, startApp } from '../helpers/webhooks.js';
import { count, queueReplica } from './room.js';

/**
 * What the queue reads back from Redis is bounded in age and size, and its marks (dead letter,
 * replay) are MACs a writer without the secrets cannot make.
 */
const fx = useTestRedis();
const { opened } = fx;
const BOUNDS = deadLetterBounds(1_048_576);

async function queue(prefix: string, appUrl: string, o: { horizonMs?: number; now?: () => number; visibilityMs?: number; forwardTimeoutMs?: number } = {}) {
  const { q, store, keys, registry } = await queueReplica(fx.redis.url, prefix, appUrl, { opened, secrets: [SECRET_A], commandTimeoutMs: 2000, ...o });
  const forwards = (outcome: string): Promise<number> => count(registry.getSingleMetric('consent_sidecar_webhook_queue_forwards_total') as never, { outcome });
  const mismatches = (marker: string): Promise<number> => count(registry.getSingleMetric('consent_sidecar_webhook_marker_mismatches_total') as never, { marker });
  return { q, store, keys, forwards, mismatches };
}

function signedAt(id: string, timestampS: number): QueuedEvent {
  const body = envelope({ id, type: 'test.event' });
  const timestamp = String(timestampS);
  return { facts: { eventId: id, timestamp, signature: sign(SECRET_A, timestamp, body) }, body };
}

const nowS = (): number => Math.floor(Date.now() / 1000);

describe('a replay is the operator re-authorising an event; only the secrets can mark one', () => {
  it('a stored delivery signed past the horizon plus the tolerance is dead-lettered as expired and never replayed: it cannot be told from a copy of a delivered event whose marker lapsed', async () => {
    const app = await startApp();
    opened.push(app);
    const p = `${fx.redis.prefix()}replay:`;
    const { q, store, keys, forwards } = await queue(p, app.url, { horizonMs: 1000 });
    // Signed 400 s ago: past 1 s of horizon plus 300 s of tolerance.
    const old = signedAt('evt_old_genuine', nowS() - 400);
    expect(await q.enqueue(old)).toBe('queued');
    await vi.waitFor(() => expect(forwards('expired')).resolves.toBe(1), { timeout: 10_000 });
    expect(app.received).toHaveLength(0);
    expect(await listDeadLetters(store, BOUNDS)).toEqual([expect.objectContaining({ id: 'evt_old_genuine', lastError: 'expired' })]);

    expect(await replayDeadLetters(store, { all: true }, [SECRET_A], Date.now(), BOUNDS)).toEqual({ replayed: [], notFound: [], notVerified: ['evt_old_genuine'], delivered: [] });
    // left where it was, nothing put back on the queue
    expect(await listDeadLetters(store, BOUNDS)).toEqual([expect.objectContaining({ id: 'evt_old_genuine', lastError: 'expired' })]);
    expect(await fx.admin.xLen(keys.events)).toBe(0);
    // the next event is delivered, and it alone
    expect(await q.enqueue(signedAt('evt_next', nowS()))).toBe('queued');
    await vi.waitFor(() => expect(forwards('delivered')).resolves.toBe(1), { timeout: 10_000 });
    expect(app.received.map((r) => r.headers['x-service-event-id'])).toEqual(['evt_next']);
  });

  it('a dead letter the app refused past the horizon is replayed and delivered however old its signature; the same entry with a forged replay mark is expired, counted', async () => {
    const app = await startApp();
    opened.push(app);
    app.behaviour = { status: 503 };
    const p = `${fx.redis.prefix()}refused:`;
    // The worker's clock, moved on below so the signature is older than the horizon plus the tolerance.
    let skewMs = 0;
    const { q, store, keys, forwards, mismatches } = await queue(p, app.url, { horizonMs: 1000, now: () => Date.now() + skewMs });
    expect(await q.enqueue(signedAt('evt_refused', nowS()))).toBe('queued');
    await vi.waitFor(() => expect(forwards('dead_lettered')).resolves.toBe(1), { timeout: 15_000 });
    expect(await listDeadLetters(store, BOUNDS)).toEqual([expect.objectContaining({ id: 'evt_refused', lastError: 'app answered 503' })]);

    skewMs = 400_000;
    app.behaviour = { status: 204 };
    expect(await replayDeadLetters(store, { all: true }, [SECRET_A], Date.now() + skewMs, BOUNDS)).toEqual({ replayed: ['evt_refused'], notFound: [], notVerified: [], delivered: [] });
    await vi.waitFor(() => expect(forwards('delivered')).resolves.toBe(1), { timeout: 10_000 });
    const refused = app.received.length;

    const event = signedAt('evt_old_forged', nowS());
    const forged = { ...storeDelivery(event.facts, event.body, Date.now() + skewMs), replayedAt: Date.now() + skewMs, replayMac: '0'.repeat(32) };
    await fx.admin.sendCommand(['XADD', keys.events, '*', 'e', JSON.stringify(forged)]);
    await vi.waitFor(() => expect(forwards('expired')).resolves.toBe(1), { timeout: 10_000 });
    expect(await mismatches('replay')).toBe(1);
    expect(app.received).toHaveLength(refused);
    expect(app.received.map((r) => r.headers['x-service-event-id'])).not.toContain('evt_old_forged');
  });

  it('a copy a writer added of a waiting event, parked for the app\'s refusals, is not replayed once the event was delivered: the delivered marker stands', async () => {
    const app = await startApp();
    opened.push(app);
    app.behaviour = { status: 503 };
    const p = `${fx.redis.prefix()}copied:`;
    const { q, store, keys, forwards } = await queue(p, app.url, { horizonMs: 60_000 });
    expect(await q.enqueue(signedAt('evt_copied', nowS()))).toBe('queued');
    // The writer copies the entry waiting for its next attempt, and adds it back as accepted long ago.
    let waiting = '';
    await vi.waitFor(async () => expect((waiting = (await fx.admin.zRange(keys.delayed, 0, 0))[0] ?? '')).not.toBe(''), { timeout: 10_000 });
    await fx.admin.sendCommand(['XADD', keys.events, '*', 'e', JSON.stringify({ ...JSON.parse(waiting), acceptedAt: 0 })]);
    await vi.waitFor(() => expect(forwards('dead_lettered')).resolves.toBe(1), { timeout: 15_000 });
    app.behaviour = { status: 204 };
    await vi.waitFor(() => expect(forwards('delivered')).resolves.toBe(1), { timeout: 30_000 });

    expect(await replayDeadLetters(store, { all: true }, [SECRET_A], Date.now(), BOUNDS)).toEqual({ replayed: [], notFound: [], notVerified: [], delivered: ['evt_copied'] });
    expect(await listDeadLetters(store, BOUNDS)).toEqual([expect.objectContaining({ id: 'evt_copied' })]);
    expect(await fx.admin.xLen(keys.events)).toBe(0);
  });

  it('a dead letter added to the stream by a writer (a genuine delivery, but no mark of ours) is never replayed', async () => {
    const app = await startApp();
    opened.push(app);
    const p = `${fx.redis.prefix()}unmarked:`;
    const { store, keys } = await queue(p, app.url);
    const event = signedAt('evt_unmarked', nowS());
    const dead = { ...storeDelivery(event.facts, event.body, Date.now()), lastError: 'app answered 500', deadAt: Date.now() };
    await fx.admin.sendCommand(['XADD', keys.dead, '*', 'e', JSON.stringify(dead)]);
    expect(await replayDeadLetters(store, { all: true }, [SECRET_A], Date.now(), BOUNDS)).toEqual({ replayed: [], notFound: [], notVerified: ['evt_unmarked'], delivered: [] });
  });
});

describe('a Redis writer cannot silence or multiply a queued event', () => {
  it('a dedup key of another type (HSET dedup:<id>) is no marker: the event is queued, not refused, delivered once, and the forgery counted', async () => {
    const app = await startApp();
    opened.push(app);
    const p = `${fx.redis.prefix()}wrongtype:`;
    const { q, keys, forwards, mismatches } = await queue(p, app.url);
    await fx.admin.hSet(keys.dedup('evt_hashed'), 'x', 'y');
    const event = signedAt('evt_hashed', nowS());
    expect(await q.enqueue(event)).toBe('queued');
    await vi.waitFor(() => expect(forwards('delivered')).resolves.toBe(1), { timeout: 10_000 });
    expect(app.received.map((r) => r.headers['x-service-event-id'])).toEqual(['evt_hashed']);
    expect(await mismatches('accepted')).toBe(1);
    // accepted now, with our marker: the service's retry is a duplicate
    expect(await q.enqueue(event)).toBe('duplicate');
  });

  it("a delivered marker and a forward claim of another type are no markers: the event is delivered, each counted, the claim taken over", async () => {
    const app = await startApp();
    opened.push(app);
    const p = `${fx.redis.prefix()}wrongtype2:`;
    const { q, keys, forwards, mismatches } = await queue(p, app.url);
    await fx.admin.hSet(keys.delivered('evt_hashed_marks'), 'x', 'y');
    await fx.admin.sendCommand(['LPUSH', keys.claim('evt_hashed_marks'), 'x']);
    expect(await q.enqueue(signedAt('evt_hashed_marks', nowS()))).toBe('queued');
    await vi.waitFor(() => expect(forwards('delivered')).resolves.toBe(1), { timeout: 10_000 });
    expect(app.received).toHaveLength(1);
    expect(await mismatches('delivered')).toBeGreaterThanOrEqual(1);
    expect(await mismatches('claim')).toBe(1);
  });

  it('a forward claim a writer set with more left than any lease, or none, is taken over at once; one a replica could hold delays the event, never silences it', async () => {
    const app = await startApp();
    opened.push(app);
    const p = `${fx.redis.prefix()}forgedclaim:`;
    const { q, keys, forwards, mismatches } = await queue(p, app.url, { visibilityMs: 2000, forwardTimeoutMs: 1000 });
    await fx.admin.sendCommand(['SET', keys.claim('evt_held_long'), 'forwarding:forged', 'PX', String(30 * 86_400_000)]);
    await fx.admin.sendCommand(['SET', keys.claim('evt_held_ever'), 'forwarding:forged']);
    await fx.admin.sendCommand(['SET', keys.claim('evt_held_lease'), 'forwarding:forged', 'PX', '2000']);
    for (const id of ['evt_held_long', 'evt_held_ever', 'evt_held_lease']) expect(await q.enqueue(signedAt(id, nowS()))).toBe('queued');
    await vi.waitFor(() => expect(forwards('delivered')).resolves.toBe(3), { timeout: 20_000 });
    expect(app.received.map((r) => r.headers['x-service-event-id']).sort()).toEqual(['evt_held_ever', 'evt_held_lease', 'evt_held_long']);
    expect(await mismatches('claim')).toBe(2);
    // the one a replica could hold was waited for: parked, not forwarded beside it
    expect(await forwards('in_flight')).toBeGreaterThanOrEqual(1);
  });

  it('40 copies of an event added while it is being forwarded, read by two replicas: the app gets it once, every copy dropped', async () => {
    const app = await startApp();
    opened.push(app);
    // Long enough to add the copies while the first forward is open, on a busy machine too.
    app.delayMs = 4000;
    const p = `${fx.redis.prefix()}copies:`;
    const o = { visibilityMs: 8000, forwardTimeoutMs: 6000 };
    const a = await queue(p, app.url, o);
    const b = await queue(p, app.url, o);
    const event = signedAt('evt_copied_40', nowS());
    expect(await a.q.enqueue(event)).toBe('queued');
    await vi.waitFor(() => expect(app.received).toHaveLength(1), { timeout: 10_000 });
    // What the ingress stored: any reader of Redis can keep it and add it back.
    const copy = JSON.stringify(storeDelivery(event.facts, event.body, Date.now()));
    for (let i = 0; i < 40; i++) await fx.admin.sendCommand(['XADD', a.keys.events, '*', 'e', copy]);
    // Each copy is read beside the open forward, waits for it (parked: identical copies park as
    // one), and is dropped once the event is delivered: the queue ends empty.
    const empty = async (): Promise<boolean> => (await fx.admin.xLen(a.keys.events)) === 0 && (await fx.admin.zCard(a.keys.delayed)) === 0;
    await vi.waitFor(() => expect(empty()).resolves.toBe(true), { timeout: 40_000, interval: 200 });
    expect(app.received).toHaveLength(1);
    expect((await a.forwards('delivered')) + (await b.forwards('delivered'))).toBe(1);
    expect((await a.forwards('in_flight')) + (await b.forwards('in_flight'))).toBeGreaterThanOrEqual(1);
    expect((await a.forwards('already_delivered')) + (await b.forwards('already_delivered'))).toBeGreaterThanOrEqual(1);
  }, 60_000);
});

describe('bounded reads', () => {
  it('a dead letter larger than a stored body can be is listed by its size, never read; the listing goes on past it', async () => {
    const app = await startApp();
    opened.push(app);
    const p = `${fx.redis.prefix()}bounded:`;
    const { store, keys } = await queue(p, app.url);
    const small = (id: string): string => JSON.stringify({ v: 2, id, timestamp: '1', signature: 'v1=00', body: '', acceptedAt: 1, attempts: 1, lastError: 'x', deadAt: 2 });
    await fx.admin.sendCommand(['XADD', keys.dead, '*', 'e', small('evt_before')]);
    await fx.admin.sendCommand(['XADD', keys.dead, '*', 'e', 'x'.repeat(3 * 1024 * 1024)]);
    await fx.admin.sendCommand(['XADD', keys.dead, '*', 'e', small('evt_after')]);
    const listed = await listDeadLetters(store, BOUNDS);
    expect(listed.map((d) => d.id)).toEqual(['evt_before', '', 'evt_after']);
    expect(listed[1]!.lastError).toMatch(/^oversized \(3145\d{3} bytes, not read\)$/);
  });
});
