import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVE_OPTIONS, envName } from '../../src/config/options.js';
import { CHART, helmTemplateRaw, mustFind, parseYamlStream, render, type K8sObject } from '../helpers/helm.js';
import { SCENARIOS, valuesPath } from './scenarios.js';

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  items?: Schema;
  $ref?: string;
  $defs?: Record<string, Schema>;
  enum?: unknown[];
};

/** Flags the chart sets itself rather than from `config` (listen addresses from `ports`, secrets as files). */
const CHART_OWNED_FLAGS = new Set([
  'listen',
  'webhook-listen',
  'admin-listen',
  // From grpc.enabled, grpc.bindAddress and grpc.port.
  'grpc-listen',
  'api-key',
  'api-key-file',
  'webhook-secret',
  'webhook-secret-file',
  'webhook-required-header',
  'webhook-required-header-file',
  // From secrets.appSigningSecret: made by the chart, or an existing Secret, as a file.
  'app-signing-secret',
  'app-signing-secret-file',
  'redis-url-file',
  'redis-cluster-nodes-file',
  'redis-sentinels-file',
  'redis-tls-ca-file',
  // A secret: never a values key; its file form is config.decisionLogHashKeyFile.
  'decision-log-hash-key',
]);

/** Kubernetes objects the schema passes through whole (too large to restate); Kubernetes validates them. */
const PASSTHROUGH = new Set([
  'global',
  'deployment.affinity',
  'deployment.volumes[]',
  'deployment.topologySpreadConstraints[].labelSelector',
  'deployment.app.lifecycle.postStart',
  'deployment.app.lifecycle.preStop',
  '$defs.envVar.valueFrom',
  '$defs.probe.exec',
  '$defs.probe.httpGet',
  '$defs.probe.tcpSocket',
  '$defs.probe.grpc',
  // Kubernetes LabelSelectors of NetworkPolicy peers.
  '$defs.networkPolicyPeers[].podSelector',
  '$defs.networkPolicyPeers[].namespaceSelector',
]);

const camel = (flag: string): string => flag.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());

let schema: Schema;
let defaults: Record<string, unknown>;
let valuesText: string;
let work: string;

