import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { describe, expect, it, vi } from 'vitest';
import { useTestRedis } from '../helpers/redis.js';
import { callsOf, count, holdingPublishes, invalidationReplica, redisWithUser, single, type InvalidationReplicaOptions } from './room.js';

/**
 * A subscription proven up by an echo counts for the quiet poll (30 s), yet nothing tells a socket
 * that died silently (no RST: a conntrack flush, a NAT entry lost) from a quiet one: every nudge
 * published into it goes nowhere. The proof is kept fresh by a keep-alive echo, so a revocation
 * acknowledged elsewhere is applied within --fleet-invalidation-max-silence-ms (before: at the
 * next quiet poll, up to 30 s).
 */
const fx = useTestRedis();
const { opened } = fx;

const replica = (prefix: string, o: Omit<InvalidationReplicaOptions, 'opened' | 'prefix'> & { url?: string } = {}) => invalidationReplica(single(o.url ?? fx.redis.url), { ...o, prefix, opened });

interface Pair {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
  /** It sent SUBSCRIBE: the connection of a subscriber. */
  subscriber: boolean;
  /** Nothing passes either way, and nothing is closed: a path that died silently. */
  dead: boolean;
}

/**
 * A TCP proxy in the test process in front of `port`, through which a replica reaches Redis: any
 * of its connections can be made silently dead (bytes dropped both ways, no FIN, no RST), or cut.
 */
