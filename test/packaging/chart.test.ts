import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHART,
  HELM,
  find,
  helmTemplateRaw,
  mustFind,
  render,
  run,
  vendoredExampleChart,
  type K8sObject,
} from '../helpers/helm.js';
import { MONITORING_API, SCENARIOS, valuesPath, type Scenario } from './scenarios.js';
import { schemaProblems, unknownFieldProblems } from './validate.js';

const FULLNAME = 'shop-consent-sidecar';
/** The standalone Deployment and its Service are the application's: named after the release (or deployment.name). */
const APP_NAME = 'shop';
const SECRET_DIR = '/var/run/secrets/consent-sidecar';
/** Where the app container finds the app signing secret (secrets.appSigningSecret.appMountPath). */
const APP_SIGNING_DIR = '/var/run/secrets/consent-sidecar-app';

interface Container {
  name: string;
  image?: string;
  args?: string[];
  restartPolicy?: string;
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  ports?: { name?: string; containerPort: number }[];
  startupProbe?: { httpGet?: { path: string; port: string | number } };
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  lifecycle?: {
    postStart?: { exec?: { command: string[] } };
    preStop?: { exec?: { command: string[] }; sleep?: { seconds: number } };
  };
  securityContext?: Record<string, unknown>;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
}
interface PodSpec {
  initContainers?: Container[];
  containers: Container[];
  volumes?: { name: string; projected?: { sources: { secret?: { name: string; items: { key: string; path: string }[] } }[] } }[];
  terminationGracePeriodSeconds?: number;
  automountServiceAccountToken?: boolean;
  securityContext?: Record<string, unknown>;
}

const podSpec = (d: K8sObject): PodSpec => (d.spec as { template: { spec: PodSpec } }).template.spec;
const podAnnotations = (d: K8sObject): Record<string, string> =>
  (d.spec as { template: { metadata: { annotations?: Record<string, string> } } }).template.metadata.annotations ?? {};
const allContainers = (p: PodSpec): Container[] => [...(p.initContainers ?? []), ...p.containers];
const sidecarOf = (p: PodSpec): Container => {
  const c = allContainers(p).find((x) => x.name === 'consent-sidecar');
  if (!c) throw new Error('no consent-sidecar container');
  return c;
};
const env = (c: Container): Record<string, string | undefined> => Object.fromEntries((c.env ?? []).map((e) => [e.name, e.value]));

const renders = new Map<string, K8sObject[]>();
let example: { objects: K8sObject[]; nativeClassic: K8sObject[] };
let cleanupExample: (() => Promise<void>) | undefined;

beforeAll(async () => {
  const jobs = SCENARIOS.map(async (s) => {
    renders.set(s.file, await render({ valuesFiles: [valuesPath(s)], kubeVersion: s.kubeVersion, apiVersions: s.apiVersions }));
  });
  const vendored = await vendoredExampleChart();
  cleanupExample = vendored.cleanup;
  const exampleJob = Promise.all([
    render({ chart: vendored.dir, apiVersions: [MONITORING_API] }),
    render({ chart: vendored.dir, kubeVersion: '1.27.0', set: ['consent-sidecar.mode=classic'] }),
  ]).then(([objects, nativeClassic]) => {
    example = { objects, nativeClassic };
  });
  await Promise.all([...jobs, exampleJob]);
}, 60_000);

afterAll(async () => {
  await cleanupExample?.();
});

const rendered = (s: Scenario): K8sObject[] => {
  const objects = renders.get(s.file);
  if (!objects) throw new Error(`${s.file} was not rendered`);
  return objects;
};

describe('scenario values files', () => {
  it('every ci/*-values.yaml is a scenario of these tests', async () => {
    const files = (await readdir(join(CHART, 'ci'))).filter((f) => f.endsWith('-values.yaml')).sort();
    expect(files).toEqual(SCENARIOS.map((s) => s.file).sort());
  });

  it.each(SCENARIOS.map((s) => [s.file, s] as const))('helm lint --strict passes with %s', async (_file, s) => {
    const result = await run(HELM, ['lint', '--strict', CHART, '--values', valuesPath(s)]);
    expect(result.stderr + result.stdout).toContain('0 chart(s) failed');
    expect(result.code).toBe(0);
  });

  it('helm lint --strict passes on the example parent chart', async () => {
    const vendored = await vendoredExampleChart();
    try {
      const result = await run(HELM, ['lint', '--strict', vendored.dir]);
      expect(result.stderr + result.stdout).toContain('0 chart(s) failed');
      expect(result.code).toBe(0);
    } finally {
      await vendored.cleanup();
    }
  });
});

