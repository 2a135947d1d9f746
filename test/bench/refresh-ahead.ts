import { Client, request } from 'undici';
import { freePort, rawLoad, startChild, stopChild, type RateResult } from './lib.js';

/**
 * Refresh-ahead (issue 23): one hot key whose ALLOW lives `lifeMs` (5 s), at a fixed rate (2,000
 * req/s) for `durationS` (30 s), open loop from a generator in its own process, against three
 * sidecars in turn, each in its own process, each with its own upstream process:
 *
 * - **never expires**: the key's ALLOW lives an hour (the cold-cache-free reference);
 * - **refresh-ahead**: the 5 s ALLOW with `--cache-refresh-ahead-ms` (1 s);
 * - **no refresh**: the 5 s ALLOW without it (every death is a miss, and every request for the
 *   key in that window waits for it).
 *
 * Reports, for each: p50/p99/max, the answers that waited for the service during the run
 * (decisions_total{source="upstream"}; the key's first miss is made before the run) and the
 * service's calls per second.
 */
export interface RefreshRow {
  readonly name: string;
  readonly load: RateResult;
  readonly upstreamAnswers: number;
  readonly upstreamCalls: number;
  readonly callsPerS: number;
  readonly refreshes: number;
  /** After the run, the service turned to DENY (refresh-ahead only): how fast the client saw it. */
  readonly deny?: DenyOnRefresh;
}

/**
 * The service says DENY from some moment on; one client in the bench process asks again and again,
 * one request at a time, until it is answered DENY. A count and two instants, not a speed.
 */
export interface DenyOnRefresh {
  /** From the service writing its first DENY (a refresh's answer) to the client's first DENY (ms). */
  readonly firstDenyAfterMs: number;
  /** ALLOWs answered to requests sent after the service wrote that DENY (at most those in its round trip). */
  readonly allowsSentAfterDeny: number;
  /** Checks the client made before the first DENY (each answered ALLOW from the cache). */
  readonly checksBefore: number;
  /** Whether every answer before the first DENY came from the cache. */
  readonly allFromCache: boolean;
}

const nowMs = (): number => performance.timeOrigin + performance.now();

async function denyOnRefresh(port: number, upPort: number, lifeMs: number): Promise<DenyOnRefresh> {
  await (await request(`http://127.0.0.1:${upPort}/deny`, { method: 'POST', body: '' })).body.text();
  const client = new Client(`http://127.0.0.1:${port}`);
  const answers: { sentAt: number; decision: string | undefined; source: string | undefined }[] = [];
  try {
    // The entry dies within `lifeMs`; its refresh comes before. Bounded: twice the life.
    for (const until = nowMs() + 2 * lifeMs; nowMs() < until; ) {
      const sentAt = nowMs();
      const r = await client.request({ path: CHECK, method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } });
      const json = (await r.body.json()) as { decision?: string };
      const source = r.headers['x-consent-decision-source'];
      answers.push({ sentAt, decision: json.decision, source: typeof source === 'string' ? source : undefined });
      if (json.decision === 'DENY') break;
    }
  } finally {
    await client.close();
  }
  const firstDenyAt = JSON.parse(await (await request(`http://127.0.0.1:${upPort}/first-deny`)).body.text()) as number | null;
  const firstDeny = answers.findIndex((a) => a.decision !== 'ALLOW');
  if (answers[firstDeny]?.decision !== undefined && answers[firstDeny]?.decision !== 'DENY') throw new Error(`refresh-ahead bench: neither ALLOW nor DENY: ${JSON.stringify(answers[firstDeny])}`);
  if (firstDenyAt === null || firstDeny < 0) throw new Error(`refresh-ahead bench: no DENY reached the client within ${2 * lifeMs} ms of the service turning to DENY (service DENY at ${firstDenyAt}, ${answers.length} answers, last ${JSON.stringify(answers.at(-1))})`);
  const before = answers.slice(0, firstDeny);
  return {
    firstDenyAfterMs: answers[firstDeny]!.sentAt - firstDenyAt,
    allowsSentAfterDeny: before.filter((a) => a.sentAt > firstDenyAt).length,
    checksBefore: before.length,
    allFromCache: before.every((a) => a.source === 'cache'),
  };
}

const BASELINES = new URL('./baselines.mjs', import.meta.url).pathname;
const CHECK = '/v1/authorization/check';
const BODY = JSON.stringify({ userReference: 'hot-user', configKey: 'marketing-email' });

