import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { deliver, RecordingApp, replicaFlags, ServeProcess, signedEvent } from '../helpers/serve-process.js';

/**
 * A rolling update that adds a route (contract, Webhooks: nothing acknowledged is dropped because
 * replicas differ), with two real `serve` processes on one real Redis and a real app: the old
 * replica routes `consent_action.*` only, the new one `newtype.*` too, neither has a default. The
 * service is played here: every event is delivered to a running replica, and whatever is not
 * answered 2xx is delivered again (to the next replica) until it is, as the service retries.
 *
 * The rollout: the old replica alone, then both, then the new one alone (the old one stopped).
 * Every event the service got a 200 for must reach the app. Before, the old replica answered
 * passthrough deliveries 200 `unrouted` and its queue worker dropped queued ones as `unrouted`.
 */
const EVENTS = 200;
let redis: TestRedis;
let upstream: ScriptedUpstream;
const running: ServeProcess[] = [];
let app: RecordingApp;

beforeAll(async () => {
  redis = await getTestRedis();
  upstream = await startUpstream({ body: {} });
}, 60_000);

afterEach(async () => {
  await Promise.allSettled(running.splice(0).map((r) => r.stop()));
  await app?.down();
});

afterAll(async () => {
  await upstream?.close();
  await redis?.stop();
});

/** One replica of the fleet: `consent_action.*` to the app, and `newtype.*` too when `updated`; no default. */
async function replica(mode: 'passthrough' | 'queue', prefix: string, updated: boolean): Promise<ServeProcess> {
  const flags = replicaFlags({
    upstreamUrl: upstream.url,
    apiKey: 'k',
    appUrl: '',
    redisUrl: redis.url,
    prefix,
    extra: { 'redec-reconcile-interval-ms': '0', 'webhook-delivery': mode },
  });
  delete flags['app-webhook-url'];
  const routes = [`consent_action.*=${app.url}`, ...(updated ? [`newtype.*=${app.url}`] : [])];
  const r = new ServeProcess(flags, { CONSENT_SIDECAR_APP_WEBHOOK_ROUTE: routes.join('\n') });
  await r.start();
  running.push(r);
  return r;
}

/**
 * The service: delivers each event to `fleet()` in turn, and each one not answered 2xx again to the
 * next replica, round after round, until `settled()` (the retry schedule's backoff is not played: a
 * round is a retry). Returns the events answered 200, and what each delivery was answered.
 */
class Service {
  readonly acknowledged = new Set<string>();
  readonly answers = new Map<string, number>();
  private turn = 0;
  private readonly waiting: { id: string; seq: number; type: string }[] = [];

  constructor(private readonly fleet: () => ServeProcess[]) {}

  /** Sends new events, each once (those refused wait for {@link retry}). */
  async send(events: readonly { id: string; seq: number; type: string }[]): Promise<void> {
    await this.deliverAll(events);
  }

  /** One retry round of every event not answered 2xx yet; resolves to how many still wait. */
  async retry(): Promise<number> {
    await this.deliverAll(this.waiting.splice(0));
    return this.waiting.length;
  }

  private async deliverAll(events: readonly { id: string; seq: number; type: string }[]): Promise<void> {
    const batch = 10;
    for (let i = 0; i < events.length; i += batch) {
      await Promise.all(
        events.slice(i, i + batch).map(async (e) => {
          const replicas = this.fleet();
          const to = replicas[this.turn++ % replicas.length]!;
          const answer: { status: number; body: Record<string, unknown> } = await deliver(to, signedEvent(e.id, e.seq, e.type)).catch(() => ({ status: 0, body: {} }));
          const key = `${answer.status} ${String(answer.body.status ?? answer.body.error ?? '')}`;
          this.answers.set(key, (this.answers.get(key) ?? 0) + 1);
          if (answer.status === 200) this.acknowledged.add(e.id);
          else this.waiting.push(e);
        }),
      );
    }
  }
}

describe.each(['passthrough', 'queue'] as const)('a rolling update that adds a route, %s mode', (mode) => {
  it(`loses none of ${EVENTS} acknowledged events: every 200 reaches the app, the others are retried until a replica that routes them takes them`, async () => {
    app = new RecordingApp();
    await app.up();
    const prefix = redis.prefix();
    const events = Array.from({ length: EVENTS }, (_, i) => ({ id: `evt_roll_${mode}_${i}`, seq: i + 1, type: i % 10 === 9 ? 'consent_action.created' : 'newtype.created' }));
    const third = Math.floor(EVENTS / 3);

    // The old replica alone.
    const old = await replica(mode, prefix, false);
    let fleet = [old];
    const service = new Service(() => fleet);
    await service.send(events.slice(0, third));
    const routedByOld = events.slice(0, third).filter((e) => e.type === 'consent_action.created').map((e) => e.id);
    if (mode === 'passthrough') {
      expect([...service.acknowledged].sort()).toEqual(routedByOld.sort());
    } else {
      // Its worker takes the entries it cannot route, and keeps them in the queue.
      await expect.poll(() => old.metric('consent_sidecar_webhook_queue_forwards_total', { outcome: 'awaiting_route' }), { timeout: 30_000 }).toBeGreaterThan(0);
    }
    // The new replica joins; events and retries go to both.
    const updated = await replica(mode, prefix, true);
    fleet = [old, updated];
    await service.send(events.slice(third, 2 * third));
    await service.retry();
    // The old one is stopped; the new one is alone.
    await old.stop();
    fleet = [updated];
    await service.send(events.slice(2 * third));
    await expect.poll(() => service.retry(), { timeout: 60_000, interval: 200 }).toBe(0);

    expect(service.acknowledged.size).toBe(EVENTS);
    const lost = (): string[] => [...service.acknowledged].filter((id) => app.accepted(id) === 0);
    await expect.poll(lost, { timeout: 60_000, interval: 200 }).toEqual([]);
    // Never acknowledged and forgotten: passthrough refused what the old replica could not route.
    if (mode === 'passthrough') {
      expect(service.answers.get('503 unrouted') ?? 0).toBeGreaterThan(0);
    } else {
      expect([...service.answers.keys()].sort()).toEqual(['200 queued']);
      expect(await updated.metric('consent_sidecar_webhook_queue_forwards_total', { outcome: 'unrouted' })).toBe(0);
    }
  }, 180_000);
});
