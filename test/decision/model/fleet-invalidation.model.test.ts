import fc from 'fast-check';
import { describe, it } from 'vitest';
import { CacheTrust, createInvalidationMetrics, FleetInvalidation } from '../../../src/decision/index.js';
import type { Revocation, RevocationHook } from '../../../src/lib/revocation-hook.js';
import { createRegistry, silentLogger } from '../../../src/observability/index.js';
import { useModelClock, type ModelClock } from '../../helpers/stand-ins/clock.js';
import { APPENDED, StandInInvalidationLog, standInMacs } from '../../helpers/stand-ins/invalidation-log.js';
import { modelCommand, weighted } from '../../helpers/stand-ins/model.js';
import { Wire, type Fate, type Link } from '../../helpers/stand-ins/wire.js';

/**
 * Fleet invalidation driven through random interleavings of cached ALLOWs, revocations published
 * by three replicas, nudges lost, reordered, forged or replayed, subscriptions cut, store faults
 * (late, lost, unknown, refused and unsent replies, freezes and reordered calls, an entry appended
 * whose nudge is never published) and a log that loses entries (trimmed, deleted, restarted empty)
 * or has them rewritten in place,
 * against a model of what each replica knows. The real Redis tests (test/redis/invalidation-*.test.ts)
 * prove the adapter; this proves the policy: once a replica was answered a page of the log written
 * after a revocation, it serves no cached ALLOW that revocation took away (it applied it, or it
 * purged everything, or its cache is bypassed).
 */

const USERS = ['u1', 'u2', 'u3'] as const;
const MAX_SILENCE_MS = 3000;
/** The quiet poll, shorter than the default so a run ends sooner; a nudge lost in silence is found by it at the latest. */
const QUIET_POLL_MS = 5000;

interface Replica {
  readonly link: Link;
  readonly cache: Set<string>;
  readonly trust: CacheTrust;
  readonly fleet: FleetInvalidation;
  /** Revocations this replica read past (a page it was answered, read after they were appended). */
  readonly known: Set<string>;
}

class Fleet {
  readonly wire = new Wire({ deadlineMs: 2000 });
  readonly log = new StandInInvalidationLog(this.wire, (link, revoked) => this.read(link, revoked));
  readonly replicas: Replica[] = [];
  /** Users whose consent is revoked at the source: the upstream answers DENY for them from then on. */
  readonly revoked = new Set<string>();
  readonly violations: string[] = [];
  private spawned = 0;

  constructor(readonly clock: ModelClock) {}

  async start(n: number): Promise<void> {
    for (let i = 0; i < n; i++) this.replicas.push(await this.spawn());
  }

  /** The replica in `slot` caches an ALLOW for `user` (only while the source still allows it). */
  cache(slot: number, user: string): void {
    if (!this.revoked.has(user)) this.at(slot).cache.add(user);
  }

  /** The source revokes `user`; the replica in `slot` hears it (its webhook) and publishes it. */
  revoke(slot: number, user: string): void {
    this.revoked.add(user);
    void this.at(slot).fleet.publish({ scope: 'user', userReference: user }).catch(() => undefined);
  }

  at(slot: number): Replica {
    return this.replicas[slot % this.replicas.length]!;
  }

  /** No replica that trusts its cache holds an ALLOW of a user whose revocation it read past. */
  check(): void {
    for (const [i, r] of this.replicas.entries()) {
      if (!r.trust.trusted) continue;
      for (const user of r.cache) if (r.known.has(user)) this.violations.push(`replica ${i} serves a cached ALLOW of ${user} after reading past its revocation (at ${Date.now()})`);
    }
  }

  private read(link: Link, revoked: readonly Revocation[]): void {
    const r = this.replicas.find((x) => x.link === link);
    if (r) for (const v of revoked) if (v.scope === 'user') r.known.add(v.userReference);
  }

  private async spawn(): Promise<Replica> {
    const link = this.wire.link(`r${this.spawned++}`);
    const cache = new Set<string>();
    const local: RevocationHook = {
      revokeUser: (user) => Number(cache.delete(user)),
      revokeAll: () => {
        const n = cache.size;
        cache.clear();
        return n;
      },
    };
    const trust = new CacheTrust();
    const fleet = new FleetInvalidation({
      log: this.log.connect(link),
      local,
      macs: standInMacs,
      metrics: createInvalidationMetrics(createRegistry({ defaultMetrics: false })),
      logger: silentLogger(),
      maxSilenceMs: MAX_SILENCE_MS,
      trust,
      quietPollIntervalMs: QUIET_POLL_MS,
      now: Date.now,
    });
    const r: Replica = { link, cache, trust, fleet, known: new Set() };
    this.replicas.push(r);
    await fleet.start();
    this.replicas.pop();
    return r;
  }

  stop(): void {
    for (const r of this.replicas) r.fleet.close();
  }
}

type Cmd = fc.AsyncCommand<object, Fleet>;

const command = (name: string, run: (f: Fleet) => void | Promise<void>): Cmd => modelCommand(name, run);

const slot = fc.nat({ max: 2 });
const user = fc.constantFrom(...USERS);
const fate: fc.Arbitrary<Fate> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(100, 1500, 2500).map((delayMs) => ({ kind: 'late' as const, delayMs })) },
  fc.boolean().map((applied) => ({ kind: 'unknown' as const, applied })),
  fc.constant({ kind: 'lost' as const }),
  fc.constant({ kind: 'refused' as const }),
  fc.constant({ kind: 'unsent' as const }),
);

