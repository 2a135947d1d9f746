import { createHmac } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TYPES, startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { startCli } from '../helpers/cli.js';
import { freePort } from '../helpers/ports.js';
import { startPrometheus, type RunningPrometheus } from '../helpers/prometheus.js';
import { spawnRedisServer, type SpawnedRedis } from '../helpers/redis.js';
import { sampleOf } from '../helpers/sidecar.js';
import { until } from '../helpers/wait.js';
import { CHART, mustFind, render, type K8sObject } from '../helpers/helm.js';
import { MONITORING_API, SCENARIOS, valuesPath } from './scenarios.js';

/**
 * The dashboard proven on a real Prometheus (Debian's `prometheus`): two real `serve` processes on
 * one Redis, one in queue mode and one in passthrough, scraped every second, each feature used a little (decisions of every
 * kind, the cache and refresh-ahead, forward-auth, webhooks accepted, duplicated, rejected and
 * dead-lettered, a revocation shared between the replicas, a manual purge, a secret file that fails
 * to reload, REDEC obligations handed to the app, Redis stalling); then every panel's query is evaluated through the
 * HTTP API with the dashboard's variables set: each parses, and each returns data.
 */

const JOB = 'shop-consent-sidecar';
const NAMESPACE = 'shop';
const SECRET = 'whsec_dashboard_test_secret';
const DASHBOARD = join(CHART, 'dashboards/consent-sidecar.json');