async function metricSum(adminUrl: string, name: string, label = ''): Promise<number> {
  const text = await (await request(`${adminUrl}/metrics`)).body.text();
  let sum = 0;
  for (const line of text.split('\n')) if (line.startsWith(name) && line.includes(label)) sum += Number(line.split(' ').pop());
  return sum;
}

async function one(cli: string, name: string, lifeMs: number, extra: string[], o: { rate: number; durationS: number; connections: number }, thenDeny = false): Promise<RefreshRow> {
  const upPort = await freePort();
  const up = await startChild(process.execPath, [BASELINES, 'upstream-ttl', String(upPort), String(lifeMs)], `http://127.0.0.1:${upPort}/ready`);
  const [port, admin] = [await freePort(), await freePort()];
  const s = await startChild(
    process.execPath,
    [cli, 'serve', '--upstream-url', `http://127.0.0.1:${upPort}`, '--api-key', 'bench', '--api-key-check', 'off', '--listen', `127.0.0.1:${port}`, '--admin-listen', `127.0.0.1:${admin}`, '--log-level', 'warn', ...extra],
    `http://127.0.0.1:${admin}/readyz`,
  );
  try {
    const adminUrl = `http://127.0.0.1:${admin}`;
    // One check first: the key's first miss is not part of the run.
    await (await request(`http://127.0.0.1:${port}${CHECK}`, { method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } })).body.text();
    const before = await metricSum(adminUrl, 'consent_sidecar_decisions_total', 'source="upstream"');
    const callsBefore = Number(await (await request(`http://127.0.0.1:${upPort}/calls`)).body.text());
    const load = await rawLoad({ url: `http://127.0.0.1:${port}${CHECK}`, bodies: [BODY], rate: o.rate, durationS: o.durationS, connections: o.connections });
    const upstreamAnswers = (await metricSum(adminUrl, 'consent_sidecar_decisions_total', 'source="upstream"')) - before;
    const refreshes = await metricSum(adminUrl, 'consent_sidecar_cache_refreshes_total', 'outcome="allow"');
    const upstreamCalls = Number(await (await request(`http://127.0.0.1:${upPort}/calls`)).body.text()) - callsBefore;
    const row = { name, load, upstreamAnswers, upstreamCalls, callsPerS: upstreamCalls / o.durationS, refreshes };
    return thenDeny ? { ...row, deny: await denyOnRefresh(port, upPort, lifeMs) } : row;
  } finally {
    await stopChild(s);
    await stopChild(up);
  }
}

export async function benchRefreshAhead(cli: string, o: { rate: number; durationS: number; connections: number; lifeMs?: number; windowMs?: number }): Promise<RefreshRow[]> {
  const lifeMs = o.lifeMs ?? 5000;
  const windowMs = o.windowMs ?? 1000;
  // The safety margin is 0 so the entry lives exactly the service's 5 s (the default 1 s margin shortens every life alike).
  const margin = ['--cache-safety-margin-ms', '0'];
  return [
    await one(cli, 'never expires (reference)', 3_600_000, margin, o),
    await one(cli, `refresh-ahead ${windowMs} ms`, lifeMs, [...margin, '--cache-refresh-ahead-ms', String(windowMs)], o, true),
    await one(cli, 'no refresh', lifeMs, margin, o),
  ];
}

export function refreshLines(rows: readonly RefreshRow[], o: { rate: number; durationS: number }): string[] {
  const fmt = (n: number, d = 2): string => n.toFixed(d);
  return [
    `Refresh-ahead: one hot key, ALLOW living 5 s, ${o.rate} req/s for ${o.durationS} s (open loop, generator in its own process)`,
    ...rows.map(
      (r) =>
        `  ${r.name.padEnd(26)} p50 ${fmt(r.load.p50, 3)} ms  p99 ${fmt(r.load.p99, 3)} ms  max ${fmt(r.load.max, 1)} ms  answers that waited for the service ${r.upstreamAnswers}  service calls ${r.upstreamCalls} (${fmt(r.callsPerS)}/s)  refreshes ${r.refreshes}  (${r.load.non2xx} non-2xx, ${r.load.errors} errors)`,
    ),
    ...rows.flatMap((r) =>
      r.deny
        ? [
            `  then the service says DENY (${r.name}): the client's first DENY came ${fmt(r.deny.firstDenyAfterMs, 3)} ms after the service wrote it on a refresh; ` +
              `${r.deny.allowsSentAfterDeny} ALLOW(s) to requests sent after that (its round trip); ${r.deny.checksBefore} checks before it, ${r.deny.allFromCache ? 'all' : 'NOT all'} from the cache`,
          ]
        : [],
    ),
  ];
}