describe('rendered objects are valid Kubernetes objects', () => {
  it.each(SCENARIOS.map((s) => [s.file, s] as const))('%s: every object passes its schema', (_file, s) => {
    const objects = rendered(s);
    expect(objects.length).toBeGreaterThan(0);
    expect(objects.flatMap(schemaProblems)).toEqual([]);
  });

  it('the example parent chart: every object passes its schema (native and classic)', () => {
    expect([...example.objects, ...example.nativeClassic].flatMap(schemaProblems)).toEqual([]);
  });

  it('no object carries a field Kubernetes does not know (every scenario and the example)', () => {
    const all = [...[...renders.values()].flat(), ...example.objects, ...example.nativeClassic];
    expect(unknownFieldProblems(all)).toEqual([]);
  });

  it('the unknown-field check does catch a misspelt field', () => {
    const deployment = structuredClone(mustFind(rendered(SCENARIOS[0]!), 'Deployment'));
    (sidecarOf(podSpec(deployment)) as unknown as Record<string, unknown>).readinesProbe = {};
    expect(unknownFieldProblems([deployment]).join('\n')).toMatch(/readinesProbe/);
  });

  it('the schema check does catch a wrong type', () => {
    const deployment = structuredClone(mustFind(rendered(SCENARIOS[0]!), 'Deployment'));
    (deployment.spec as Record<string, unknown>).replicas = 'two';
    expect(schemaProblems(deployment).join('\n')).toMatch(/replicas/);
  });
});

describe('native sidecar (default)', () => {
  const s = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;

  it('is an initContainer with restartPolicy Always and a startupProbe on /readyz, before the app', () => {
    const pod = podSpec(mustFind(rendered(s), 'Deployment'));
    expect(pod.initContainers?.map((c) => c.name)).toEqual(['consent-sidecar']);
    const sidecar = pod.initContainers![0]!;
    expect(sidecar.restartPolicy).toBe('Always');
    expect(sidecar.startupProbe?.httpGet).toEqual({ path: '/readyz', port: 'consent-metrics' });
    expect(sidecar.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'consent-metrics' });
    expect(sidecar.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'consent-metrics' });
    expect(pod.containers.map((c) => c.name)).toEqual(['app']);
    // A native sidecar is stopped after the app: no preStop delay is needed.
    expect(sidecar.lifecycle).toBeUndefined();
  });

  it('runs the image with serve and gives the app the decision URL on loopback', () => {
    const pod = podSpec(mustFind(rendered(s), 'Deployment'));
    const sidecar = sidecarOf(pod);
    expect(sidecar.image).toBe('registry.example.com/consent-sidecar:0.1.0');
    expect(sidecar.args).toEqual(['serve']);
    expect(env(sidecar).CONSENT_SIDECAR_LISTEN).toBe('127.0.0.1:7700');
    expect(env(pod.containers[0]!).CONSENT_SIDECAR_URL).toBe('http://127.0.0.1:7700');
  });

  it('sets every configured serve flag as its CONSENT_SIDECAR_* variable, integers printed as integers', () => {
    const e = env(sidecarOf(podSpec(mustFind(rendered(s), 'Deployment'))));
    expect(e).toMatchObject({
      CONSENT_SIDECAR_UPSTREAM_URL: 'https://consent.example.com/api',
      CONSENT_SIDECAR_UPSTREAM_TIMEOUT_MS: '1500',
      CONSENT_SIDECAR_CACHE_MAX_ENTRIES: '200000',
      CONSENT_SIDECAR_CACHE_MAX_TTL_MS: '3600000',
      CONSENT_SIDECAR_WEBHOOK_DEDUP_RETENTION_MS: '86400000',
      CONSENT_SIDECAR_APP_WEBHOOK_URL: 'http://127.0.0.1:8080/webhooks',
      CONSENT_SIDECAR_LOG_LEVEL: 'info',
      CONSENT_SIDECAR_WEBHOOK_LISTEN: '0.0.0.0:7701',
      CONSENT_SIDECAR_ADMIN_LISTEN: '0.0.0.0:7702',
    });
    // Unset keys leave the sidecar's own defaults.
    expect(e).not.toHaveProperty('CONSENT_SIDECAR_BREAKER_COOLDOWN_MS');
    expect(e).not.toHaveProperty('CONSENT_SIDECAR_REDIS_URL');
  });

  it('mounts the secrets as files and passes them with the *-file variables, never as values', () => {
    const objects = rendered(s);
    const pod = podSpec(mustFind(objects, 'Deployment'));
    const sidecar = sidecarOf(pod);
    const e = env(sidecar);
    expect(e.CONSENT_SIDECAR_API_KEY_FILE).toBe(`${SECRET_DIR}/api-key`);
    expect(e.CONSENT_SIDECAR_WEBHOOK_SECRET_FILE).toBe(`${SECRET_DIR}/webhook-secrets`);
    expect(e.CONSENT_SIDECAR_WEBHOOK_REQUIRED_HEADER_FILE).toBe(`${SECRET_DIR}/webhook-required-header`);
    for (const name of ['CONSENT_SIDECAR_API_KEY', 'CONSENT_SIDECAR_WEBHOOK_SECRET', 'CONSENT_SIDECAR_WEBHOOK_REQUIRED_HEADER']) {
      expect(e).not.toHaveProperty(name);
    }
    expect(sidecar.volumeMounts).toEqual([{ name: 'consent-sidecar-secrets', mountPath: SECRET_DIR, readOnly: true }]);
    const volume = pod.volumes?.find((v) => v.name === 'consent-sidecar-secrets');
    expect(volume?.projected?.sources.map((x) => x.secret)).toEqual([
      { name: FULLNAME, items: [{ key: 'api-key', path: 'api-key' }] },
      { name: FULLNAME, items: [{ key: 'webhook-secrets', path: 'webhook-secrets' }] },
      { name: FULLNAME, items: [{ key: 'webhook-required-header', path: 'webhook-required-header' }] },
      // Signed forwards: the pod's app signing secret, which the chart makes (see 'signed forwards').
      { name: `${FULLNAME}-app-signing`, items: [{ key: 'app-signing-secret', path: 'app-signing-secret' }] },
    ]);
    // The app container does not see the sidecar's secrets: its one mount is the app signing secret
    // alone (the API key and the service's webhook secrets are the sidecar's only).
    expect(pod.containers[0]!.volumeMounts ?? []).toEqual([{ name: 'consent-sidecar-app-signing', mountPath: APP_SIGNING_DIR, readOnly: true }]);
    const secret = mustFind(objects, 'Secret', FULLNAME);
    expect(secret.stringData).toEqual({
      'api-key': 'ck_test_0123456789',
      'webhook-secrets': 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\nwhsec_rotatedSecondSecretForTheRotation\n',
      'webhook-required-header': 'X-Portal-Token: s3cr3t',
    });
  });

  it('exposes the webhook and metrics ports through the Service, beside the app port', () => {
    const service = mustFind(rendered(s), 'Service', APP_NAME);
    expect((service.spec as { ports: unknown[] }).ports).toEqual([
      { name: 'consent-webhook', port: 7701, targetPort: 'consent-webhook', protocol: 'TCP' },
      { name: 'consent-metrics', port: 7702, targetPort: 'consent-metrics', protocol: 'TCP' },
      { name: 'http', port: 80, targetPort: 'http' },
    ]);
  });
});

