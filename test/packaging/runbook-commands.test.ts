import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatorHandle } from '../../src/simulator/index.js';
import { anchorsOf, docText } from '../helpers/docs.js';
import { IMAGE_NODE_AND_CLI } from '../helpers/image.js';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { mustFind, render, ROOT, type K8sObject } from '../helpers/helm.js';
import { SCENARIOS, valuesPath } from './scenarios.js';

/**
 * Every command an alert's description gives runs as written in a pod of the image: `kubectl exec …
 * -c consent-sidecar --`, then node and the CLI by their paths in the image (no shell, nothing on
 * PATH), with the sidecar container's environment. Here the part after `--` runs with that
 * environment as the chart renders it (the image's paths mapped to this checkout, the chart's secret
 * mount pointed at a folder holding the files), against the simulator as the consent service and a
 * real Redis where a queue-mode sidecar with the rendered prefix runs.
 */

interface Rule {
  alert: string;
  annotations: { summary: string; description: string; runbook_url: string };
}
type Container = { name: string; env?: { name: string; value?: string }[] };

const exec = promisify(execFile);
const WEBHOOK_SECRET = 'whsec_runbook_commands';

let sim: SimulatorHandle;
let redis: TestRedis;
let sidecar: TestSidecar | undefined;
let mount: string;
let rules: Rule[];
let podEnv: Record<string, string>;
let entrypoint: string[];