function commands(): fc.Arbitrary<Iterable<Cmd>> {
  return fc.commands(
    [
      ...weighted(fc.tuple(slot, user).map(([s, u]) => command(`cache(${u} at ${s})`, (f) => f.cache(s, u))), 5),
      ...weighted(fc.tuple(slot, user).map(([s, u]) => command(`revoke(${u} at ${s})`, (f) => f.revoke(s, u))), 4),
      ...weighted(fc.constantFrom(10, 500, 1000, 2000, MAX_SILENCE_MS, 5000).map((ms) => command(`advance(${ms})`, (f) => f.clock.advance(ms))), 5),
      ...weighted(
        fc.tuple(slot, fc.constantFrom('readAfter', 'readSince', 'append', 'publish', '*'), fate).map(([s, op, x]) => command(`fault(${s}: next ${op} ${JSON.stringify(x)})`, (f) => f.at(s).link.next(x, op))),
        4,
      ),
      slot.map((s) => command(`lose next nudge to ${s}`, (f) => f.at(s).link.dropNext(APPENDED))),
      slot.map((s) => command(`next two nudges to ${s} swapped`, (f) => f.at(s).link.swapNext(APPENDED))),
      slot.map((s) => command(`subscription of ${s} cut`, (f) => f.at(s).link.cut())),
      slot.map((s) => command(`subscription of ${s} back`, (f) => f.at(s).link.rejoin())),
      fc.tuple(user, fc.nat(5), fc.nat(5)).map(([u, id, previous]) =>
        command(`forged nudge (${u} at ${id + 1} after ${previous})`, (f) => f.wire.publish(APPENDED, { entry: { id: String(id + 1), previous: String(previous), origin: 'writer', revocation: { scope: 'user', userReference: u }, chain: 'forged' } })),
      ),
      fc.nat(5).map((i) =>
        command(`nudge #${i} published again`, (f) => {
          if (f.log.published.length > 0) f.wire.publish(APPENDED, f.log.published[i % f.log.published.length]);
        }),
      ),
      fc.nat(3).map((n) => command(`trim(${n + 1})`, (f) => f.log.trim(n + 1))),
      fc.nat(3).map((i) => command(`delete entry #${i}`, (f) => f.log.remove(i))),
      fc.nat(3).map((i) => command(`rewrite entry #${i}`, (f) => f.log.rewrite(i))),
      fc.constant(command('store restarts empty', (f) => f.log.restartEmpty())),
      fc.constantFrom('freeze', 'down').map((how) => command(`store ${how === 'freeze' ? 'freezes' : 'down'}`, (f) => (how === 'freeze' ? f.wire.freeze() : f.wire.down()))),
      fc.array(fc.nat(2), { maxLength: 4 }).map((order) => command(`store answers again (order ${order.join(',')})`, (f) => f.wire.thaw(order))),
    ],
    { size: '+1', maxCommands: 30 },
  );
}

async function run(cmds: Iterable<Cmd>): Promise<void> {
  const clock = useModelClock();
  const fleet = new Fleet(clock);
  try {
    await fleet.start(3);
    await fc.asyncModelRun(() => ({ model: {}, real: fleet }), cmds);
    // Once the store answers and the reads in flight have ended (a deadline, a poll, a late reply), every replica has read past every revocation.
    fleet.wire.thaw();
    for (let i = 0; i < 10; i++) await clock.advance(1000);
    fleet.check();
    for (const [i, r] of fleet.replicas.entries()) for (const u of fleet.log.appended) if (u.scope === 'user' && r.trust.trusted && r.cache.has(u.userReference) && fleet.revoked.has(u.userReference)) fleet.violations.push(`replica ${i} still serves ${u.userReference} after the store came back`);
    if (fleet.violations.length > 0) throw new Error(fleet.violations.join('\n'));
  } finally {
    fleet.stop();
    clock.restore();
  }
}

describe('fleet invalidation, model-based', () => {
  it('a revocation deleted from the log before a replica read it (its nudge lost) purges that replica all the same', async () => {
    await run([
      command('cache(u1 at 1)', (f) => f.cache(1, 'u1')),
      command('lose next nudge to 1', (f) => f.at(1).link.dropNext(APPENDED)),
      command('revoke(u1 at 0)', (f) => f.revoke(0, 'u1')),
      command('delete entry #0', (f) => f.log.remove(0)),
      command('advance(2000)', (f) => f.clock.advance(2000)),
    ]);
  });

  it("a revocation rewritten in place before a replica read it (another entry's fields and MAC on its id) purges that replica all the same", async () => {
    await run([
      command('revoke(u2 at 0)', (f) => f.revoke(0, 'u2')),
      command('advance(2000)', (f) => f.clock.advance(2000)),
      command('cache(u1 at 1)', (f) => f.cache(1, 'u1')),
      command('lose next nudge to 1', (f) => f.at(1).link.dropNext(APPENDED)),
      command('revoke(u1 at 0)', (f) => f.revoke(0, 'u1')),
      command('rewrite entry #1', (f) => f.log.rewrite(1)),
      command('advance(2000)', (f) => f.clock.advance(2000)),
    ]);
  });

  it('through store faults, lost nudges and a log that loses entries or has them rewritten: no cached ALLOW served once its revocation was read past', async () => {
    await fc.assert(fc.asyncProperty(commands(), run), { numRuns: 300 });
  });
});