describe('standalone Deployment naming', () => {
  const s = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;

  it('the Deployment, its pods and its Service are named and labelled after the application, not the sidecar', () => {
    const objects = rendered(s);
    const deployment = mustFind(objects, 'Deployment');
    expect(deployment.metadata.name).toBe(APP_NAME);
    expect(deployment.metadata.labels?.['app.kubernetes.io/name']).toBe(APP_NAME);
    const spec = deployment.spec as { selector: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string> } } };
    expect(spec.selector.matchLabels).toEqual({ 'app.kubernetes.io/name': APP_NAME, 'app.kubernetes.io/instance': 'shop' });
    expect(spec.template.metadata.labels).toMatchObject(spec.selector.matchLabels);
    const service = mustFind(objects, 'Service', APP_NAME);
    expect((service.spec as { selector: Record<string, string> }).selector).toEqual(spec.selector.matchLabels);
    // The sidecar's own objects keep the sidecar's name.
    expect(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name)).toEqual([`${FULLNAME}-app-signing`, FULLNAME]);
  });

  it('deployment.name names them', async () => {
    const objects = await render({ valuesFiles: [valuesPath(s)], set: ['deployment.name=storefront'] });
    expect(mustFind(objects, 'Deployment').metadata.name).toBe('storefront');
    const service = mustFind(objects, 'Service', 'storefront');
    expect((service.spec as { selector: Record<string, string> }).selector['app.kubernetes.io/name']).toBe('storefront');
    const ingress = mustFind(objects, 'Ingress');
    expect(JSON.stringify(ingress.spec)).toContain('"name":"storefront"');
  });
});

describe('opt-in PodDisruptionBudget and NetworkPolicy', () => {
  const s = SCENARIOS.find((x) => x.file === 'policies-values.yaml')!;

  it('are off by default', () => {
    const kinds = rendered(SCENARIOS.find((x) => x.file === 'native-values.yaml')!).map((o) => o.kind);
    expect(kinds).not.toContain('PodDisruptionBudget');
    expect(kinds).not.toContain('NetworkPolicy');
  });

  it('the PodDisruptionBudget covers the Deployment\'s pods', () => {
    const objects = rendered(s);
    const pdb = mustFind(objects, 'PodDisruptionBudget');
    const deployment = mustFind(objects, 'Deployment');
    expect(pdb.spec).toEqual({
      maxUnavailable: 1,
      selector: { matchLabels: (deployment.spec as { selector: { matchLabels: unknown } }).selector.matchLabels },
    });
  });

  it('the NetworkPolicy opens the webhook, metrics and app ports to the given peers and never the decision port', () => {
    const objects = rendered(s);
    const np = mustFind(objects, 'NetworkPolicy');
    const spec = np.spec as { podSelector: { matchLabels: unknown }; policyTypes: string[]; ingress: { ports: { port: string | number }[]; from?: unknown[] }[] };
    expect(spec.podSelector.matchLabels).toEqual((mustFind(objects, 'Deployment').spec as { selector: { matchLabels: unknown } }).selector.matchLabels);
    expect(spec.policyTypes).toEqual(['Ingress']);
    const ports = spec.ingress.flatMap((r) => r.ports.map((p) => p.port));
    expect(ports).toEqual(['consent-webhook', 'consent-metrics', 'http']);
    const sidecar = sidecarOf(podSpec(mustFind(objects, 'Deployment')));
    // The decision port is not a named container port, and no rule names its number.
    expect(sidecar.ports?.map((p) => p.name)).not.toContain('consent-decision');
    expect(ports).not.toContain(7700);
    expect(spec.ingress[0]!.from).toEqual([{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'ingress-nginx' } } }]);
  });

  it('every values problem, including the Ingress and ServiceMonitor ones, is named in the same run', async () => {
    const result = await helmTemplateRaw({ set: ['monitoring.mode=always', 'deployment.enabled=false', 'ingress.enabled=true'] });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('5 problem(s)');
    for (const key of ['image.repository', 'config.upstreamUrl', 'secrets.apiKey', 'ingress.enabled', 'monitoring.serviceMonitor.selector']) {
      expect(result.stderr).toContain(`  - ${key}`);
    }
  });

  it('need a podSelector without the standalone Deployment, said with the other problems', async () => {
    const result = await helmTemplateRaw({
      valuesFiles: [valuesPath(SCENARIOS.find((x) => x.file === 'include-values.yaml')!)],
      set: ['podDisruptionBudget.enabled=true', 'networkPolicy.enabled=true'],
    });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/2 problem\(s\)/);
    expect(result.stderr).toMatch(/podDisruptionBudget\.podSelector is required/);
    expect(result.stderr).toMatch(/networkPolicy\.podSelector is required/);
  });
});

