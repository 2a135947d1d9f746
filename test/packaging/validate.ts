import { join } from 'node:path';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import ts from 'typescript';
// The example chart's nginx config (forward-auth).
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { ROOT, type K8sObject } from '../helpers/helm.js';

interface Validatable {
  validate(): void;
}

/** Built-in kinds the chart renders, with their kubernetes-models class and typings. */
const BUILTIN: Record<string, { make: (o: K8sObject) => Validatable; typeImport: string; typeName: string }> = {
  'apps/v1/Deployment': {
    make: (o) => new Deployment(o as never),
    typeImport: 'kubernetes-models/apps/v1/Deployment',
    typeName: 'IDeployment',
  },
  'networking.k8s.io/v1/Ingress': {
    make: (o) => new Ingress(o as never),
    typeImport: 'kubernetes-models/networking.k8s.io/v1/Ingress',
    typeName: 'IIngress',
  },
  'networking.k8s.io/v1/NetworkPolicy': {
    make: (o) => new NetworkPolicy(o as never),
    typeImport: 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy',
    typeName: 'INetworkPolicy',
  },
  'policy/v1/PodDisruptionBudget': {
    make: (o) => new PodDisruptionBudget(o as never),
    typeImport: 'kubernetes-models/policy/v1/PodDisruptionBudget',
    typeName: 'IPodDisruptionBudget',
  },
  'v1/Service': { make: (o) => new Service(o as never), typeImport: 'kubernetes-models/v1/Service', typeName: 'IService' },
  'v1/Secret': { make: (o) => new Secret(o as never), typeImport: 'kubernetes-models/v1/Secret', typeName: 'ISecret' },
  'v1/ServiceAccount': {
    make: (o) => new ServiceAccount(o as never),
    typeImport: 'kubernetes-models/v1/ServiceAccount',
    typeName: 'IServiceAccount',
  },
  'v1/ConfigMap': { make: (o) => new ConfigMap(o as never), typeImport: 'kubernetes-models/v1/ConfigMap', typeName: 'IConfigMap' },
};

const CRDS = new Set(['monitoring.coreos.com/v1/ServiceMonitor', 'monitoring.coreos.com/v1/PrometheusRule']);

const key = (o: K8sObject): string => `${o.apiVersion}/${o.kind}`;

/**
 * Problems of one object against the Kubernetes OpenAPI schema (kubernetes-models' JSON-schema
 * validators), or of a prometheus-operator object against its CRD's structure. Empty when valid.
 */
export function schemaProblems(o: K8sObject): string[] {
  const builtin = BUILTIN[key(o)];
  if (builtin) {
    try {
      builtin.make(o).validate();
      return [];
    } catch (err) {
      return [`${key(o)} ${o.metadata.name}: ${(err as Error).message}`];
    }
  }
  if (CRDS.has(key(o))) return crdProblems(o).map((p) => `${key(o)} ${o.metadata.name}: ${p}`);
  return [`${key(o)} ${o.metadata?.name}: kind not known to the tests; add a validator`];
}

/**
 * The OpenAPI validators accept unknown fields (Kubernetes' schemas do not forbid them, and the API
 * server would silently drop them). The official typings do know every field, so the rendered
 * objects are type-checked as object literals: TypeScript's excess-property check then reports any
 * misspelt or misplaced field, at any depth. Returns one message per problem.
 */
export function unknownFieldProblems(objects: readonly K8sObject[]): string[] {
  const builtins = objects.filter((o) => BUILTIN[key(o)]);
  if (builtins.length === 0) return [];
  const imports = new Map<string, string>();
  const lines: string[] = [];
  builtins.forEach((o, i) => {
    const spec = BUILTIN[key(o)]!;
    imports.set(spec.typeName, spec.typeImport);
    lines.push(`// ${key(o)} ${o.metadata.name}`, `export const o${i}: ${spec.typeName} = ${JSON.stringify(o, null, 1)};`);
  });
  const source = [...[...imports].map(([name, from]) => `import type { ${name} } from '${from}';`), ...lines].join('\n');
  const file = join(ROOT, 'test/packaging/__rendered_objects__.ts');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, languageVersion, ...rest) =>
    name === file ? ts.createSourceFile(name, source, languageVersion, true) : getSourceFile(name, languageVersion, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file?.fileName === file || d.file === undefined)
    .map((d) => {
      const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      if (!d.file || d.start === undefined) return text;
      const { line } = d.file.getLineAndCharacterOfPosition(d.start);
      const where = source.split('\n').slice(0, line + 1).reverse().find((l) => l.startsWith('// ')) ?? '';
      return `${where.slice(3)}: ${text}`;
    });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStringMap = (v: unknown): boolean => isObject(v) && Object.values(v).every((x) => typeof x === 'string');
