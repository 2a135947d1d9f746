import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHART, helmTemplateRaw, mustFind, render, type K8sObject } from '../helpers/helm.js';
import { SCENARIOS, valuesPath } from './scenarios.js';

/** Several replicas: the Redis URL from an existing Secret, and what NOTES.txt tells the operator. */
const s = SCENARIOS.find((x) => x.file === 'replicas-redis-values.yaml')!;
const native = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;

interface Container {
  name: string;
  env?: { name: string; value?: string }[];
}
const sidecar = (d: K8sObject): Container => {
  const spec = (d.spec as { template: { spec: { initContainers?: Container[]; containers: Container[] } } }).template.spec;
  return [...(spec.initContainers ?? []), ...spec.containers].find((c) => c.name === 'consent-sidecar')!;
};

let notesChart: string;
beforeAll(async () => {
  // helm template does not render NOTES.txt: render it through a ConfigMap in a copy of the chart.
  const base = await mkdtemp(join(tmpdir(), 'consent-sidecar-notes-'));
  notesChart = join(base, 'consent-sidecar');
  await cp(CHART, notesChart, { recursive: true });
  const notes = await readFile(join(CHART, 'templates/NOTES.txt'), 'utf8');
  await writeFile(join(notesChart, 'templates/_notes_test.tpl'), `{{- define "test.notes" -}}\n${notes}\n{{- end -}}\n`);
  await writeFile(
    join(notesChart, 'templates/notes-test.yaml'),
    'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: |\n{{ include "test.notes" . | indent 4 }}\n',
  );
});
afterAll(async () => {
  if (notesChart) await rm(join(notesChart, '..'), { recursive: true, force: true });
});

async function notes(valuesFile: string, set: string[] = []): Promise<string> {
  const objects = await render({ chart: notesChart, valuesFiles: [valuesFile], set, showOnly: ['templates/notes-test.yaml'] });
  return (mustFind(objects, 'ConfigMap').data as { notes: string }).notes;
}

describe('several replicas with Redis', () => {
  it('mounts the Redis URL from the existing Secret as a file and passes --redis-url-file', async () => {
    const objects = await render({ valuesFiles: [valuesPath(s)], kubeVersion: s.kubeVersion });
    const deployment = mustFind(objects, 'Deployment');
    expect((deployment.spec as { replicas: number }).replicas).toBe(3);
    const volumes = (deployment.spec as { template: { spec: { volumes: { name: string; projected?: { sources: { secret?: unknown }[] } }[] } } }).template.spec.volumes;
    const sources = volumes.find((v) => v.name === 'consent-sidecar-secrets')!.projected!.sources.map((x) => x.secret);
    expect(sources).toContainEqual({ name: 'consent-redis', items: [{ key: 'url', path: 'redis-url' }] });
    const env = Object.fromEntries((sidecar(deployment).env ?? []).map((e) => [e.name, e.value]));
    expect(env.CONSENT_SIDECAR_REDIS_URL_FILE).toBe('/var/run/secrets/consent-sidecar/redis-url');
    expect(env).not.toHaveProperty('CONSENT_SIDECAR_REDIS_URL');
    expect(env.CONSENT_SIDECAR_REDIS_KEY_PREFIX).toBe('shop-prod:');
    expect(env.CONSENT_SIDECAR_WEBHOOK_DEDUP_LEASE_MS).toBe('15000');
    // the chart deploys no Redis
    expect(objects.map((o) => o.kind).filter((k) => k === 'StatefulSet')).toEqual([]);
    expect(objects.some((o) => JSON.stringify(o).includes('image":"redis'))).toBe(false);
  });

  it('NOTES.txt warns when replicas > 1 run without Redis (knowingly, unsafeUnsharedReplicas), and not otherwise', async () => {
    const without = await notes(valuesPath(native), ['deployment.replicas=3', 'unsafeUnsharedReplicas=true']);
    expect(without).toContain('WARNING: 3 replicas without Redis (unsafeUnsharedReplicas: true)');
    expect(without).toContain('secrets.redisUrl.existingSecret');
    expect(await notes(valuesPath(native), ['deployment.replicas=1'])).not.toContain('WARNING');
    const withRedis = await notes(valuesPath(s));
    expect(withRedis).not.toContain('WARNING');
    expect(withRedis).toContain('shared through Redis');
    expect(await notes(valuesPath(native), ['deployment.replicas=3', 'config.redisUrl=redis://redis:6379'])).not.toContain('WARNING');
  });
});

/** The values of the "Way 1" example as a user copies them, from the README or from docs/kubernetes.md. */
async function readmeWay1(dir: string, page = 'README.md'): Promise<string> {
  const readme = await readFile(join(CHART, '../..', page), 'utf8');
  const block = /```yaml\n# my-values\.yaml\n([\s\S]*?)```/.exec(readme);
  if (!block) throw new Error(`${page}: no \`\`\`yaml block starting with "# my-values.yaml" (Way 1)`);
  const file = join(dir, page.replace(/\W/g, '-') + '-my-values.yaml');
  await writeFile(file, block[1]!);
  return file;
}