describe('webhook Ingress', () => {
  const s = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;

  it('routes exactly the webhook path to the Service\'s consent-webhook port, with TLS', () => {
    const ingress = mustFind(rendered(s), 'Ingress', FULLNAME);
    expect(ingress.spec).toEqual({
      ingressClassName: 'nginx',
      tls: [{ secretName: 'consent-hooks-tls', hosts: ['consent-hooks.shop.example.com'] }],
      rules: [
        {
          host: 'consent-hooks.shop.example.com',
          http: {
            paths: [
              {
                path: '/webhooks',
                pathType: 'Exact',
                backend: { service: { name: APP_NAME, port: { name: 'consent-webhook' } } },
              },
            ],
          },
        },
      ],
    });
  });

  it('is off by default and refuses to render without a webhook port to route to', async () => {
    for (const sc of SCENARIOS.filter((x) => x !== s)) expect(find(rendered(sc), 'Ingress')).toBeUndefined();
    const result = await helmTemplateRaw({
      valuesFiles: [valuesPath(SCENARIOS.find((x) => x.file === 'classic-values.yaml')!)],
      set: ['ingress.enabled=true'],
    });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/ingress\.enabled: .*config\.appWebhookUrl/);
  });
});

describe('mode', () => {
  const s = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;
  const layout = async (kubeVersion: string, set: string[] = []): Promise<string[][]> => {
    const pod = podSpec(mustFind(await render({ valuesFiles: [valuesPath(s)], kubeVersion, set }), 'Deployment'));
    return [(pod.initContainers ?? []).map((c) => c.name), pod.containers.map((c) => c.name)];
  };

  it('auto (the default) is native from Kubernetes 1.29 and classic before', async () => {
    expect(await layout('1.29.0')).toEqual([['consent-sidecar'], ['app']]);
    expect(await layout('1.31.2')).toEqual([['consent-sidecar'], ['app']]);
    expect(await layout('1.28.9')).toEqual([[], ['consent-sidecar', 'app']]);
  });

  it('an explicit mode wins over the version', async () => {
    expect(await layout('1.28.9', ['mode=native'])).toEqual([['consent-sidecar'], ['app']]);
    expect(await layout('1.30.0', ['mode=classic'])).toEqual([[], ['consent-sidecar', 'app']]);
  });
});

describe('hardening', () => {
  it.each(SCENARIOS.filter((s) => s.deployment).map((s) => [s.file, s] as const))(
    '%s: the sidecar runs non-root, read-only, no privilege escalation, no capabilities, seccomp RuntimeDefault',
    (_file, s) => {
      const pod = podSpec(mustFind(rendered(s), 'Deployment'));
      expect(sidecarOf(pod).securityContext).toMatchObject({
        runAsNonRoot: true,
        runAsUser: 65532,
        readOnlyRootFilesystem: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
        seccompProfile: { type: 'RuntimeDefault' },
      });
      // The pod's context applies to the app too, so it holds no runAsNonRoot (it did: an app image
      // that runs as root could not start); the sidecar container carries its own, asserted above.
      expect(pod.securityContext).toMatchObject({ seccompProfile: { type: 'RuntimeDefault' } });
      expect(pod.securityContext?.runAsNonRoot).toBeUndefined();
      expect(pod.automountServiceAccountToken).toBe(false);
    },
  );
});

