import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IMAGE_NODE_AND_CLI } from '../helpers/image.js';
import { getTestRedis, type TestRedis } from '../helpers/redis.js';
import { startTestSidecar, type TestSidecar } from '../helpers/sidecar.js';
import { secretRoleOf, SERVE_OPTIONS } from '../../src/config/index.js';
import { FAIL_CLOSED_CAUSES } from '../../src/decision/errors.js';
import { PRE_EVALUATION_REASONS } from '../../src/decision/types.js';
import { QUEUE_FORWARD_OUTCOMES, reasonLabel, ROUTE_REJECTIONS, WEBHOOK_AUTH_ERROR_CODES } from '../../src/webhooks/index.js';
import { ROOT, mustFind, render, type K8sObject } from '../helpers/helm.js';
import { MONITORING_API, SCENARIOS, valuesPath } from './scenarios.js';
import { declaredMetricFamilies } from '../helpers/metric-families.js';

/**
 * The habit that would have caught runbooks naming `timestamp_out_of_tolerance` and `bad_scheme`:
 * every label value a runbook names must be one the binary can emit, derived from the code (the
 * closed sets the metrics are declared with), never from a list kept by hand here.
 */

interface Rule {
  alert: string;
  expr: string;
  annotations: { summary: string; description: string; runbook_url: string };
}

/** Label values of the rejections counter the code can produce. */
const AUTH_REASONS = WEBHOOK_AUTH_ERROR_CODES.map(reasonLabel);
const REJECTION_REASONS = new Set<string>([...AUTH_REASONS, ...ROUTE_REJECTIONS, reasonLabel('ERR_WEBHOOK_INVALID_ENVELOPE')]);

/** Emittable label values by metric family. */
const LABEL_VALUES: Record<string, ReadonlySet<string>> = {
  consent_sidecar_webhook_rejections_total: REJECTION_REASONS,
  consent_sidecar_webhook_queue_forwards_total: new Set(QUEUE_FORWARD_OUTCOMES),
  consent_sidecar_fail_closed_total: new Set(FAIL_CLOSED_CAUSES),
  consent_sidecar_pre_evaluation_denials_total: new Set([...PRE_EVALUATION_REASONS, 'other']),
  // One role per secret file flag.
  consent_sidecar_secret_reload_failures_total: new Set(SERVE_OPTIONS.filter((o) => o.name.endsWith('-file')).map((o) => secretRoleOf(`--${o.name}`))),
};

let rules: Rule[];
const declaredFamilies = new Set<string>();
let webhookSources = '';

beforeAll(async () => {
  const forced = SCENARIOS.find((s) => s.file === 'monitoring-forced-values.yaml')!;
  const objects: K8sObject[] = await render({ valuesFiles: [valuesPath(forced)], apiVersions: forced.apiVersions });
  const spec = mustFind(objects, 'PrometheusRule').spec as { groups: { rules: Rule[] }[] };
  rules = spec.groups.flatMap((g) => g.rules);
  for (const name of await declaredMetricFamilies()) declaredFamilies.add(name);
  for (const dir of await readdir(join(ROOT, 'src'), { withFileTypes: true })) {
    if (!dir.isDirectory()) continue;
    for (const file of await readdir(join(ROOT, 'src', dir.name))) {
      if (!file.endsWith('.ts')) continue;
      const text = await readFile(join(ROOT, 'src', dir.name, file), 'utf8');
      if (dir.name === 'webhooks' || dir.name === 'http') webhookSources += text;
    }
  }
}, 60_000);

/** snake_case words of a text: label values, metric names. */
const snakeWords = (text: string): string[] => [...new Set(text.match(/\b[a-z0-9]+(?:_[a-z0-9]+)+\b/g) ?? [])];

