/**
 * Webhook ingress throughput: verified deliveries per second through a real `serve` process (default
 * log level, as a tenant runs it) forwarded to a loopback app, against a bare `node:http` handler
 * that only reads the body and checks the HMAC. Every server runs in its own process, and so does
 * the load generator (wrk, sending pre-signed deliveries from a file, each with a distinct event
 * id, so nothing is short-circuited by deduplication). Two streams: plain events, and a mixed
 * stream as a tenant sees it, where one event in four is a `consent_action.created` naming nobody
 * (each purges the whole ALLOW cache).
 *
 * Alone: `npm run build && node --import tsx test/bench/webhooks.ts` (BENCH_DURATION_S, BENCH_ROUNDS,
 * BENCH_CONNECTIONS).
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { closedLoop, compare, comparisonLines, freePort, LOAD_GENERATOR, startChild, stopChild, type Comparison, type LoadResult } from './lib.js';

const SELF = fileURLToPath(import.meta.url);
const CLI = process.env.BENCH_CLI ?? new URL('../../dist/cli.js', import.meta.url).pathname;
const BASELINES = new URL('./baselines.mjs', import.meta.url).pathname;
const SECRET = 'whsec_benchbenchbenchbenchbenchbench';
/** The padding of an ordinary event (about 400 bytes a body), and of a large one (4 KiB). */
const PAD = 200;
const LARGE_PAD = 4096;
/** Deliveries written per second of a run: more than the ingress can take here, so none repeats. */
const MAX_RATE = Number(process.env.BENCH_WEBHOOK_MAX_RATE ?? 40_000);

let fileSeq = 0;