const DURATION = /^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$/;

function only(o: Record<string, unknown>, allowed: readonly string[], where: string): string[] {
  return Object.keys(o)
    .filter((k) => !allowed.includes(k))
    .map((k) => `${where}.${k}: unknown field`);
}

/** Structure of the prometheus-operator objects (the fields this chart uses, checked like the CRD does). */
function crdProblems(o: K8sObject): string[] {
  const problems: string[] = [];
  const spec = o.spec;
  if (!isObject(spec)) return ['spec must be an object'];
  if (!o.metadata?.name || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(o.metadata.name)) problems.push('metadata.name must be a DNS label');
  problems.push(...only(o as Record<string, unknown>, ['apiVersion', 'kind', 'metadata', 'spec'], '$'));
  if (o.kind === 'ServiceMonitor') {
    problems.push(...only(spec, ['endpoints', 'selector', 'namespaceSelector', 'jobLabel'], 'spec'));
    if (!isObject(spec.selector) || !isStringMap(spec.selector.matchLabels) || Object.keys(spec.selector.matchLabels as object).length === 0) {
      problems.push('spec.selector.matchLabels must be a non-empty map of strings');
    }
    const ns = spec.namespaceSelector;
    if (ns !== undefined && !(isObject(ns) && Array.isArray(ns.matchNames) && ns.matchNames.every((n) => typeof n === 'string'))) {
      problems.push('spec.namespaceSelector.matchNames must be a list of strings');
    }
    if (!Array.isArray(spec.endpoints) || spec.endpoints.length === 0) problems.push('spec.endpoints must be a non-empty list');
    for (const [i, ep] of (Array.isArray(spec.endpoints) ? spec.endpoints : []).entries()) {
      const at = `spec.endpoints[${i}]`;
      if (!isObject(ep)) {
        problems.push(`${at} must be an object`);
        continue;
      }
      problems.push(...only(ep, ['port', 'path', 'scheme', 'interval', 'scrapeTimeout', 'relabelings'], at));
      if (typeof ep.port !== 'string' || ep.port.length === 0) problems.push(`${at}.port must be a port name`);
      if (ep.scheme !== undefined && !['http', 'https'].includes(String(ep.scheme))) problems.push(`${at}.scheme must be http or https`);
      for (const d of ['interval', 'scrapeTimeout'] as const) {
        if (ep[d] !== undefined && !(typeof ep[d] === 'string' && DURATION.test(ep[d]))) problems.push(`${at}.${d} must be a duration`);
      }
      for (const [j, r] of (Array.isArray(ep.relabelings) ? ep.relabelings : []).entries()) {
        if (!isObject(r)) problems.push(`${at}.relabelings[${j}] must be an object`);
        else {
          problems.push(...only(r, ['action', 'targetLabel', 'replacement', 'sourceLabels', 'regex', 'separator'], `${at}.relabelings[${j}]`));
          if (r.action !== undefined && !['replace', 'keep', 'drop', 'labelmap', 'labeldrop', 'labelkeep'].includes(String(r.action))) {
            problems.push(`${at}.relabelings[${j}].action is not a relabel action`);
          }
        }
      }
    }
  } else {
    problems.push(...only(spec, ['groups'], 'spec'));
    if (!Array.isArray(spec.groups) || spec.groups.length === 0) problems.push('spec.groups must be a non-empty list');
    for (const [i, g] of (Array.isArray(spec.groups) ? spec.groups : []).entries()) {
      if (!isObject(g) || typeof g.name !== 'string' || !Array.isArray(g.rules)) {
        problems.push(`spec.groups[${i}] needs a name and rules`);
        continue;
      }
      for (const [j, r] of g.rules.entries()) {
        const at = `spec.groups[${i}].rules[${j}]`;
        if (!isObject(r)) {
          problems.push(`${at} must be an object`);
          continue;
        }
        problems.push(...only(r, ['alert', 'record', 'expr', 'for', 'labels', 'annotations'], at));
        if (typeof r.expr !== 'string' || r.expr.length === 0) problems.push(`${at}.expr must be a string`);
        if (typeof r.alert !== 'string' && typeof r.record !== 'string') problems.push(`${at} needs alert or record`);
        if (r.for !== undefined && !(typeof r.for === 'string' && DURATION.test(r.for))) problems.push(`${at}.for must be a duration`);
        if (r.labels !== undefined && !isStringMap(r.labels)) problems.push(`${at}.labels must be a map of strings`);
        if (r.annotations !== undefined && !isStringMap(r.annotations)) problems.push(`${at}.annotations must be a map of strings`);
      }
    }
  }
  return problems;
}