beforeAll(async () => {
  schema = JSON.parse(await readFile(join(CHART, 'values.schema.json'), 'utf8')) as Schema;
  valuesText = await readFile(join(CHART, 'values.yaml'), 'utf8');
  defaults = (await parseYamlStream(valuesText))[0] as Record<string, unknown>;
  work = await mkdtemp(join(tmpdir(), 'consent-sidecar-values-'));
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

const base = valuesPath(SCENARIOS.find((s) => s.file === 'native-values.yaml')!);

async function templateWith(extra: string, set: string[] = []): Promise<{ code: number; stderr: string }> {
  const file = join(work, `extra-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(file, extra);
  return helmTemplateRaw({ valuesFiles: [base, file], set });
}

describe('values.schema.json', () => {
  it.each([
    ['an unknown top-level key', 'replica: 3\n', /Additional property replica is not allowed/],
    ['a misspelt config key', 'config:\n  upstreamTimeoutMS: 1500\n', /config: Additional property upstreamTimeoutMS is not allowed/],
    ['an unknown key deep inside', 'monitoring:\n  serviceMonitor:\n    intervall: 15s\n', /intervall is not allowed/],
    ['an unknown securityContext field', 'securityContext:\n  readOnlyRootFs: true\n', /readOnlyRootFs is not allowed/],
    ['a string for a number', 'config:\n  cacheMaxEntries: "lots"\n', /config\.cacheMaxEntries: Invalid type/],
    ['a fraction for an integer', 'config:\n  upstreamTimeoutMs: 1.5\n', /config\.upstreamTimeoutMs: Invalid type/],
    ['a string for a port', 'ports:\n  admin: "7702"\n', /ports\.admin: Invalid type/],
    ['a string for a boolean', 'deployment:\n  enabled: "yes"\n', /deployment\.enabled: Invalid type/],
    ['an unknown mode', 'mode: sidecar\n', /mode must be one of/],
    ['a webhook secret without whsec_', 'secrets:\n  webhookSecrets:\n    values: ["abc"]\n', /webhookSecrets\.values\.0: Does not match pattern/],
    ['a bad log level', 'config:\n  logLevel: verbose\n', /config\.logLevel must be one of/],
  ])('helm template fails on %s', async (_what, extra, message) => {
    const result = await templateWith(extra);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
  });

  it('is strict everywhere: every object lists its keys, except named Kubernetes pass-throughs', () => {
    const loose: string[] = [];
    const walk = (node: Schema, path: string): void => {
      const isObject = node.type === 'object' || (Array.isArray(node.type) && node.type.includes('object')) || node.properties;
      if (isObject && !node.$ref) {
        const ap = node.additionalProperties;
        if (ap === undefined || ap === true) {
          if (!PASSTHROUGH.has(path)) loose.push(path);
        } else if (node.properties && ap !== false) {
          loose.push(`${path} (properties with open additionalProperties)`);
        }
      }
      for (const [k, child] of Object.entries(node.properties ?? {})) walk(child, path ? `${path}.${k}` : k);
      if (node.items) walk(node.items, `${path}[]`);
      if (typeof node.additionalProperties === 'object') walk(node.additionalProperties, `${path}{}`);
    };
    walk(schema, '');
    for (const [k, def] of Object.entries(schema.$defs ?? {})) walk(def, `$defs.${k}`);
    expect(loose).toEqual([]);
  });

  it('every serve flag can be set from values (config.<camelCase>) or is set by the chart', () => {
    const configKeys = Object.keys(schema.properties!.config!.properties!);
    const missing = SERVE_OPTIONS.filter((o) => !CHART_OWNED_FLAGS.has(o.name) && !configKeys.includes(camel(o.name))).map((o) => o.name);
    expect(missing).toEqual([]);
    // And nothing in config that is not a flag.
    const flags = new Set(SERVE_OPTIONS.map((o) => camel(o.name)));
    expect(configKeys.filter((k) => !flags.has(k))).toEqual([]);
  });
});

describe('values to environment', () => {
  it('each config key becomes exactly its flag variable, and the chart-owned flags theirs', async () => {
    const configSchema = schema.properties!.config!.properties!;
    const config: Record<string, unknown> = {};
    for (const [key, s] of Object.entries(configSchema)) {
      const types = ([] as string[]).concat(s.type ?? []);
      if (s.enum) config[key] = s.enum.find((x) => x !== null);
      else if (types.includes('integer')) config[key] = 1_000_000;
      else if (types.includes('number')) config[key] = 0.5;
      else if (types.includes('array')) config[key] = key === 'allowedHost' ? ['a.internal', 'b.internal'] : key === 'appWebhookIgnore' ? ['z.*', 'w'] : ['x.*=http://127.0.0.1:8080/x', 'y=http://127.0.0.1:8080/y'];
      else if (key.endsWith('Url')) config[key] = key === 'redisUrl' ? 'redis://redis:6379' : 'http://127.0.0.1:8080/x';
      else if (key === 'webhookPath') config[key] = '/hooks';
      else config[key] = 'x';
    }
    const file = join(work, 'all-config.json');
    await writeFile(file, JSON.stringify({ config }));
    const objects = await render({ valuesFiles: [base, file] });
    const sidecar = (mustFind(objects, 'Deployment').spec as { template: { spec: { initContainers: K8sObject[] } } }).template.spec
      .initContainers[0] as unknown as { env: { name: string; value?: string }[] };
    const names = sidecar.env.map((e) => e.name).sort();
    const expected = SERVE_OPTIONS.filter(
      (o) => !CHART_OWNED_FLAGS.has(o.name) || ['listen', 'webhook-listen', 'admin-listen'].includes(o.name),
    ).map((o) => envName(o.name));
    expected.push(envName('api-key-file'), envName('webhook-secret-file'), envName('webhook-required-header-file'), envName('app-signing-secret-file'));
    expect(names).toEqual(expected.sort());
    // Big integers survive Helm's float values as integers.
    expect(sidecar.env.find((e) => e.name === envName('cache-max-ttl-ms'))?.value).toBe('1000000');
  });

  it.each([
    ['no upstream URL', 'config:\n  upstreamUrl: ""\n', /config\.upstreamUrl is required/],
    ['no sidecar image repository (none is published)', 'image:\n  repository: ""\n', /image\.repository is required/],
    ['no API key', 'secrets:\n  apiKey:\n    value: ""\n', /secrets\.apiKey: the API key is required/],
    ['an API key twice', 'secrets:\n  apiKey:\n    existingSecret: k\n', /set existingSecret or value, not both/],
    ['webhook ingress without secrets', 'secrets:\n  webhookSecrets:\n    values: []\n', /needs the signing secrets/],
    ['a Redis URL twice', 'config:\n  redisUrl: redis://r:6379\nsecrets:\n  redisUrl:\n    existingSecret: r\n', /secrets\.redisUrl: set secrets\.redisUrl\.existingSecret or config\.redisUrl, not both/],
    ['no application image for the standalone Deployment', 'deployment:\n  app:\n    image: ""\n', /deployment\.app\.image is required/],
    [
      'a ServiceMonitor with nothing to select',
      'deployment:\n  enabled: false\nmonitoring:\n  mode: always\n',
      /monitoring\.serviceMonitor\.selector/,
    ],
  ])('helm template fails with a clear message on %s', async (_what, extra, message) => {
    const result = await templateWith(extra);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
  });
});

describe('values.yaml', () => {
  it('sets every key the schema knows (no hidden options), and the image tag is the appVersion', async () => {
    const missing: string[] = [];
    const walk = (node: Schema, value: unknown, path: string): void => {
      if (!node.properties || node.$ref) return;
      for (const [k, child] of Object.entries(node.properties)) {
        const p = path ? `${path}.${k}` : k;
        if (p === 'global') continue;
        const v = (value as Record<string, unknown> | undefined)?.[k];
        if (v === undefined) missing.push(p);
        // An empty default ({} or []) is a Kubernetes object left out; its fields are not options.
        else if (typeof v === 'object' && v !== null && Object.keys(v).length > 0) walk(child, v, p);
      }
    };
    walk(schema, defaults, '');
    expect(missing).toEqual([]);
    const chart = await readFile(join(CHART, 'Chart.yaml'), 'utf8');
    expect(chart).toMatch(new RegExp(`^appVersion: "${(defaults.image as { tag: string }).tag}"$`, 'm'));
  });

  it('documents every key where it stands (a comment right above each key that holds a value)', () => {
    const lines = valuesText.split('\n');
    const indentOf = (l: string): number => l.length - l.trimStart().length;
    const commentAbove = (i: number, marker: RegExp): boolean => marker.test(lines[i - 1] ?? '');
    /** A key inside a default value documented as a whole (its ancestor has a "# --" comment). */
    const underDocumentedValue = (i: number): boolean => {
      let indent = indentOf(lines[i]!);
      for (let k = i - 1; k >= 0 && indent > 0; k--) {
        const l = lines[k]!;
        if (l.trim() === '' || l.trim().startsWith('#') || l.trim().startsWith('-') || indentOf(l) >= indent) continue;
        indent = indentOf(l);
        if (commentAbove(k, /^\s*# --/)) return true;
      }
      return false;
    };
    const undocumented = lines.flatMap((line, i) => {
      const m = /^\s*(?:- )?[A-Za-z][\w-]*:\s*(\S.*)?$/.exec(line);
      if (!m || m[1] === undefined) return []; // a section header: its keys are documented below it
      if (commentAbove(i, /^\s*#/) || underDocumentedValue(i)) return [];
      return [`line ${i + 1}: ${line.trim()}`];
    });
    expect(undocumented).toEqual([]);
  });

  it('the defaults alone do not render, and one run names every missing value: image, upstream URL, API key, app image', async () => {
    const result = await helmTemplateRaw({});
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('4 problem(s)');
    expect(result.stderr).toMatch(/image\.repository is required/);
    expect(result.stderr).toMatch(/config\.upstreamUrl is required/);
    expect(result.stderr).toMatch(/the API key is required/);
    expect(result.stderr).toMatch(/deployment\.app\.image is required/);
  });
});
