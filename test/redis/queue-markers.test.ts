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

async function queue(prefix: string, appUrl: string, o: { horizonMs?: number } = {}) {
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
  it('a genuine dead letter signed past the horizon plus the tolerance is replayed and delivered; the same entry with a forged replay mark is expired, counted', async () => {
    const app = await startApp();
    opened.push(app);
    const p = `${fx.redis.prefix()}replay:`;
    const { q, store, keys, forwards, mismatches } = await queue(p, app.url, { horizonMs: 1000 });
    // Signed 400 s ago: past 1 s of horizon plus 300 s of tolerance.
    const old = signedAt('evt_old_genuine', nowS() - 400);
    expect(await q.enqueue(old)).toBe('queued');
    await vi.waitFor(() => expect(forwards('expired')).resolves.toBe(1), { timeout: 10_000 });
    expect(app.received).toHaveLength(0);
    expect(await listDeadLetters(store, BOUNDS)).toEqual([expect.objectContaining({ id: 'evt_old_genuine', lastError: 'expired' })]);

    expect(await replayDeadLetters(store, { all: true }, [SECRET_A], Date.now(), BOUNDS)).toEqual({ replayed: ['evt_old_genuine'], notFound: [], notVerified: [] });
    await vi.waitFor(() => expect(app.received.map((r) => r.headers['x-service-event-id'])).toEqual(['evt_old_genuine']), { timeout: 10_000 });

    const forged = { ...storeDelivery(signedAt('evt_old_forged', nowS() - 400).facts, signedAt('evt_old_forged', nowS() - 400).body, Date.now()), replayedAt: Date.now(), replayMac: '0'.repeat(32) };
    await fx.admin.sendCommand(['XADD', keys.events, '*', 'e', JSON.stringify(forged)]);
    await vi.waitFor(() => expect(forwards('expired')).resolves.toBe(2), { timeout: 10_000 });
    expect(await mismatches('replay')).toBe(1);
    expect(app.received).toHaveLength(1);
  });

  it('a dead letter added to the stream by a writer (a genuine delivery, but no mark of ours) is never replayed', async () => {
    const app = await startApp();
    opened.push(app);
    const p = `${fx.redis.prefix()}unmarked:`;
    const { store, keys } = await queue(p, app.url);
    const event = signedAt('evt_unmarked', nowS());
    const dead = { ...storeDelivery(event.facts, event.body, Date.now()), lastError: 'app answered 500', deadAt: Date.now() };
    await fx.admin.sendCommand(['XADD', keys.dead, '*', 'e', JSON.stringify(dead)]);
    expect(await replayDeadLetters(store, { all: true }, [SECRET_A], Date.now(), BOUNDS)).toEqual({ replayed: [], notFound: [], notVerified: ['evt_unmarked'] });
  });
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
