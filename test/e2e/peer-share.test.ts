import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Hold, requestOnNewConnection, type HoldMode } from '../helpers/hold-connections.js';
import { RecordingApp, replicaFlags, ServeProcess, signedEvent } from '../helpers/serve-process.js';
import { allow, startUpstream, type ScriptedUpstream } from '../helpers/upstream.js';
import { PATIENTLY, until } from '../helpers/wait.js';

/**
 * No peer owns a listener. 256 connections from 127.0.0.2, held and made again when cut (idle
 * keep-alives asking `GET /x` every 3 s, or requests whose header lines trickle in and never end),
 * fill the webhook listener (--webhook-max-connections 256) and the decision listener
 * (--max-connections 256). Genuine signed deliveries and checks from 127.0.0.1, each on a new
 * connection, still get in: at the cap an idle or request-less connection of the peer holding the
 * most is let go for them (counted), and ≥ 95 % are answered.
 */
const CAP = 256;
const GENUINE = 40;
const HOSTILE = '127.0.0.2';

describe('a peer holding every connection of a listener', () => {
  let upstream: ScriptedUpstream;
  const app = new RecordingApp();
  let serve: ServeProcess;

  beforeAll(async () => {
    upstream = await startUpstream((req) => ({ body: allow(JSON.parse(req.body).configKey as string, Date.now() + 600_000) }));
    await app.up();
    const flags = replicaFlags({ upstreamUrl: upstream.url, apiKey: 'k', appUrl: app.url, prefix: 'share:', extra: { 'redec-reconcile-interval-ms': '0', 'max-connections': String(CAP), 'webhook-max-connections': String(CAP) } });
    delete flags['redis-key-prefix'];
    serve = new ServeProcess(flags);
    await serve.start();
  }, 60_000);

  afterAll(async () => {
    await serve?.stop();
    await app.down();
    await upstream?.close();
  });

  /** Holds the listener full from 127.0.0.2 while `genuine` runs GENUINE times; its answers. */
  async function underHold(listener: 'webhook' | 'decision', mode: HoldMode, genuine: (i: number) => Promise<{ status: number | string; body: string }>) {
    const { hostname, port } = new URL(listener === 'webhook' ? serve.urls.webhook : serve.urls.decision);
    const hold = new Hold({ host: hostname, port: Number(port), localAddress: HOSTILE, count: CAP, mode, trickleTarget: listener === 'webhook' ? 'POST /webhooks' : 'POST /v1/authorization/check' });
    try {
      await until(async () => (await serve.metric('consent_sidecar_connections', { listener })) >= CAP, `${listener} listener full of ${HOSTILE}`);
      const answers = [];
      for (let i = 0; i < GENUINE; i++) answers.push(await genuine(i));
      return { answers, hold };
    } finally {
      hold.stop();
      await until(async () => (await serve.metric('consent_sidecar_connections', { listener })) < CAP / 2, `${listener} listener let go of the hold`);
    }
  }

  it.each<HoldMode>(['keep-alive', 'trickle'])('webhook listener, %s hold: at least 95 percent of genuine deliveries from 127.0.0.1 accepted', async (mode) => {
    const { answers, hold } = await underHold('webhook', mode, (i) => {
      const e = signedEvent(`evt_share_${mode}_${i}`, i);
      return requestOnNewConnection({ url: `${serve.urls.webhook}/webhooks`, method: 'POST', headers: e.headers, body: e.body, localAddress: '127.0.0.1' });
    });
    const accepted = answers.filter((a) => a.status === 200).length;
    expect(accepted, JSON.stringify(answers.map((a) => a.status))).toBeGreaterThanOrEqual(Math.ceil(GENUINE * 0.95));
    for (let i = 0; i < GENUINE; i++) if (answers[i]!.status === 200) expect(app.accepted(`evt_share_${mode}_${i}`)).toBe(1);
    // Room was made by letting the hold's connections go (counted); the hold kept renewing what it lost.
    expect(await serve.metric('consent_sidecar_connections_evicted_total', { listener: 'webhook' })).toBeGreaterThan(0);
    expect(hold.connects).toBeGreaterThan(CAP);
  }, PATIENTLY.timeout * 6);

  it.each<HoldMode>(['keep-alive', 'trickle'])('decision listener, %s hold: at least 95 percent of checks from 127.0.0.1 answered with a decision', async (mode) => {
    const { answers } = await underHold('decision', mode, (i) =>
      requestOnNewConnection({
        url: `${serve.urls.decision}/v1/authorization/check`,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ userReference: `share-${mode}-${i}`, configKey: 'k' }),
        localAddress: '127.0.0.1',
      }),
    );
    const decided = answers.filter((a) => a.status === 200 && (JSON.parse(a.body) as { decision?: string }).decision === 'ALLOW').length;
    expect(decided, JSON.stringify(answers.map((a) => a.status))).toBeGreaterThanOrEqual(Math.ceil(GENUINE * 0.95));
    expect(await serve.metric('consent_sidecar_connections_evicted_total', { listener: 'decision' })).toBeGreaterThan(0);
  }, PATIENTLY.timeout * 6);
});