describe('replicas without Redis: safe by default, unsafe only when said so', () => {
  const sentence =
    'consent-sidecar values: deployment.replicas: 2 pods without Redis would each deduplicate webhooks and cache ALLOWs on their own, so a revocation delivered to one pod leaves the others answering ALLOW until validUntil: set secrets.redisUrl.existingSecret (or config.redisUrl), or deployment.replicas: 1, or unsafeUnsharedReplicas: true to accept that';
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'consent-sidecar-way1-'));
  });
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('the README\'s Way 1 values render one replica (the default), never two without Redis', async () => {
    const objects = await render({ valuesFiles: [await readmeWay1(dir)] });
    expect((mustFind(objects, 'Deployment').spec as { replicas: number }).replicas).toBe(1);
  });

  it('docs/kubernetes.md shows the same Way 1 values as the README', async () => {
    const [readme, docs] = await Promise.all([readmeWay1(dir), readmeWay1(dir, 'docs/kubernetes.md')]);
    expect(await readFile(docs, 'utf8')).toBe(await readFile(readme, 'utf8'));
  });

  it('the Way 1 values with two replicas (what they rendered before, silently) fail with the chart\'s one sentence', async () => {
    const result = await helmTemplateRaw({ valuesFiles: [await readmeWay1(dir)], set: ['deployment.replicas=2'] });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(sentence);
    expect(result.stderr).not.toContain('problem(s)');
    expect(result.stderr).not.toMatch(/schema/i);
  });

  it('render with Redis, or with unsafeUnsharedReplicas: true (and its warning in NOTES.txt)', async () => {
    const way1 = await readmeWay1(dir);
    for (const set of [
      ['deployment.replicas=2', 'secrets.redisUrl.existingSecret=consent-redis'],
      ['deployment.replicas=2', 'config.redisUrl=redis://redis:6379'],
      ['deployment.replicas=2', 'unsafeUnsharedReplicas=true'],
    ]) {
      const ok = await helmTemplateRaw({ valuesFiles: [way1], set });
      expect(ok.code, `${set.join(' ')}\n${ok.stderr}`).toBe(0);
    }
  });

  it('deployment.enabled false: the parent chart owns the replicas, nothing to refuse here', async () => {
    const include = SCENARIOS.find((x) => x.file === 'include-values.yaml')!;
    const ok = await helmTemplateRaw({ valuesFiles: [valuesPath(include)], apiVersions: include.apiVersions, set: ['deployment.replicas=4'] });
    expect(ok.code, ok.stderr).toBe(0);
  });
});

describe('queue mode (issue 10)', () => {
  const queue = SCENARIOS.find((x) => x.file === 'queue-values.yaml')!;

  it('renders with a Redis URL: the delivery mode and the horizon reach the sidecar', async () => {
    const objects = await render({ valuesFiles: [valuesPath(queue)], kubeVersion: queue.kubeVersion });
    const env = Object.fromEntries((sidecar(mustFind(objects, 'Deployment')).env ?? []).map((e) => [e.name, e.value]));
    expect(env.CONSENT_SIDECAR_WEBHOOK_DELIVERY).toBe('queue');
    expect(env.CONSENT_SIDECAR_WEBHOOK_QUEUE_HORIZON_MS).toBe('86400000');
    expect(env.CONSENT_SIDECAR_REDIS_URL_FILE).toBe('/var/run/secrets/consent-sidecar/redis-url');
  });

  it('NOTES.txt points at the queue metrics and the dead-letter commands in queue mode only', async () => {
    const queueNotes = await notes(valuesPath(queue));
    const inPod = 'kubectl -n shop exec deploy/shop -c consent-sidecar -- /nodejs/bin/node /app/dist/cli.js webhook dead-letters';
    const where = "--redis-url-file /var/run/secrets/consent-sidecar/redis-url --redis-key-prefix 'shop-prod:'";
    expect(queueNotes).toContain(`${inPod} list ${where}`);
    expect(queueNotes).toContain(`${inPod} replay --all ${where}`);
    expect(await notes(valuesPath(s))).not.toContain('Queue mode');
  });

  it('queue mode without a Redis URL fails with the chart\'s own sentence (not a schema dump), and each of the three ways of giving one renders', async () => {
    const without = await helmTemplateRaw({ valuesFiles: [valuesPath(native)], set: ['config.webhookDelivery=queue'] });
    expect(without.code).not.toBe(0);
    expect(without.stderr).toContain(
      'consent-sidecar values: config.webhookDelivery: queue keeps events in Redis, which needs a Redis URL: set secrets.redisUrl.existingSecret or config.redisUrl, or a cluster or sentinels (config.redisClusterNodes, config.redisSentinels, or their secrets); the sidecar would exit 2 naming --redis-url',
    );
    expect(without.stderr).not.toMatch(/schema|anyOf/);
    for (const set of [
      ['config.webhookDelivery=queue', 'config.redisUrl=redis://redis:6379'],
      ['config.webhookDelivery=queue', 'secrets.redisUrl.existingSecret=consent-redis'],
      ['config.webhookDelivery=queue', 'extraEnv[0].name=CONSENT_SIDECAR_REDIS_URL', 'extraEnv[0].value=redis://redis:6379'],
    ]) {
      const ok = await helmTemplateRaw({ valuesFiles: [valuesPath(native)], set });
      expect(ok.code, `${set.join(' ')}\n${ok.stderr}`).toBe(0);
    }
  });

  it('consent-sidecar.validate names the problem too (a parent chart may not apply our schema)', async () => {
    const base = await mkdtemp(join(tmpdir(), 'consent-sidecar-noschema-'));
    try {
      const chart = join(base, 'consent-sidecar');
      await cp(CHART, chart, { recursive: true });
      await rm(join(chart, 'values.schema.json'));
      const result = await helmTemplateRaw({ chart, valuesFiles: [valuesPath(native)], set: ['config.webhookDelivery=queue'] });
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain('config.webhookDelivery: queue keeps events in Redis, which needs a Redis URL');
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
});