describe('classic container mode', () => {
  const s = SCENARIOS.find((x) => x.file === 'classic-values.yaml')!;

  it('is the first regular container, with no initContainer and no restartPolicy', () => {
    const pod = podSpec(mustFind(rendered(s), 'Deployment'));
    expect(pod.initContainers ?? []).toEqual([]);
    expect(pod.containers.map((c) => c.name)).toEqual(['consent-sidecar', 'app']);
    expect(pod.containers[0]!.restartPolicy).toBeUndefined();
    expect(pod.containers[0]!.startupProbe?.httpGet?.path).toBe('/readyz');
  });

  it('holds the app until ready and outlives its last calls, without a shell', () => {
    const pod = podSpec(mustFind(rendered(s), 'Deployment'));
    const lifecycle = pod.containers[0]!.lifecycle;
    const hold = lifecycle?.postStart?.exec?.command ?? [];
    expect(hold.slice(0, 2)).toEqual(['/nodejs/bin/node', '-e']);
    expect(hold[2]).toContain('http://127.0.0.1:7702/readyz');
    expect(lifecycle?.preStop?.exec?.command).toEqual(['/nodejs/bin/node', '-e', 'setTimeout(()=>{},15*1000)']);
    // preStop delay + the sidecar's drain fit in the grace period.
    expect(pod.terminationGracePeriodSeconds).toBe(60);
    expect(pod.terminationGracePeriodSeconds!).toBeGreaterThanOrEqual(15 + 20);
  });

  it('the postStart hold script really waits for /readyz', async () => {
    const { createServer } = await import('node:http');
    let calls = 0;
    const server = createServer((_req, res) => {
      calls += 1;
      res.statusCode = calls < 3 ? 503 : 200;
      res.end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const port = (server.address() as { port: number }).port;
      const objects = await render({ valuesFiles: [valuesPath(s)], kubeVersion: '1.27.0', set: [`ports.admin=${port}`] });
      const script = podSpec(mustFind(objects, 'Deployment')).containers[0]!.lifecycle!.postStart!.exec!.command[2]!;
      const result = await run(process.execPath, ['-e', script]);
      expect(result.code).toBe(0);
      expect(calls).toBe(3);
    } finally {
      server.close();
    }
  });

  it('can use the lifecycle sleep action instead (Kubernetes >= 1.30)', async () => {
    const objects = await render({
      valuesFiles: [valuesPath(s)],
      kubeVersion: '1.30.0',
      set: ['classic.preStopMethod=sleepAction', 'classic.holdApplicationUntilReady=false'],
    });
    expect(objects.flatMap(schemaProblems)).toEqual([]);
    const lifecycle = podSpec(mustFind(objects, 'Deployment')).containers[0]!.lifecycle;
    expect(lifecycle).toEqual({ preStop: { sleep: { seconds: 15 } } });
  });
});

describe('secrets from existing Secrets', () => {
  const s = SCENARIOS.find((x) => x.file === 'existing-secrets-values.yaml')!;

  it('creates no Secret and projects the named keys of the existing ones', () => {
    const objects = rendered(s);
    expect(find(objects, 'Secret')).toBeUndefined();
    const pod = podSpec(mustFind(objects, 'Deployment'));
    const volume = pod.volumes?.find((v) => v.name === 'consent-sidecar-secrets');
    expect(volume?.projected?.sources.map((x) => x.secret)).toEqual([
      { name: 'consent-api', items: [{ key: 'token', path: 'api-key' }] },
      { name: 'consent-webhooks', items: [{ key: 'whsec', path: 'webhook-secrets' }] },
      { name: 'consent-webhooks', items: [{ key: 'header', path: 'webhook-required-header' }] },
      { name: 'consent-app-signing', items: [{ key: 'signing', path: 'app-signing-secret' }] },
    ]);
    // The app's own volume of the app signing secret is the existing Secret too.
    expect(pod.volumes?.find((v) => v.name === 'consent-sidecar-app-signing')).toMatchObject({ secret: { secretName: 'consent-app-signing', items: [{ key: 'signing', path: 'app-signing-secret' }] } });
    const sidecar = sidecarOf(pod);
    expect(env(sidecar).CONSENT_SIDECAR_API_KEY_FILE).toBe(`${SECRET_DIR}/api-key`);
    expect(sidecar.env?.find((e) => e.name === 'CONSENT_SIDECAR_REDIS_URL')).toEqual({
      name: 'CONSENT_SIDECAR_REDIS_URL',
      valueFrom: { secretKeyRef: { name: 'consent-redis', key: 'url' } },
    });
  });
});

describe('signed forwards (secrets.appSigningSecret)', () => {
  const s = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;
  const signingSecretOf = (objects: K8sObject[]): string => {
    const secret = mustFind(objects, 'Secret', `${FULLNAME}-app-signing`) as K8sObject & { data: Record<string, string> };
    expect(Object.keys(secret.data)).toEqual(['app-signing-secret']);
    return Buffer.from(secret.data['app-signing-secret']!, 'base64').toString('utf8');
  };

  it('with the webhook ingress on, the chart makes one secret of 48 random characters and gives it to both containers', () => {
    const objects = rendered(s);
    expect(signingSecretOf(objects)).toMatch(/^[A-Za-z0-9]{48}\n$/);
    const pod = podSpec(mustFind(objects, 'Deployment'));
    expect(env(sidecarOf(pod)).CONSENT_SIDECAR_APP_SIGNING_SECRET_FILE).toBe(`${SECRET_DIR}/app-signing-secret`);
    const app = pod.containers.find((c) => c.name === 'app')!;
    expect(env(app).CONSENT_SIDECAR_APP_SIGNING_SECRET_FILE).toBe(`${APP_SIGNING_DIR}/app-signing-secret`);
    expect(app.volumeMounts).toEqual([{ name: 'consent-sidecar-app-signing', mountPath: APP_SIGNING_DIR, readOnly: true }]);
    // The app's volume holds that one key, nothing of the sidecar's own secrets.
    expect(pod.volumes?.find((v) => v.name === 'consent-sidecar-app-signing')).toEqual({
      name: 'consent-sidecar-app-signing',
      secret: { secretName: `${FULLNAME}-app-signing`, defaultMode: 292, items: [{ key: 'app-signing-secret', path: 'app-signing-secret' }] },
    });
  });

  it('a render that cannot read the release back makes another secret, and the pods do not roll for it (not in the checksum)', async () => {
    const again = await render({ valuesFiles: [valuesPath(s)], kubeVersion: s.kubeVersion });
    expect(signingSecretOf(again)).not.toBe(signingSecretOf(rendered(s)));
    expect(podAnnotations(mustFind(again, 'Deployment'))['checksum/consent-sidecar']).toBe(podAnnotations(mustFind(rendered(s), 'Deployment'))['checksum/consent-sidecar']);
  });

  it('create: false turns signing off: no secret, no file, nothing for the app', async () => {
    const objects = await render({ valuesFiles: [valuesPath(s)], set: ['secrets.appSigningSecret.create=false'] });
    expect(find(objects, 'Secret', `${FULLNAME}-app-signing`)).toBeUndefined();
    const pod = podSpec(mustFind(objects, 'Deployment'));
    expect(env(sidecarOf(pod))).not.toHaveProperty('CONSENT_SIDECAR_APP_SIGNING_SECRET_FILE');
    expect(env(pod.containers.find((c) => c.name === 'app')!)).not.toHaveProperty('CONSENT_SIDECAR_APP_SIGNING_SECRET_FILE');
    expect(pod.volumes?.map((v) => v.name)).toEqual(['consent-sidecar-secrets']);
  });

  it('without the webhook ingress nothing is forwarded: no signing secret', () => {
    const objects = rendered(SCENARIOS.find((x) => x.file === 'include-values.yaml')!);
    expect(objects.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name)).toEqual([FULLNAME]);
  });

  it('the schema refuses an unknown key, a relative mount path and a variable name that is not one', async () => {
    for (const set of ['secrets.appSigningSecret.nope=1', 'secrets.appSigningSecret.appMountPath=relative/dir', 'secrets.appSigningSecret.appEnv=NOT-A-NAME']) {
      const r = await helmTemplateRaw({ valuesFiles: [valuesPath(s)], set: [set] });
      expect(r.code, set).not.toBe(0);
      expect(r.stderr, set).toContain('appSigningSecret');
    }
  });
});

