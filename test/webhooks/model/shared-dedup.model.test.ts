import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { useModelClock } from '../../helpers/stand-ins/clock.js';
import { modelCommand, weighted } from '../../helpers/stand-ins/model.js';
import type { Fate } from '../../helpers/stand-ins/wire.js';
import { DEADLINE_MS, DedupFleet, EVENT_IDS, FORWARD_TIMEOUT_MS, LEASE_MS } from './dedup-fleet.js';

/**
 * Shared dedup (passthrough) driven through random interleavings of deliveries to three replicas,
 * an app that accepts, refuses or holds, crashes, lease lapses (the injected clock moved on) and
 * store faults, against the model in {@link DedupFleet}. The real Redis tests
 * (test/redis/shared-dedup.test.ts) prove the adapter; these prove the policy.
 *
 * The strict run must find, within its runs, either rule of the policy taken out:
 * - a claim answered too late to leave its lease a whole forward, used anyway:
 *   `deliver(e to 0, its claim late 3900 ms), advance(5000), deliver(e to 1)` forwards twice at once;
 * - a claim whose reply was lost, taken as free (decided alone):
 *   `deliver(e to 0, its claim lost), advance(5000), deliver(e to 1)` forwards twice at once.
 */

interface Model {
  readonly fleet: DedupFleet;
}
type Cmd = fc.AsyncCommand<Model, DedupFleet>;

const command = (name: string, run: (f: DedupFleet) => void | Promise<void>, when: (f: DedupFleet) => boolean = () => true): Cmd =>
  modelCommand<DedupFleet, Model>(name, run, (m) => when(m.fleet));

const slot = fc.nat({ max: 2 });
const id = fc.constantFrom(...EVENT_IDS);
/** Steps that land on the boundaries that matter: the lease's slack, the forward timeout, the command deadline, the lease. */
const step = fc.constantFrom(10, 100, 500, 1000, LEASE_MS - FORWARD_TIMEOUT_MS, DEADLINE_MS, FORWARD_TIMEOUT_MS, LEASE_MS);

/** Faults through which the contract still promises at most one forward (slow is not down). */
const slowFate: fc.Arbitrary<Fate> = fc.oneof(
  // answered in time; answered too late to leave a whole forward of the lease; past the deadline
  { weight: 4, arbitrary: fc.constantFrom(100, LEASE_MS - FORWARD_TIMEOUT_MS + 500, DEADLINE_MS - 100, DEADLINE_MS + 500).map((delayMs) => ({ kind: 'late' as const, delayMs })) },
  fc.boolean().map((applied) => ({ kind: 'unknown' as const, applied })),
  fc.constant({ kind: 'lost' as const }),
  fc.constant({ kind: 'unsent' as const }),
);
const anyFate: fc.Arbitrary<Fate> = fc.oneof(slowFate, fc.constant({ kind: 'refused' as const }));

/** In a strict run the store is never silent for a lease (down is down: then each replica decides alone). */
const staysUnderLease = (f: DedupFleet, ms: number): boolean => {
  const since = f.wire.silentSince;
  return !f.strict || since === null || Date.now() + ms - since < LEASE_MS;
};

function commands(strict: boolean): fc.Arbitrary<Iterable<Cmd>> {
  const fate = strict ? slowFate : anyFate;
  const deliver = fc.tuple(slot, id).map(([s, e]) => command(`deliver(${e} to ${s})`, (f) => f.deliver(s, e)));
  const advance = step.map((ms) => command(`advance(${ms})`, (f) => f.clock.advance(ms), (f) => staysUnderLease(f, ms)));
  const fault = fc
    .tuple(slot, fc.constantFrom('claim', 'claim', 'claim', 'accept', 'accept', 'release', 'backfill', '*'), fate)
    .map(([s, op, x]) => command(`fault(${s}: next ${op} ${JSON.stringify(x)})`, (f) => f.replicas[s % f.replicas.length]!.link.next(x, op)));
  // A delivery whose own claim meets a fault: the interleavings that matter most, made likely.
  const deliverFaulty = fc
    .tuple(slot, id, fate)
    .map(([s, e, x]) => command(`deliver(${e} to ${s}, its claim ${JSON.stringify(x)})`, (f) => {
      f.replicas[s % f.replicas.length]!.link.next(x, 'claim');
      f.deliver(s, e);
    }));
  const thaw = fc.array(fc.nat(2), { maxLength: 4 }).map((order) => command(`store answers again (order ${order.join(',')})`, (f) => f.wire.thaw(order)));
  return fc.commands(
    [
      ...weighted(deliver, 8),
      ...weighted(deliverFaulty, 3),
      ...weighted(fault, 4),
      ...weighted(advance, 5),
      fc.constantFrom('accept', 'refuse', 'hold').map((m) => command(`app ${m}s`, (f) => void (f.app.mode = m))),
      ...weighted(fc.tuple(fc.constantFrom('accepted', 'refused'), fc.nat(3)).map(([how, i]) => command(`app answers open #${i} ${how}`, (f) => void f.app.answer(how, i))), 2),
      slot.map((s) => command(`lose next settlement to ${s}`, (f) => f.replicas[s % f.replicas.length]!.link.dropNext('dedup-settled'))),
      fc.constantFrom('freeze', 'down').map((how) => command(`store ${how === 'freeze' ? 'freezes' : 'down'}`, (f) => (how === 'freeze' ? f.wire.freeze() : f.wire.down()))),
      ...weighted(thaw, 2),
      slot.map((s) => command(`crash(${s})`, (f) => f.crash(s))),
    ],
    { size: '+1', maxCommands: 30 },
  );
}

async function run(strict: boolean, cmds: Iterable<Cmd>): Promise<void> {
  const clock = useModelClock();
  try {
    const fleet = new DedupFleet(clock, strict);
    await fleet.start(3);
    fleet.app.mode = 'hold';
    await fc.asyncModelRun(() => ({ model: { fleet }, real: fleet }), cmds);
    await fleet.drain();
    const found = await fleet.finalCheck();
    if (found.length > 0) throw new Error(found.join('\n'));
  } finally {
    clock.restore();
  }
}

describe('shared dedup, model-based', () => {
  it('through slow-store faults (late, lost, unknown, unsent, freezes and reordering under a lease): at most one forward at a time and one accepted per event, and no 200 the app does not hold', async () => {
    await fc.assert(fc.asyncProperty(commands(true), (cmds) => run(true, cmds)), { numRuns: 1500 });
  });

  it('through any fault (refusals, an outage past the lease): no 200 the app does not hold', async () => {
    await fc.assert(fc.asyncProperty(commands(false), (cmds) => run(false, cmds)), { numRuns: 60 });
  });

  it('the sizing leaves room for a claim answered too late to use', () => {
    expect(DEADLINE_MS).toBeGreaterThan(LEASE_MS - FORWARD_TIMEOUT_MS);
  });
});