/** Each `kubectl … -- …` command of a description (up to a parenthesis, a semicolon or the end), as words. */
const commandsOf = (text: string): string[][] => [...text.matchAll(/kubectl [^;(]+?(?=\s*(?:\(|;|$))/g)].map((m) => m[0].trim().split(/\s+/));
const cliCommands = (): { alert: string; words: string[] }[] =>
  rules.flatMap((r) => commandsOf(r.annotations.description).filter((c) => c.includes('exec')).map((words) => ({ alert: r.alert, words })));

/** Runs the part after `--` as the container would: this node for the image's, dist/cli.js for /app/dist/cli.js. */
async function runInPod(words: string[], env: Record<string, string> = podEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  const after = words.slice(words.indexOf('--') + 1);
  expect(after.slice(0, 2)).toEqual(entrypoint);
  const args = after.slice(2).map((a) => a.replace(/^'(.*)'$/, '$1')); // the shell would unquote the prefix
  return exec(process.execPath, [join(ROOT, 'dist/cli.js'), ...args], { cwd: ROOT, env: { ...env, PATH: process.env.PATH ?? '' } }).then(
    (r) => ({ code: 0, ...r }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

beforeAll(async () => {
  [sim, redis] = await Promise.all([startSimulator(), getTestRedis()]);
  mount = await mkdtemp(join(tmpdir(), 'consent-sidecar-runbook-secrets-'));
  await writeFile(join(mount, 'api-key'), `${sim.apiKey}\n`);
  await writeFile(join(mount, 'redis-url'), `${redis.url}\n`);
  await writeFile(join(mount, 'webhook-secrets'), `${WEBHOOK_SECRET}\n`);
  // Every alert, as the forced scenario renders them (every feature on), pointed at the simulator.
  const forced = SCENARIOS.find((s) => s.file === 'monitoring-forced-values.yaml')!;
  const objects: K8sObject[] = await render({ valuesFiles: [valuesPath(forced)], set: [`config.upstreamUrl=${sim.url}`, `secrets.mountPath=${mount}`] });
  rules = (mustFind(objects, 'PrometheusRule').spec as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);
  const pod = (mustFind(objects, 'Deployment').spec as { template: { spec: { initContainers?: Container[]; containers: Container[] } } }).template.spec;
  const container = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === 'consent-sidecar')!;
  podEnv = Object.fromEntries((container.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
  // node and the CLI by the image's paths (its ENTRYPOINT's tiering flags are for serve's footprint).
  entrypoint = [...IMAGE_NODE_AND_CLI];
  const prefix = /--redis-key-prefix '([^']+)'/.exec(rules.map((r) => r.annotations.description).join(' '))![1]!;
  sidecar = await startTestSidecar(sim.url, {
    'api-key': sim.apiKey,
    'redis-url': redis.url,
    'redis-key-prefix': prefix,
    'webhook-delivery': 'queue',
    'webhook-listen': '127.0.0.1:0',
    'app-webhook-url': 'http://127.0.0.1:9/webhooks',
    'webhook-secret': WEBHOOK_SECRET,
  });
}, 60_000);

afterAll(async () => {
  await sidecar?.close();
  await Promise.allSettled([sim?.close(), redis?.stop()]);
  if (mount) await rm(mount, { recursive: true, force: true });
});

describe('every runbook command runs as written', () => {
  it('the alerts give commands for the key and the service, REDEC and the dead letters, each kubectl exec into the sidecar container', () => {
    const found = cliCommands();
    expect(found.map((c) => `${c.alert}: ${c.words.slice(c.words.indexOf('--') + 3, c.words.indexOf('--') + 5).join(' ')}`).sort()).toEqual([
      'ConsentSidecarCircuitBreakerOpen: check --user-reference',
      'ConsentSidecarFailClosedRateHigh: check --user-reference',
      'ConsentSidecarRedecObligationPendingTooLong: redec pending',
      'ConsentSidecarWebhookDeadLetters: webhook dead-letters',
      'ConsentSidecarWebhookDeadLetters: webhook dead-letters',
    ]);
    for (const { words } of found) expect(words.slice(0, words.indexOf('--'))).toEqual(['kubectl', '-n', 'shop', 'exec', 'deploy/shop', '-c', 'consent-sidecar']);
  });

  it('check: a pre-evaluation DENY (exit 1) with the key the pod has; with a key the service rejects, exit 2 naming the 401', async () => {
    for (const { words } of cliCommands().filter((c) => c.words.includes('check'))) {
      const r = await runInPod(words);
      expect(r.code, r.stderr).toBe(1);
      expect(JSON.parse(r.stdout)).toEqual({ decision: 'DENY', reason: 'customer_not_found' });
    }
    const wrong = join(mount, 'wrong-api-key');
    await writeFile(wrong, 'sk_not_the_key\n');
    const r = await runInPod(cliCommands().find((c) => c.words.includes('check'))!.words, { ...podEnv, CONSENT_SIDECAR_API_KEY_FILE: wrong });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('401');
  });

  it('redec pending --output table lists what the service holds, exit 0', async () => {
    sim.grantConsent({ userReference: 'carol', configKey: 'credit-report', ttlMs: 3_600_000 });
    const pending = sim.notificationRequirements({ status: 'pending' }).items;
    expect(pending).toHaveLength(1);
    const r = await runInPod(cliCommands().find((c) => c.words.includes('redec'))!.words);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(pending[0]!.redecConsentId);
  });

  it('webhook dead-letters list and replay run against the Redis the pod is given, exit 0', async () => {
    for (const { words } of cliCommands().filter((c) => c.words.includes('dead-letters'))) {
      const r = await runInPod(words);
      expect(r.code, `${words.join(' ')}\n${r.stderr}`).toBe(0);
    }
  });
});

describe('every alert links its runbook in docs/operations.md', () => {
  it('summary, description and runbook_url on every alert; the URL is the page and the heading of the alert', () => {
    const anchors = anchorsOf(docText('operations.md'));
    // 13 since ConsentSidecarCacheBypassed (a replica that cannot read the invalidation log), 14
    // since ConsentSidecarWebhookUnrouted (events of a type no route of the fleet takes).
    expect(rules.length).toBe(14);
    for (const r of rules) {
      expect(Object.keys(r.annotations).sort(), r.alert).toEqual(['description', 'runbook_url', 'summary']);
      expect(r.annotations.runbook_url).toBe(`https://github.com/consent-sidecar/consent-sidecar/blob/main/docs/operations.md#${r.alert.toLowerCase()}`);
      expect(anchors.has(r.alert.toLowerCase()), r.alert).toBe(true);
    }
  });

  it('the runbooks in docs/operations.md give the same commands', () => {
    const page = docText('operations.md').replace(/\\\n\s*/g, '');
    for (const { words } of cliCommands()) {
      const command = words.slice(words.indexOf('--') + 3).filter((w) => !w.startsWith("'") && !w.startsWith('/var') && !w.startsWith(mount));
      expect(page, words.join(' ')).toContain(`/nodejs/bin/node /app/dist/cli.js ${command.slice(0, 4).join(' ')}`);
    }
  });
});