describe('checksum annotation', () => {
  const s = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;
  const checksum = async (set: string[]): Promise<string> =>
    podAnnotations(mustFind(await render({ valuesFiles: [valuesPath(s)], set }), 'Deployment'))['checksum/consent-sidecar'] ?? '';

  it('is on every pod template and changes with configuration and created secrets only', async () => {
    for (const sc of SCENARIOS.filter((x) => x.deployment)) {
      expect(podAnnotations(mustFind(rendered(sc), 'Deployment'))['checksum/consent-sidecar']).toMatch(/^[0-9a-f]{64}$/);
    }
    const base = podAnnotations(mustFind(rendered(s), 'Deployment'))['checksum/consent-sidecar'];
    const [config, secret, same] = await Promise.all([
      checksum(['config.upstreamTimeoutMs=1800']),
      checksum(['secrets.apiKey.value=ck_rotated']),
      checksum(['deployment.replicas=5', 'unsafeUnsharedReplicas=true']),
    ]);
    expect(config).not.toBe(base);
    expect(secret).not.toBe(base);
    expect(same).toBe(base);
  });
});

describe('monitoring', () => {
  it.each(SCENARIOS.map((s) => [s.file, s] as const))('%s: ServiceMonitor and PrometheusRule only when expected', (_file, s) => {
    const objects = rendered(s);
    const kinds = objects.map((o) => o.kind);
    expect(kinds.includes('ServiceMonitor')).toBe(s.monitoring);
    expect(kinds.includes('PrometheusRule')).toBe(s.monitoring);
  });

  it('auto mode follows the cluster: the same values without the API render no monitoring objects', async () => {
    const s = SCENARIOS.find((x) => x.file === 'monitoring-on-values.yaml')!;
    const objects = await render({ valuesFiles: [valuesPath(s)] });
    expect(objects.map((o) => o.kind)).not.toContain('ServiceMonitor');
    expect(objects.map((o) => o.kind)).not.toContain('PrometheusRule');
  });

  it('the ServiceMonitor scrapes the consent-metrics port of the chart Service and sets the job the alerts use', () => {
    const s = SCENARIOS.find((x) => x.file === 'monitoring-on-values.yaml')!;
    const objects = rendered(s);
    const sm = mustFind(objects, 'ServiceMonitor');
    expect(sm.metadata.labels?.release).toBe('kube-prometheus-stack');
    const spec = sm.spec as { selector: { matchLabels: Record<string, string> }; endpoints: Record<string, unknown>[] };
    const service = mustFind(objects, 'Service', APP_NAME);
    for (const [k, v] of Object.entries(spec.selector.matchLabels)) expect(service.metadata.labels?.[k]).toBe(v);
    expect((service.spec as { ports: { name: string }[] }).ports.map((p) => p.name)).toContain('consent-metrics');
    expect(spec.endpoints[0]).toMatchObject({ port: 'consent-metrics', path: '/metrics' });
    expect(spec.endpoints[0]!.relabelings).toEqual([{ action: 'replace', targetLabel: 'job', replacement: FULLNAME }]);
  });

  // The runbook text is the `description` annotation, which Alertmanager's templates expect (it was
  // `runbook`); runbook_url is always set, to the runbooks of docs/operations.md unless the base is set.
  it('every alert has a summary, a description (the runbook) and a severity; runbook_url under the base URL set', () => {
    const s = SCENARIOS.find((x) => x.file === 'monitoring-on-values.yaml')!;
    const rule = mustFind(rendered(s), 'PrometheusRule');
    const rules = (rule.spec as { groups: { rules: { alert: string; labels: Record<string, string>; annotations: Record<string, string> }[] }[] }).groups.flatMap(
      (g) => g.rules,
    );
    expect(rules.map((r) => r.alert).sort()).toEqual([
      'ConsentSidecarCacheBypassed',
      'ConsentSidecarCircuitBreakerOpen',
      'ConsentSidecarDown',
      'ConsentSidecarFailClosedRateHigh',
      'ConsentSidecarPreEvaluationDenials',
      'ConsentSidecarRedecObligationPendingTooLong',
      'ConsentSidecarRedisDown',
      'ConsentSidecarSecretReloadFailing',
      // issue 10: queue mode's dead letters and an old queue
      'ConsentSidecarWebhookDeadLetters',
      'ConsentSidecarWebhookForwardFailures',
      'ConsentSidecarWebhookQueueOld',
      'ConsentSidecarWebhookRejectionsRising',
      'ConsentSidecarWebhookStalledPastLease',
      // events of a type no route takes, kept coming (a route missing in the whole fleet)
      'ConsentSidecarWebhookUnrouted',
    ]);
    for (const r of rules) {
      expect(r.annotations.summary, r.alert).toMatch(/\S/);
      expect(r.annotations.description?.length, r.alert).toBeGreaterThan(80);
      expect(r.annotations.runbook, r.alert).toBeUndefined();
      expect(r.annotations.runbook_url).toBe(`https://runbooks.example.com/consent-sidecar#${r.alert.toLowerCase()}`);
      expect(r.labels).toMatchObject({ team: 'checkout' });
      expect(['critical', 'warning']).toContain(r.labels.severity);
    }
  });

  it('alerts can be switched off one by one', async () => {
    const s = SCENARIOS.find((x) => x.file === 'monitoring-forced-values.yaml')!;
    const objects = await render({ valuesFiles: [valuesPath(s)], set: ['monitoring.prometheusRule.alerts.down.enabled=false'] });
    const rule = mustFind(objects, 'PrometheusRule');
    const names = (rule.spec as { groups: { rules: { alert: string }[] }[] }).groups.flatMap((g) => g.rules.map((r) => r.alert));
    expect(names).not.toContain('ConsentSidecarDown');
    // 7 alerts since ConsentSidecarSecretReloadFailing (issue 13), 8 since ConsentSidecarRedecObligationPendingTooLong
    // (issue 11), 10 since the queue's two (issue 10), 11 since ConsentSidecarRedisDown, 12 since
    // ConsentSidecarWebhookStalledPastLease, 13 since ConsentSidecarCacheBypassed, 14 since
    // ConsentSidecarWebhookUnrouted, less the one switched off.
    expect(names).toHaveLength(13);
  });
});