interface Target {
  expr: string;
  legendFormat?: string;
}
interface Panel {
  type: string;
  title: string;
  description?: string;
  targets?: Target[];
}
interface Dashboard {
  uid: string;
  panels: Panel[];
  templating: { list: { name: string; type: string; query?: string | { query: string } }[] };
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Dashboard;
const queryPanels = dashboard.panels.filter((p) => p.type !== 'row');

/** A dashboard expression as Grafana sends it: the variables set to this job, the rate interval 1m. */
const concrete = (expr: string): string => expr.replaceAll('$__rate_interval', '1m').replaceAll('$namespace', NAMESPACE).replaceAll('$job', JOB);

/** The alert named in a panel's description, with the expression written there. */
const alertsOf = (p: Panel): { alert: string; expr: string }[] =>
  [...(p.description ?? '').matchAll(/Alert (\w+) \([^)]*\): `([^`]+)`/g)].map((m) => ({ alert: m[1]!, expr: m[2]! }));

describe('the dashboard file', () => {
  it('has a panel for each thing an SRE watches, every query scoped by the namespace and job variables', () => {
    const titles = queryPanels.map((p) => p.title);
    for (const t of [
      'Decisions by source and outcome',
      'Fail-closed by cause',
      'Pre-evaluation denials by reason',
      "Evaluated denials (the data subjects' choices)",
      'Decision latency p50 / p99',
      'Cache entries',
      'Cache hit ratio',
      'Circuit breaker state',
      'Refresh-ahead by outcome',
      'Webhook deliveries by outcome',
      'Deduplication',
      'Queue depth',
      'Oldest queued event',
      'Dead letters',
      'Redis up',
      'Redis call latency p50 / p99 by operation',
      'Pending REDEC obligations',
    ]) {
      expect(titles, t).toContain(t);
    }
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(['datasource', 'namespace', 'job']);
    for (const p of queryPanels) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) if (t.expr !== `up{job=~"$job",namespace=~"$namespace"}`) expect(t.expr, p.title).toMatch(/\{job=~"\$job",namespace=~"\$namespace"[,}]/);
    }
  });

  it("each alert of the chart's PrometheusRule is beside its panel: its expression, as the rule has it, in the panel's description", async () => {
    const s = SCENARIOS.find((x) => x.file === 'monitoring-forced-values.yaml')!;
    const rules = (mustFind(await render({ valuesFiles: [valuesPath(s)] }), 'PrometheusRule').spec as { groups: { rules: { alert: string; expr: string }[] }[] }).groups.flatMap((g) => g.rules);
    const beside = new Map(queryPanels.flatMap(alertsOf).map((a) => [a.alert, a.expr]));
    expect([...beside.keys()].sort()).toEqual(rules.map((r) => r.alert).sort());
    for (const r of rules) {
      expect(beside.get(r.alert), r.alert).toBe(r.expr.trim().replaceAll(`job="${JOB}",namespace="${NAMESPACE}"`, 'job=~"$job",namespace=~"$namespace"'));
    }
  });

  it('the chart ships it, unchanged, in a ConfigMap for the Grafana sidecar when dashboard.enabled', async () => {
    const s = SCENARIOS.find((x) => x.file === 'monitoring-on-values.yaml')!;
    const objects = await render({ valuesFiles: [valuesPath(s)], apiVersions: [MONITORING_API] });
    const cm = mustFind(objects, 'ConfigMap', 'shop-consent-sidecar-dashboard') as K8sObject & { data: Record<string, string> };
    expect(cm.metadata.labels?.grafana_dashboard).toBe('1');
    expect(JSON.parse(cm.data['consent-sidecar.json']!)).toEqual(dashboard);
    const off = await render({ valuesFiles: [valuesPath(SCENARIOS.find((x) => x.file === 'native-values.yaml')!)] });
    expect(off.filter((o) => o.kind === 'ConfigMap')).toEqual([]);
  });
});

describe('every panel on a real Prometheus', () => {
  let sim: SimulatorHandle;
  // A redis-server of its own: the test freezes it to show the panels of a Redis that stalls.
  let redis: SpawnedRedis;
  let prometheus: RunningPrometheus | undefined;
  let app: Server;
  let dir: string;
  const stops: (() => Promise<void>)[] = [];
  const replicas: { decision: string; admin: string; webhook: string }[] = [];
  const appGot: string[] = [];

  const metricOf = async (admin: string, name: string, labels: Record<string, string> = {}): Promise<number> =>
    sampleOf(await (await fetch(`${admin}/metrics`)).text(), name, labels);
  const check = (decision: string, userReference: string, configKey: string, headers: Record<string, string> = {}) =>
    fetch(`${decision}/v1/authorization/check`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ userReference, configKey }) });

  beforeAll(async () => {
    [sim, redis] = await Promise.all([startSimulator({ timeScale: 3600 }), spawnRedisServer()]);
    dir = await mkdtemp(join(tmpdir(), 'consent-sidecar-dashboard-'));
    await writeFile(join(dir, 'api-key'), `${sim.apiKey}\n`);
    // The app: refuses redec.access.failed and .cancelled events (queued ones retry until the horizon
    // and become dead letters; passthrough ones are answered 503).
    app = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const type = (JSON.parse(body || '{}') as { type?: string }).type ?? '';
        appGot.push(type);
        res.statusCode = type === 'redec.access.failed' || type === 'redec.access.cancelled' ? 500 : 200;
        res.end();
      });
    });
    await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
    const appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}/webhooks`;
    const prefix = 'dash:';
    for (let i = 0; i < 2; i++) {
      const [admin, webhook] = await Promise.all([freePort(), freePort()]);
      const serve = await startCli(
        [
          'serve', '--upstream-url', sim.url, '--api-key-file', join(dir, 'api-key'),
          '--listen', '127.0.0.1:0', '--admin-listen', `127.0.0.1:${admin}`, '--webhook-listen', `127.0.0.1:${webhook}`,
          '--app-webhook-url', appUrl, '--webhook-secret', SECRET,
          // A in queue mode, B in passthrough: the panels of both delivery modes get data.
          '--webhook-delivery', i === 0 ? 'queue' : 'passthrough', '--redis-url', redis.url, '--redis-key-prefix', prefix, '--webhook-queue-horizon-ms', '2000',
          '--cache-refresh-ahead-ms', '299000',
          '--redec-reconcile-interval-ms', '300', '--redec-reconcile-grace-ms', '0',
          '--secret-poll-interval-ms', '100',
          // A short dedup lease, so a Redis that stalls is soon a Redis to fall back from.
          '--webhook-forward-timeout-ms', '1000', '--webhook-dedup-lease-ms', '1500',
        ],
        /"event":"started"/,
      );
      stops.push(async () => {
        serve.child.kill('SIGTERM');
        await serve.exited;
      });
      const urls = (JSON.parse(serve.line) as { urls: { decision: string } }).urls;
      replicas.push({ decision: urls.decision, admin: `http://127.0.0.1:${admin}`, webhook: `http://127.0.0.1:${webhook}/webhooks` });
    }
    prometheus = await startPrometheus({ job: JOB, targets: replicas.map((r) => r.admin.replace('http://', '')), labels: { namespace: NAMESPACE } });
    const [a, b] = replicas as [(typeof replicas)[0], (typeof replicas)[0]];

    // Decisions: ALLOW, then from the cache (and refreshed ahead), an evaluated denial, a pre-evaluation
    // denial, a fail-closed answer, forward-auth; alice's ALLOW cached on both replicas.
    for (const r of [a, b]) expect((await check(r.decision, 'alice', 'marketing-email')).status).toBe(200);
    expect(((await (await check(a.decision, 'alice', 'marketing-email')).json()) as { decision: string }).decision).toBe('ALLOW');
    await check(a.decision, 'bob', 'marketing-email');
    await check(a.decision, 'nobody', 'marketing-email');
    sim.injectFault({ status: 503, count: 1 });
    expect((await check(a.decision, 'alice', 'marketing-email', { 'cache-control': 'no-cache' })).status).toBe(503);
    expect((await fetch(`${a.decision}/sidecar/forward-auth?configKey=marketing-email`, { headers: { 'x-user-reference': 'alice' } })).status).toBe(200);
    await until(async () => (await metricOf(a.admin, 'consent_sidecar_cache_refreshes_total')) > 0, 'a refresh-ahead');

    // Webhooks through replica A: a revocation (accepted, purges both replicas), its replay (a duplicate),
    // a forged delivery (rejected), an event the app refuses (retried, dead-lettered), a REDEC grant.
    sim.registerWebhookEndpoint({ url: a.webhook, secret: SECRET, types: EVENT_TYPES.filter((t) => t !== 'redec.access.cancelled') });
    const revoked = sim.revokeConsent({ userReference: 'alice', configKey: 'marketing-email' });
    await until(async () => (await metricOf(b.admin, 'consent_sidecar_cache_invalidations_received_total')) > 0, 'the revocation shared with replica B');
    const res = await fetch(`${sim.url}/_simulator/events/${revoked.events[0]!.id}/resend`, { method: 'POST' });
    expect(res.status).toBe(201);
    await until(async () => (await metricOf(a.admin, 'consent_sidecar_webhook_deliveries_total', { outcome: 'duplicate' })) > 0, 'a duplicate');
    const forged = JSON.stringify({ id: 'evt_forged', sequence: 1, type: 'consent_action.created', occurredAt: Date.now(), data: {} });
    const ts = Math.floor(Date.now() / 1000);
    const badSig = createHmac('sha256', 'whsec_not_the_secret').update(`${ts}.${forged}`).digest('hex');
    const refused = await fetch(a.webhook, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-service-event-id': 'evt_forged', 'x-service-delivery-id': 'dlv_1', 'x-service-timestamp': String(ts), 'x-service-signature': `v1=${badSig}` },
      body: forged,
    });
    expect(refused.status).toBe(401);
    // One the app refuses goes to B alone, in passthrough: B answers 503 and the service retries.
    sim.registerWebhookEndpoint({ url: b.webhook, secret: SECRET, types: ['redec.access.cancelled'] });
    sim.emitEvent('redec.access.failed', {});
    sim.emitEvent('redec.access.cancelled', {});
    await until(async () => (await metricOf(a.admin, 'consent_sidecar_webhook_dead_letters')) === 1, 'a dead letter');
    await until(async () => (await metricOf(b.admin, 'consent_sidecar_webhook_forward_failures_total')) > 0, 'a passthrough forward the app refused');
    sim.grantConsent({ userReference: 'carol', configKey: 'credit-report', ttlMs: 3_600_000 });
    // With Redis one replica at a time reconciles: either may hand it.
    const handed = async (): Promise<number> => (await Promise.all(replicas.map((r) => metricOf(r.admin, 'consent_sidecar_redec_handed_to_app_total', { outcome: 'accepted' })))).reduce((x, y) => x + y, 0);
    await until(async () => (await handed()) > 0, 'an obligation handed to the app');
    // A manual purge, and a secret file that cannot be reloaded (then fixed).
    expect((await fetch(`${a.decision}/sidecar/cache`, { method: 'DELETE' })).status).toBe(200);
    await writeFile(join(dir, 'api-key'), '');
    await until(async () => (await metricOf(a.admin, 'consent_sidecar_secret_reload_failures_total')) > 0, 'a failed secret reload');
    await writeFile(join(dir, 'api-key'), `${sim.apiKey}\n`);

    // Redis stalls (SIGSTOP): B's claims get no answer in time (unknown outcome, 503), and once Redis
    // has been silent longer than the lease B deduplicates alone (a fallback). Then Redis is back.
    const delivery = (id: string): RequestInit => {
      const body = JSON.stringify({ id, sequence: 2, type: 'consent_action.created', occurredAt: Date.now(), data: {} });
      const t = Math.floor(Date.now() / 1000);
      const sig = createHmac('sha256', SECRET).update(`${t}.${body}`).digest('hex');
      return { method: 'POST', headers: { 'content-type': 'application/json', 'x-service-event-id': id, 'x-service-delivery-id': `dlv_${id}`, 'x-service-timestamp': String(t), 'x-service-signature': `v1=${sig}` }, body };
    };
    redis.freeze();
    try {
      // Deliveries start at once: the first claims wait on Redis for less than the lease (unknown
      // outcomes); waiting for redis_up 0 first could let the whole lease pass (only fallbacks).
      let n = 0;
      await until(async () => {
        await fetch(b.webhook, delivery(`evt_stall_${++n}`));
        return (await metricOf(b.admin, 'consent_sidecar_webhook_dedup_unknown_outcomes_total')) > 0 && (await metricOf(b.admin, 'consent_sidecar_webhook_dedup_fallbacks_total')) > 0;
      }, 'an unknown outcome, then a fallback, on replica B');
      await until(async () => (await metricOf(b.admin, 'consent_sidecar_redis_up')) === 0, 'replica B sees Redis down');
    } finally {
      redis.thaw();
    }
    for (const r of replicas) await until(async () => (await metricOf(r.admin, 'consent_sidecar_redis_up')) === 1, 'Redis up again');
  }, 120_000);

  afterAll(async () => {
    await prometheus?.close();
    for (const stop of stops) await stop();
    await new Promise<void>((r) => (app ? app.close(() => r()) : r()));
    await Promise.allSettled([sim?.close(), redis?.stop()]);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the variables find the job: every sidecar series carries the namespace and job labels', async () => {
    const answer = await prometheus!.query('consent_sidecar_build_info');
    expect(answer.status).toBe('success');
    expect(answer.data!.result.map((r) => [r.metric.namespace, r.metric.job])).toEqual([
      [NAMESPACE, JOB],
      [NAMESPACE, JOB],
    ]);
  });

  it('every query of every panel parses, and every alert expression beside a panel too', async () => {
    const exprs = [...queryPanels.flatMap((p) => p.targets!.map((t) => t.expr)), ...queryPanels.flatMap(alertsOf).map((a) => a.expr)];
    expect(exprs.length).toBeGreaterThan(40);
    const failed: string[] = [];
    for (const expr of exprs) {
      const answer = await prometheus!.query(concrete(expr));
      if (answer.status !== 'success') failed.push(`${expr}: ${answer.errorType} ${answer.error}`);
    }
    expect(failed).toEqual([]);
  });

  it('every query of every panel returns data once its feature has been used', async () => {
    const targets = queryPanels.flatMap((p) => p.targets!.map((t) => ({ panel: p.title, expr: concrete(t.expr) })));
    const empty: string[] = [];
    for (const { panel, expr } of targets) {
      // The series appear with the next scrapes; waiting for each is waiting for a condition.
      await until(async () => ((await prometheus!.query(expr)).data?.result.length ?? 0) > 0, `${panel}: ${expr} returns data`, 30_000).catch(() => empty.push(`${panel}: ${expr}`));
    }
    expect(empty).toEqual([]);
    expect(targets.length).toBeGreaterThan(40);
    expect(appGot).toContain('consent_sidecar.redec.notification_pending');
  });
});