async function proxyTo(port: number) {
  const pairs: Pair[] = [];
  const server = net.createServer((client) => {
    const upstream = net.connect(port, '127.0.0.1');
    const pair: Pair = { client, upstream, subscriber: false, dead: false };
    pairs.push(pair);
    client.on('data', (d) => {
      if (/\r\nSUBSCRIBE\r\n/i.test(d.toString('latin1'))) pair.subscriber = true;
      if (!pair.dead) upstream.write(d);
    });
    upstream.on('data', (d) => {
      if (!pair.dead) client.write(d);
    });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    for (const s of [client, upstream]) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const proxyPort = (server.address() as net.AddressInfo).port;
  const close = async (): Promise<void> => {
    for (const p of pairs) {
      p.client.destroy();
      p.upstream.destroy();
    }
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  opened.push({ close });
  const open = (): Pair[] => pairs.filter((p) => !p.client.destroyed);
  return {
    port: proxyPort,
    open,
    /** Every open connection `which` picks dies silently; returns how many. */
    kill(which: (p: Pair) => boolean): number {
      const hit = open().filter(which);
      for (const p of hit) p.dead = true;
      return hit.length;
    },
    /** The dead connections are closed (as the kernel finally does): the clients reconnect, alive. */
    cutDead(): void {
      for (const p of pairs.filter((x) => x.dead)) {
        p.client.destroy();
        p.upstream.destroy();
      }
    },
  };
}

describe('a subscriber socket that dies silently', () => {
  it('a revocation acknowledged through another replica is applied within --fleet-invalidation-max-silence-ms, not at the quiet poll; the keep-alive costs one PUBLISH when nothing else was heard', async () => {
    const prefix = fx.redis.prefix();
    const proxy = await proxyTo(Number(new URL(fx.redis.url).port));
    // The default: an echo every 3 s when nothing else is heard, 1 s for it to come back.
    const maxSilenceMs = 5000;
    const a = await replica(prefix);
    // The quiet poll far away: only the keep-alive can tell.
    const r = await replica(prefix, { url: `redis://127.0.0.1:${proxy.port}`, maxSilenceMs, quietPollIntervalMs: 600_000 });
    await vi.waitFor(() => expect(count(r.metrics.subscribed)).resolves.toBe(1), { timeout: 10_000 });
    // Idle and proven, it keeps the proof with echoes alone (no read).
    const echoes0 = await echoesOf(r);
    const reads0 = await r.reads();
    await vi.waitFor(async () => expect((await echoesOf(r)) - echoes0).toBeGreaterThanOrEqual(2), { timeout: 20_000 });
    expect(await r.reads()).toBe(reads0);
    expect(await count(r.metrics.subscribed)).toBe(1);
    expect(await count(r.metrics.keepAliveMisses)).toBe(0);

    expect(proxy.kill((p) => p.subscriber)).toBe(1);
    await a.fleet.publish({ scope: 'user', userReference: 'revoked' });
    // Applied long before the quiet poll (600 s), by the read a missed keep-alive starts: the
    // mechanism that bounds it by the max silence (no wall-clock assertion: CI's machine is busy).
    await vi.waitFor(() => expect(r.rec.calls).toStrictEqual(['user:revoked']), { timeout: 20_000, interval: 20 });
    expect(await count(r.metrics.keepAliveMisses)).toBeGreaterThanOrEqual(1);
    expect(await count(r.metrics.subscribed)).toBe(0);
    // Its reads get through (only the subscriber is dead): the cache serves, and no purge.
    expect(r.trust.trusted).toBe(true);
    expect(await count(r.metrics.purges)).toBe(0);
  });

  it('both its connections dead, the read gets no answer: the subscription counts as carrying everything up to the last echo, not up to that failure, so once Redis answers but the log cannot be read the cache is bypassed at once', async () => {
    const { admin, url } = await redisWithUser('r', opened);
    const port = Number(new URL(url).port);
    const proxy = await proxyTo(port);
    const prefix = fx.redis.prefix();
    const maxSilenceMs = 3000;
    const quietPollIntervalMs = 1500;
    const a = await replica(prefix, { url: `redis://127.0.0.1:${port}` });
    // As the sidecar wires it (src/assembly/fleet.ts), scaled down; no keep-alive, so that the
    // failed read alone decides.
    const r = await replica(prefix, {
      url: `redis://r:r-password@127.0.0.1:${proxy.port}`,
      maxSilenceMs,
      quietPollIntervalMs,
      quietHealthIntervalMs: 2 * quietPollIntervalMs,
      healthIntervalMs: 1000,
      keepAliveMs: 600_000,
    });
    await vi.waitFor(() => expect(count(r.metrics.subscribed)).resolves.toBe(1), { timeout: 10_000 });
    expect(proxy.kill(() => true)).toBe(2);
    await a.fleet.publish({ scope: 'user', userReference: 'revoked' });
    // The quiet read gets no answer (its deadline, 2 s).
    await vi.waitFor(() => expect(count(r.metrics.readFailures, { kind: 'no_answer' })).resolves.toBeGreaterThanOrEqual(1), { timeout: 20_000, interval: 20 });
    expect(r.trust.trusted).toBe(true);
    // Redis answers again, but r may not read the log.
    await admin.sendCommand(['ACL', 'SETUSER', 'r', '-xinfo']);
    proxy.cutDead();
    await vi.waitFor(() => expect(count(r.metrics.readFailures, { kind: 'refused' })).resolves.toBeGreaterThanOrEqual(1), { timeout: 20_000, interval: 5 });
    // The first refused read bypassed the cache: r last knew it had everything at its last echo,
    // more than the max silence ago (before: it counted from the failed read, and served on).
    expect(r.trust.trusted).toBe(false);
    expect(r.rec.calls).toStrictEqual([]);
    await admin.sendCommand(['ACL', 'SETUSER', 'r', '+xinfo']);
    await vi.waitFor(() => expect(r.trust.trusted).toBe(true), { timeout: 10_000 });
    expect(r.rec.calls).toStrictEqual(['user:revoked']);
  });
});

describe('a verified nudge that shows a gap', () => {
  it('its previous entry never announced, the read that follows getting no answer: its revocation is applied all the same, and the read applies only what it missed once it gets through', async () => {
    const prefix = fx.redis.prefix();
    const proxy = await proxyTo(Number(new URL(fx.redis.url).port));
    const publishes = holdingPublishes();
    const a = await replica(prefix, { through: publishes.through });
    const r = await replica(prefix, { url: `redis://127.0.0.1:${proxy.port}`, quietPollIntervalMs: 600_000 });
    await vi.waitFor(() => expect(count(r.metrics.subscribed)).resolves.toBe(1), { timeout: 10_000 });
    // An appender fails between its append and its publish (answered 503): the entry is in the log, unannounced.
    const lost = a.fleet.publish({ scope: 'user', userReference: 'unannounced' });
    await vi.waitFor(() => expect(publishes.held).toHaveLength(1), { timeout: 10_000 });
    publishes.held[0]!.drop();
    await expect(lost).rejects.toThrow();
    // r's command connection dies silently; its subscriber lives.
    expect(proxy.kill((p) => !p.subscriber)).toBe(1);
    const next = a.fleet.publish({ scope: 'user', userReference: 'next' });
    await vi.waitFor(() => expect(publishes.held).toHaveLength(2), { timeout: 10_000 });
    publishes.held[1]!.send();
    await next;
    // Held for the grace, then the read, which gets no answer: the revocation r holds, verified, is applied.
    await vi.waitFor(() => expect(r.rec.calls).toStrictEqual(['user:next']), { timeout: 10_000, interval: 20 });
    expect(await count(r.metrics.readFailures, { kind: 'no_answer' })).toBeGreaterThanOrEqual(1);
    expect(await count(r.metrics.nudges, { outcome: 'gap' })).toBe(1);
    // The connection is closed at last: r reconnects and reads what it missed, not again what it applied.
    proxy.cutDead();
    await vi.waitFor(() => expect(r.rec.calls).toStrictEqual(['user:next', 'user:unannounced']), { timeout: 10_000 });
    expect(await count(r.metrics.purges)).toBe(0);
    await vi.waitFor(() => expect(count(r.metrics.subscribed)).resolves.toBe(1), { timeout: 10_000 });
    expect(r.rec.calls).toStrictEqual(['user:next', 'user:unannounced']);
  });
});

const echoesOf = (r: { redisMetrics: Parameters<typeof callsOf>[0] }): Promise<number> => callsOf(r.redisMetrics, 'invalidate_echo');