describe('runbooks name only what the binary emits', () => {
  it('the emittable sets are derived from the code and not empty', () => {
    expect(AUTH_REASONS).toContain('timestamp_too_old');
    expect(AUTH_REASONS).toContain('signature_missing');
    expect(REJECTION_REASONS.has('not_found')).toBe(true);
    // Every literal reason the webhook code counts is in the set (a new literal must be added to a
    // closed set, not slipped into an inc call).
    const literals = [...webhookSources.matchAll(/rejections\.inc\(\{\s*reason:\s*'([a-z_]+)'/g)].map((m) => m[1]!);
    expect(literals.length).toBeGreaterThan(0);
    expect(literals.filter((r) => !REJECTION_REASONS.has(r))).toEqual([]);
  });

  it('every snake_case word of every runbook is a declared metric family or a label value the alert metric can carry', () => {
    expect(rules.length).toBeGreaterThanOrEqual(6);
    const unknown: string[] = [];
    for (const rule of rules) {
      const families = [...new Set(rule.expr.match(/\bconsent_sidecar_[a-z_]+/g) ?? [])];
      const allowed = new Set<string>(declaredFamilies);
      for (const f of families) for (const v of LABEL_VALUES[f] ?? []) allowed.add(v);
      for (const word of snakeWords(rule.annotations.description)) {
        if (!allowed.has(word)) unknown.push(`${rule.alert}: ${word}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('the check catches a made-up code (it can fail)', () => {
    const allowed = new Set([...declaredFamilies, ...REJECTION_REASONS]);
    expect(snakeWords('timestamp_out_of_tolerance points at skew').filter((w) => !allowed.has(w))).toEqual(['timestamp_out_of_tolerance']);
  });

  // Dead letters exist since queue mode (issue 10): only the queue's alerts may speak of them, and
  // the dead-letter alert must give the commands that exist (`webhook dead-letters list|replay`).
  it('only the queue alerts speak of dead letters, and the dead-letter runbook names the real commands', () => {
    const queueAlerts = new Set(['ConsentSidecarWebhookDeadLetters', 'ConsentSidecarWebhookQueueOld']);
    for (const rule of rules) if (!queueAlerts.has(rule.alert)) expect(rule.annotations.description, rule.alert).not.toMatch(/dead.letter/i);
    const dead = rules.find((r) => r.alert === 'ConsentSidecarWebhookDeadLetters')!;
    expect(dead.annotations.description).toContain('webhook dead-letters list');
    expect(dead.annotations.description).toContain('webhook dead-letters replay --all');
    expect(dead.expr).toContain('consent_sidecar_webhook_dead_letters');
  });

  // Unauthenticated load (a full budget of unverified bytes, bodies that never arrive) is an attack
  // signal as much as a bad signature is, so the alert counts those two route rejections as well.
  it('the rejections alert counts exactly the authentication reasons and unauthenticated load, not 404/405/413 or bad envelopes', () => {
    const rule = rules.find((r) => r.alert === 'ConsentSidecarWebhookRejectionsRising')!;
    const m = /reason=~"([^"]+)"/.exec(rule.expr);
    expect(m, rule.expr).not.toBeNull();
    expect(m![1]!.split('|').sort()).toEqual([...AUTH_REASONS, 'unverified_budget_exhausted', 'body_timeout'].sort());
  });
});

/**
 * The dead-letter runbook's commands run as written in a pod of the image: `kubectl exec … --` then
 * node and the CLI by their paths in the image (no shell, no consent-sidecar on PATH), with the
 * Redis URL file the chart mounts and the key prefix serve uses. Here the part after `--` runs
 * against a real Redis where a queue-mode sidecar with the rendered prefix runs, the image's paths
 * mapped to this checkout (ENTRYPOINT of the Dockerfile → this node and dist/cli.js), the chart's
 * mount path pointed at a folder holding the URL file.
 */
describe('the dead-letter runbook runs as written', () => {
  const exec = promisify(execFile);
  let redis: TestRedis;
  let mount: string;
  const WEBHOOK_SECRET = 'whsec_runbook';
  let runbook: string;
  let notes: string;
  let podEnv: Record<string, string>;
  let sidecar: TestSidecar | undefined;

  beforeAll(async () => {
    redis = await getTestRedis();
    mount = await mkdtemp(join(tmpdir(), 'consent-sidecar-secrets-'));
    await writeFile(join(mount, 'redis-url'), `${redis.url}\n`);
    const queue = SCENARIOS.find((s) => s.file === 'queue-values.yaml')!;
    const objects = await render({ valuesFiles: [valuesPath(queue)], apiVersions: [MONITORING_API], set: ['monitoring.mode=always', `secrets.mountPath=${mount}`] });
    const spec = mustFind(objects, 'PrometheusRule').spec as { groups: { rules: Rule[] }[] };
    runbook = spec.groups.flatMap((g) => g.rules).find((r) => r.alert === 'ConsentSidecarWebhookDeadLetters')!.annotations.description;
    notes = await readFile(join(ROOT, 'charts/consent-sidecar/templates/NOTES.txt'), 'utf8');
    // What `kubectl exec` gives the command: the sidecar container's environment as rendered, and the
    // files of its mounted Secrets (here the Redis URL and the webhook secret replay verifies with).
    type Container = { name: string; env?: { name: string; value?: string }[] };
    const pod = (mustFind(objects, 'Deployment').spec as { template: { spec: { initContainers?: Container[]; containers: Container[] } } }).template.spec;
    const container = [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === 'consent-sidecar')!;
    podEnv = Object.fromEntries((container.env ?? []).filter((e) => e.value !== undefined).map((e) => [e.name, e.value!]));
    await writeFile(join(mount, 'webhook-secrets'), `${WEBHOOK_SECRET}\n`);
    // The pod's sidecar, in queue mode with the prefix the chart renders: its queue is what the commands read.
    const prefix = /--redis-key-prefix '([^']+)'/.exec(runbook)![1]!;
    sidecar = await startTestSidecar('http://127.0.0.1:9', {
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
    await redis?.stop();
    if (mount) await rm(mount, { recursive: true, force: true });
  });

  /** The commands the runbook gives (each `kubectl … -- …` up to its end), split into words. */
  const commands = (): string[][] => [...runbook.matchAll(/kubectl [^;(]+?(?=\s*(?:\(|;|$))/g)].map((m) => m[0].trim().split(/\s+/));

  it('gives kubectl exec into the sidecar container, then node and the CLI by the image\'s own paths', async () => {
    // node and the CLI by the image's paths (its ENTRYPOINT's tiering flags are for serve's footprint).
    const entrypoint = [...IMAGE_NODE_AND_CLI];
    const found = commands();
    expect(found.map((c) => c.slice(c.indexOf('--') + 3, c.indexOf('--') + 6).join(' '))).toEqual(['webhook dead-letters list', 'webhook dead-letters replay']);
    for (const c of found) {
      expect(c.slice(0, c.indexOf('--'))).toEqual(['kubectl', '-n', 'shop', 'exec', 'deploy/shop', '-c', 'consent-sidecar']);
      expect(c.slice(c.indexOf('--') + 1, c.indexOf('--') + 3)).toEqual(entrypoint);
      expect(c).toContain('--redis-url-file');
      expect(c.slice(c.indexOf('--redis-key-prefix'), c.indexOf('--redis-key-prefix') + 2)).toEqual(['--redis-key-prefix', "'shop-prod:'"]);
    }
    // NOTES.txt prints the same commands (one template).
    expect(notes).toContain('consent-sidecar.deadLettersCommand');
  });

  it('each command, after `--`, runs in the container\'s environment: exit 0 against the Redis the chart points it at', async () => {
    expect(podEnv.CONSENT_SIDECAR_WEBHOOK_SECRET_FILE).toBe(join(mount, 'webhook-secrets'));
    for (const c of commands()) {
      const args = c.slice(c.indexOf('--') + 3).map((a) => a.replace(/^'(.*)'$/, '$1')); // the shell would unquote the prefix
      const r = await exec(process.execPath, [join(ROOT, 'dist/cli.js'), ...args], { cwd: ROOT, env: { ...podEnv, PATH: process.env.PATH ?? '' } }).catch(
        (err: { code: number; stdout: string; stderr: string }) => err,
      );
      expect('code' in r ? r.code : 0, `${args.join(' ')}\n${r.stderr}`).toBe(0);
    }
  });
});