describe('include in your own chart', () => {
  it('this chart alone renders no Deployment or Service, only the created Secret and monitoring', () => {
    const s = SCENARIOS.find((x) => x.file === 'include-values.yaml')!;
    const objects = rendered(s);
    expect(objects.map((o) => o.kind).sort()).toEqual(['PrometheusRule', 'Secret', 'ServiceMonitor']);
    const sm = mustFind(objects, 'ServiceMonitor');
    expect((sm.spec as { selector: { matchLabels: unknown } }).selector.matchLabels).toEqual({
      'app.kubernetes.io/name': 'shop',
      'app.kubernetes.io/instance': 'shop',
    });
  });

  it('the example parent chart puts the sidecar, its volume, Service ports and checksum in its own objects', () => {
    const deployment = mustFind(example.objects, 'Deployment', 'shop');
    const pod = podSpec(deployment);
    expect(pod.initContainers?.map((c) => [c.name, c.restartPolicy])).toEqual([['consent-sidecar', 'Always']]);
    expect(pod.containers.map((c) => c.name)).toEqual(['shop']);
    expect(env(pod.containers[0]!).CONSENT_BASE_URL).toBe('http://127.0.0.1:7700');
    // One name in both ways: CONSENT_SIDECAR_URL, as the chart's own Deployment gives it (the old one beside it).
    expect(env(pod.containers[0]!).CONSENT_SIDECAR_URL).toBe('http://127.0.0.1:7700');
    expect(env(sidecarOf(pod)).CONSENT_SIDECAR_API_KEY_FILE).toBe(`${SECRET_DIR}/api-key`);
    expect(pod.volumes?.map((v) => v.name)).toEqual(['consent-sidecar-secrets', 'consent-sidecar-app-signing']);
    // Signed forwards in your own chart: appEnv and appVolumeMounts give the app the file and its path.
    expect(env(pod.containers[0]!).CONSENT_SIDECAR_APP_SIGNING_SECRET_FILE).toBe(`${APP_SIGNING_DIR}/app-signing-secret`);
    expect(pod.containers[0]!.volumeMounts).toEqual([{ name: 'consent-sidecar-app-signing', mountPath: APP_SIGNING_DIR, readOnly: true }]);
    expect(podAnnotations(deployment)['checksum/consent-sidecar']).toMatch(/^[0-9a-f]{64}$/);
    const service = mustFind(example.objects, 'Service', 'shop');
    expect((service.spec as { ports: { name: string }[] }).ports.map((p) => p.name)).toEqual(['http', 'consent-webhook', 'consent-metrics']);
    // The subchart's own Deployment is off; its ServiceMonitor selects the parent's Service.
    expect(example.objects.filter((o) => o.kind === 'Deployment')).toHaveLength(1);
    const sm = mustFind(example.objects, 'ServiceMonitor');
    const selector = (sm.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
    for (const [k, v] of Object.entries(selector)) expect(service.metadata.labels?.[k]).toBe(v);
  });

  it('the example\'s ServiceMonitor selects its Service under any release name (the selector is templated)', async () => {
    const vendored = await vendoredExampleChart();
    try {
      const objects = await render({ chart: vendored.dir, release: 'storefront', apiVersions: [MONITORING_API] });
      const service = mustFind(objects, 'Service', 'storefront');
      const sm = mustFind(objects, 'ServiceMonitor');
      const selector = (sm.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels;
      expect(selector['app.kubernetes.io/instance']).toBe('storefront');
      for (const [k, v] of Object.entries(selector)) expect(service.metadata.labels?.[k], k).toBe(v);
    } finally {
      await vendored.cleanup();
    }
  });

  it('the example in classic mode puts the sidecar first among the containers', () => {
    const pod = podSpec(mustFind(example.nativeClassic, 'Deployment', 'shop'));
    expect(pod.initContainers ?? []).toEqual([]);
    expect(pod.containers.map((c) => c.name)).toEqual(['consent-sidecar', 'shop']);
  });
});

describe('tracing values', () => {
  it('render no OTEL_* variable unless tracing.endpoint is set (spans stay off by default)', () => {
    for (const [file, objects] of renders) {
      const deployment = objects.find((o) => o.kind === 'Deployment');
      if (!deployment || file === 'tracing-values.yaml') continue;
      const names = Object.keys(env(sidecarOf((deployment.spec as { template: { spec: PodSpec } }).template.spec)));
      expect(names.filter((n) => n.startsWith('OTEL_')), file).toEqual([]);
    }
  });

  it('set, they are the standard OTEL_* variables of the sidecar container, and only of it', () => {
    const pod = (renders.get('tracing-values.yaml')!.find((o) => o.kind === 'Deployment')!.spec as { template: { spec: PodSpec } }).template.spec;
    const otel = Object.entries(env(sidecarOf(pod))).filter(([n]) => n.startsWith('OTEL_'));
    expect(Object.fromEntries(otel)).toStrictEqual({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://otel-collector.observability:4318',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.05',
      OTEL_SERVICE_NAME: 'shop-consent',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=prod,k8s.cluster.name=eu-1',
    });
    // the app's container is the app's business: it gets none of the sidecar's
    for (const c of [...(pod.containers ?? []), ...(pod.initContainers ?? [])]) {
      if (c === sidecarOf(pod)) continue;
      expect((c.env ?? []).filter((e) => e.name.startsWith('OTEL_')), c.name).toEqual([]);
    }
  });

  it('a sampler the sidecar does not know is refused by the schema, naming it', async () => {
    const s = SCENARIOS.find((x) => x.file === 'native-values.yaml')!;
    const result = await helmTemplateRaw({ valuesFiles: [valuesPath(s)], set: ['tracing.endpoint=http://collector:4318', 'tracing.sampler=sometimes'] });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/tracing\.sampler|sampler/);
  });
});
