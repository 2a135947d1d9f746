import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docText, readmeText } from '../helpers/docs.js';
import { HELM, mustFind, parseYamlStream, render, ROOT, run, type K8sObject } from '../helpers/helm.js';
import { MONITORING_API, SCENARIOS, valuesPath } from './scenarios.js';
import { schemaProblems, unknownFieldProblems } from './validate.js';

// What a newcomer does with the README's step 4, run as written: its values and its helm command.

interface Container {
  name: string;
  env?: { name: string; value?: string }[];
  securityContext?: Record<string, unknown>;
}
interface PodSpec {
  initContainers?: Container[];
  containers: Container[];
  securityContext?: Record<string, unknown>;
}
const podOf = (objects: K8sObject[]): PodSpec => (mustFind(objects, 'Deployment').spec as { template: { spec: PodSpec } }).template.spec;
const named = (pod: PodSpec, name: string): Container => [...(pod.initContainers ?? []), ...pod.containers].find((c) => c.name === name)!;

/** The README's step 4: its values block and its `npx helm template` command (continued lines joined). */
function readmeStep4(): { values: string; template: string[] } {
  const readme = readmeText();
  const step = readme.slice(readme.indexOf('### 4. Kubernetes with Helm'), readme.indexOf('### 5. '));
  const values = /```yaml\n([\s\S]*?)```/.exec(step)![1]!;
  const sh = [...step.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!.replace(/\\\n\s*/g, '')).join('\n');
  const line = sh.split('\n').find((l) => l.startsWith('npx helm template '))!;
  return { values, template: line.replace(/\s*>.*$/, '').split(/\s+/).slice(2) };
}

let dir: string;
let readmeRender: K8sObject[];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'consent-sidecar-readme-helm-'));
  const { values, template } = readmeStep4();
  await writeFile(join(dir, 'my-values.yaml'), values);
  const args = template.map((a) => (a === 'my-values.yaml' ? join(dir, 'my-values.yaml') : a));
  const result = await run(HELM, args, ROOT);
  if (result.code !== 0) throw new Error(`the README's helm template failed:\n${result.stderr}`);
  readmeRender = (await parseYamlStream(result.stdout)) as K8sObject[];
}, 60_000);

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("the README's Helm values deploy first time", () => {
  it('the command gives helm the cluster: a kube version and the monitoring API; helm is run as npx helm, the pinned binary', () => {
    const { template } = readmeStep4();
    expect(template).toContain('--kube-version');
    expect(template.slice(template.indexOf('--api-versions'), template.indexOf('--api-versions') + 2)).toEqual(['--api-versions', MONITORING_API]);
    expect(readmeText()).toContain('node_modules/.bin/helm');
    expect(HELM.endsWith('node_modules/.bin/helm')).toBe(true);
  });

  it('an application image that runs as root and writes to its file system: nothing in the pod refuses it', () => {
    const pod = podOf(readmeRender);
    const app = named(pod, 'app');
    expect(app.securityContext).toBeUndefined();
    expect(pod.securityContext?.runAsNonRoot).toBeUndefined();
    expect(pod.securityContext?.runAsUser).toBeUndefined();
    // The sidecar stays hardened, a native sidecar on the version given.
    expect(pod.initContainers?.map((c) => c.name)).toEqual(['consent-sidecar']);
    expect(named(pod, 'consent-sidecar').securityContext).toMatchObject({ runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false });
  });

  it('the app gets CONSENT_SIDECAR_URL; the Ingress has TLS for its host; monitoring is rendered; every object is valid', () => {
    const app = named(podOf(readmeRender), 'app');
    expect(app.env?.find((e) => e.name === 'CONSENT_SIDECAR_URL')?.value).toBe('http://127.0.0.1:7700');
    const ingress = mustFind(readmeRender, 'Ingress').spec as { tls?: { hosts: string[]; secretName: string }[]; rules: { host: string }[] };
    expect(ingress.tls).toEqual([{ hosts: ['consent-hooks.shop.example.com'], secretName: 'consent-hooks-tls' }]);
    expect(ingress.rules.map((r) => r.host)).toEqual(['consent-hooks.shop.example.com']);
    expect(readmeRender.map((o) => o.kind)).toEqual(expect.arrayContaining(['ServiceMonitor', 'PrometheusRule']));
    expect(readmeRender.flatMap(schemaProblems)).toEqual([]);
    expect(unknownFieldProblems(readmeRender)).toEqual([]);
  });

  it('docs/kubernetes.md shows the same values (Way 1)', () => {
    expect(docText('kubernetes.md')).toContain(`\`\`\`yaml\n${readmeStep4().values}\`\`\``);
  });

  it('deployment.app.hardened opts the app into the sidecar\'s hardening; its own securityContext wins key by key', async () => {
    const s = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;
    const pod = podOf(await render({ valuesFiles: [valuesPath(s)], set: ['deployment.app.hardened=true', 'deployment.app.securityContext.runAsUser=10001', 'deployment.app.securityContext.readOnlyRootFilesystem=false'] }));
    expect(named(pod, 'app').securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 10001,
      readOnlyRootFilesystem: false,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
  });
});

describe('alerts only for the features that are on', () => {
  const ALWAYS = ['ConsentSidecarCircuitBreakerOpen', 'ConsentSidecarDown', 'ConsentSidecarFailClosedRateHigh', 'ConsentSidecarPreEvaluationDenials', 'ConsentSidecarSecretReloadFailing'];
  const WEBHOOKS = ['ConsentSidecarWebhookForwardFailures', 'ConsentSidecarWebhookRejectionsRising', 'ConsentSidecarWebhookUnrouted'];
  const QUEUE = ['ConsentSidecarWebhookDeadLetters', 'ConsentSidecarWebhookQueueOld'];
  const REDIS = ['ConsentSidecarCacheBypassed', 'ConsentSidecarRedisDown', 'ConsentSidecarWebhookStalledPastLease'];
  const REDEC = ['ConsentSidecarRedecObligationPendingTooLong'];
  const base = ['monitoring.mode=always', 'config.upstreamUrl=https://consent.example.com/api', 'secrets.apiKey.existingSecret=consent-api', 'deployment.app.image=shop:1', 'image.repository=cs'];
  const webhooks = ['config.appWebhookUrl=http://127.0.0.1:8080/webhooks', 'secrets.webhookSecrets.existingSecret=hooks'];
  const redis = ['secrets.redisUrl.existingSecret=redis'];

  it.each([
    ['nothing but decisions', [], ALWAYS],
    ['webhooks (the reconciler on with them)', webhooks, [...ALWAYS, ...WEBHOOKS, ...REDEC]],
    ['webhooks, the reconciler off', [...webhooks, 'config.redecReconcileIntervalMs=0'], [...ALWAYS, ...WEBHOOKS]],
    ['no webhooks, the reconciler on by its interval', ['config.redecReconcileIntervalMs=60000'], [...ALWAYS, ...REDEC]],
    ['webhooks on Redis', [...webhooks, ...redis], [...ALWAYS, ...WEBHOOKS, ...REDEC, ...REDIS]],
    ['queue mode (on Redis)', [...webhooks, ...redis, 'config.webhookDelivery=queue'], [...ALWAYS, ...WEBHOOKS, ...REDEC, ...REDIS, ...QUEUE]],
  ])('%s', async (_name, set, expected) => {
    const objects = await render({ set: [...base, ...set] });
    const rules = (mustFind(objects, 'PrometheusRule').spec as { groups: { rules: { alert: string }[] }[] }).groups.flatMap((g) => g.rules.map((r) => r.alert));
    expect(rules.sort()).toEqual([...expected].sort());
  });
});