/** A file of `count` signed deliveries with distinct ids (the format of lib.ts `requestFile`). */
function signedDeliveries(dir: string, count: number, mixed: boolean, padBytes = PAD): string {
  const pad = 'x'.repeat(padBytes);
  const tag = `${process.pid}_${Date.now()}_${fileSeq++}`;
  const ts = String(Math.floor(Date.now() / 1000));
  const lines: string[] = [];
  for (let n = 0; n < count; n++) {
    const id = `evt_${tag}_${n}`;
    const revokeAll = mixed && n % 4 === 3;
    const body = JSON.stringify(
      revokeAll
        ? { id, sequence: n + 1, type: 'consent_action.created', occurredAt: Date.now(), data: { action: 'updated' } }
        : { id, sequence: n + 1, type: 'redec.access.occurred', occurredAt: Date.now(), data: { pad } },
    );
    const sig = createHmac('sha256', SECRET).update(`${ts}.`).update(body).digest('hex');
    lines.push(`x-service-event-id: ${id}\tx-service-delivery-id: dlv_${tag}_${n}\tx-service-timestamp: ${ts}\tx-service-signature: v1=${sig}\t${body}`);
  }
  const file = join(dir, `deliveries-${tag}.txt`);
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

async function role(name: string, ...args: string[]) {
  const port = await freePort();
  const child = await startChild(process.execPath, [BASELINES, name, String(port), ...args], `http://127.0.0.1:${port}/ready`);
  return { child, port };
}

export async function benchWebhooks(o: { rounds: number; durationS: number; connections: number }): Promise<Comparison[]> {
  if (LOAD_GENERATOR !== 'wrk') {
    console.log('Webhooks: skipped, the pre-signed delivery stream needs wrk (apt-get install wrk)\n');
    return [];
  }
  const dir = mkdtempSync(join(tmpdir(), 'bench-webhooks-'));
  const stops: (() => Promise<void>)[] = [];
  try {
    const app = await role('app');
    stops.push(() => stopChild(app.child));
    const hmac = await role('hmac', SECRET);
    stops.push(() => stopChild(hmac.child));
    const hmacForward = await role('hmac-forward', SECRET, `http://127.0.0.1:${app.port}/hooks`);
    stops.push(() => stopChild(hmacForward.child));
    const up = await role('upstream', String(Date.now() + 3_600_000));
    stops.push(() => stopChild(up.child));
    const [port, admin, decision] = [await freePort(), await freePort(), await freePort()];
    const sidecar = await startChild(
      process.execPath,
      [
        CLI, 'serve',
        '--upstream-url', `http://127.0.0.1:${up.port}`, '--api-key', 'bench-key',
        '--listen', `127.0.0.1:${decision}`, '--admin-listen', `127.0.0.1:${admin}`, '--webhook-listen', `127.0.0.1:${port}`,
        '--app-webhook-url', `http://127.0.0.1:${app.port}/hooks`, '--webhook-secret', SECRET,
      ],
      `http://127.0.0.1:${admin}/readyz`,
    );
    stops.push(() => stopChild(sidecar));

    const run = (targetPort: number, mixed: boolean, durationS = o.durationS, padBytes = PAD) => async (): Promise<LoadResult> => {
      const dedups = targetPort === port;
      // Large bodies go through at a fraction of the rate: half the lines keeps the file smaller.
      const lines = (padBytes > PAD ? MAX_RATE / 2 : MAX_RATE) * durationS;
      const file = signedDeliveries(dir, lines, mixed, padBytes);
      try {
        const r = await closedLoop({ url: `http://127.0.0.1:${targetPort}/webhooks`, requestFile: file }, o.connections, durationS);
        if (dedups && r.total > lines) console.log(`  (warning: ${r.total - lines} deliveries repeated an id; raise BENCH_WEBHOOK_MAX_RATE)`);
        return r;
      } finally {
        rmSync(file, { force: true });
      }
    };
    await run(hmac.port, false, 1)();
    await run(hmacForward.port, false, 1)();
    await run(port, false, 1)();
    const out: Comparison[] = [];
    for (const mixed of [false, true]) {
      out.push(
        await compare({
          name: mixed
            ? 'Webhooks, mixed stream (1 in 4 a consent_action.created naming nobody): sidecar vs bare HMAC verifier'
            : 'Webhooks, verified and forwarded to the app: sidecar vs bare HMAC verifier',
          baselineName: 'bare HMAC verifier',
          subjectName: 'sidecar (verify, dedup, forward)',
          baseline: run(hmac.port, mixed),
          subject: run(port, mixed),
          baselinePids: [hmac.child.pid],
          subjectPids: [sidecar.pid],
          rounds: o.rounds,
          target: mixed ? 0.6 : undefined,
        }),
      );
    }
    // Like for like: a minimal verifier that also forwards each event to the app before it
    // answers, as the sidecar must (the bare verifier never makes that second HTTP exchange).
    out.push(
      await compare({
        name: 'Webhooks, mixed stream: sidecar vs a minimal node verifier that also forwards to the app (undici)',
        baselineName: 'node HMAC verifier + forward',
        subjectName: 'sidecar (verify, dedup, forward)',
        baseline: run(hmacForward.port, true),
        subject: run(port, true),
        baselinePids: [hmacForward.child.pid],
        subjectPids: [sidecar.pid],
        rounds: o.rounds,
        target: 0.9,
      }),
    );
    // The same with 4 KiB events: the sidecar parses each envelope and the baseline does not, so
    // if body size were what sets the ratio, it would fall here (measured 2026-11-26: it did not,
    // CPU per request 1.08 of the baseline's; docs/performance.md).
    out.push(
      await compare({
        name: 'Webhooks, mixed stream, 4 KiB events: sidecar vs a minimal node verifier that also forwards to the app (undici)',
        baselineName: 'node HMAC verifier + forward',
        subjectName: 'sidecar (verify, dedup, forward)',
        baseline: run(hmacForward.port, true, o.durationS, LARGE_PAD),
        subject: run(port, true, o.durationS, LARGE_PAD),
        baselinePids: [hmacForward.child.pid],
        subjectPids: [sidecar.pid],
        rounds: o.rounds,
      }),
    );
    return out;
  } finally {
    for (const s of stops.reverse()) await s();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === SELF) {
  const rs = await benchWebhooks({
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
    durationS: Number(process.env.BENCH_DURATION_S ?? 3),
    connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
  });
  for (const r of rs) console.log(`${comparisonLines(r).join('\n')}\n`);
  process.exit(0);
}
