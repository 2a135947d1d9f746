import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import type { OpenAPIV3_1 } from 'openapi-types';
import { parse } from 'yaml';
import { afterAll, expect } from 'vitest';

/** The document that ships in the package. */
export const OPENAPI_URL = new URL('../../openapi/consent-sidecar.yaml', import.meta.url);

/** The document as written (with its `$ref`s), parsed from YAML. A fresh copy each call. */
export function documentAsWritten(text = readFileSync(OPENAPI_URL, 'utf8')): OpenAPIV3_1.Document {
  return parse(text, { maxAliasCount: 100 }) as OpenAPIV3_1.Document;
}

/** Validates a document as OpenAPI 3.1 (the official schema, and every `$ref` resolving); throws what is wrong. */
export async function lintDocument(doc: OpenAPIV3_1.Document): Promise<void> {
  await SwaggerParser.validate(structuredClone(doc) as never);
}

/** What a real HTTP exchange answered, as the contract judges it. */
export interface Exchange {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  /** The body as received (empty for none). */
  readonly text: string;
}

type Operation = OpenAPIV3_1.OperationObject;
type Response = OpenAPIV3_1.ResponseObject;
type Header = OpenAPIV3_1.HeaderObject;
type Parameter = OpenAPIV3_1.ParameterObject;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
const mediaType = (v: string | string[] | undefined): string | undefined => (typeof v === 'string' ? v.split(';', 1)[0]!.trim().toLowerCase() : undefined);

/**
 * The document, dereferenced, as a judge of real answers: {@link answer} validates one response of
 * the sidecar against its path, method and status (headers, media type, body: JSON Schema 2020-12
 * with ajv), {@link appReceived} one request the app got (the `webhooks` section), and both record
 * what was exercised, as `METHOD /path status` and `WEBHOOK name`.
 */
export class Contract {
  private readonly ajv = new Ajv2020({ strict: true, allErrors: true });
  private readonly compiled = new WeakMap<object, ValidateFunction>();
  private readonly seen = new Set<string>();

  private constructor(readonly doc: OpenAPIV3_1.Document) {
    // OpenAPI's own keywords beside JSON Schema's (none used today; a document may add them).
    for (const k of ['example', 'xml', 'externalDocs', 'discriminator']) this.ajv.addKeyword(k);
  }

  static async load(o: { doc?: OpenAPIV3_1.Document } = {}): Promise<Contract> {
    const doc = (await SwaggerParser.dereference(structuredClone(o.doc ?? documentAsWritten()) as never)) as OpenAPIV3_1.Document;
    return new Contract(doc);
  }

  /** Every `METHOD /path status` and `WEBHOOK name` the document describes. */
  entries(): string[] {
    const out: string[] = [];
    for (const [path, item] of Object.entries(this.doc.paths ?? {})) {
      for (const m of METHODS) {
        const op = item?.[m] as Operation | undefined;
        for (const status of Object.keys(op?.responses ?? {})) out.push(`${m.toUpperCase()} ${path} ${status}`);
      }
    }
    for (const name of Object.keys(this.doc.webhooks ?? {})) out.push(`WEBHOOK ${name}`);
    return out.sort();
  }

  /** What was exercised so far (see {@link entries}). */
  exercised(): ReadonlySet<string> {
    return this.seen;
  }

  /** The document's path template for a concrete path: itself, else the templated path that matches, else the catch-all. */
  templateOf(path: string): string {
    const bare = path.split('?', 1)[0]!;
    const paths = Object.keys(this.doc.paths ?? {});
    if (paths.includes(bare)) return bare;
    const templated = paths.filter((p) => p.includes('{')).sort((a, b) => b.split('/').length - a.split('/').length);
    for (const p of templated) {
      // A template's parameter may hold slashes (the passthrough's operation, forward-auth's original path).
      const re = new RegExp(`^${p.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '.+')}$`);
      if (re.test(bare)) return p;
    }
    throw new Error(`no path of the document matches ${bare}`);
  }

  /**
   * Judges one answer; throws listing every way it differs from the document. `path` is the
   * concrete path asked (or `as` names the template, where the listener decides: a 404 of `/webhooks`
   * on the decision listener is the catch-all's).
   */
  answer(method: string, path: string, res: Exchange, as?: string): void {
    const template = as ?? this.templateOf(path);
    const op = (this.doc.paths?.[template] as Record<string, Operation> | undefined)?.[method.toLowerCase()];
    if (!op) throw new Error(`the document has no ${method} ${template}`);
    const responses = op.responses ?? {};
    const key = [String(res.status), `${String(res.status)[0]}XX`, 'default'].find((k) => k in responses);
    const where = `${method.toUpperCase()} ${template} → ${res.status}`;
    if (key === undefined) throw new Error(`${where}: status not in the document (it has ${Object.keys(responses).join(', ')})\n${res.text.slice(0, 300)}`);
    const spec = responses[key] as Response;
    const problems = [...this.headerProblems(spec.headers as Record<string, Header> | undefined, res.headers, 'response header')];
    if (method.toUpperCase() !== 'HEAD') problems.push(...this.bodyProblems(spec.content, res.headers['content-type'], res.text));
    if (problems.length > 0) throw new Error(`${where} differs from the document:\n  ${problems.join('\n  ')}\nbody: ${res.text.slice(0, 300)}`);
    this.seen.add(`${method.toUpperCase()} ${template} ${key}`);
  }

  /** Judges one request the app received from the sidecar against `webhooks.<name>`. */
  appReceived(name: string, req: { headers: IncomingHttpHeaders; text: string }): void {
    const op = (this.doc.webhooks?.[name] as { post?: Operation } | undefined)?.post;
    if (!op) throw new Error(`the document has no webhook ${name}`);
    const headers = Object.fromEntries(((op.parameters ?? []) as Parameter[]).filter((p) => p.in === 'header').map((p) => [p.name, p as Header]));
    const body = (op.requestBody as OpenAPIV3_1.RequestBodyObject | undefined)?.content;
    const problems = [...this.headerProblems(headers, req.headers, 'request header'), ...this.bodyProblems(body, req.headers['content-type'], req.text)];
    if (problems.length > 0) throw new Error(`webhook ${name} differs from the document:\n  ${problems.join('\n  ')}\nbody: ${req.text.slice(0, 300)}`);
    this.seen.add(`WEBHOOK ${name}`);
  }

  /** A schema of the document by name, compiled (for enums and shapes a test looks at directly). */
  schema(name: string): OpenAPIV3_1.SchemaObject {
    const s = this.doc.components?.schemas?.[name];
    if (!s) throw new Error(`no schema ${name}`);
    return s as OpenAPIV3_1.SchemaObject;
  }

  private validator(schema: object): ValidateFunction {
    let v = this.compiled.get(schema);
    if (!v) this.compiled.set(schema, (v = this.ajv.compile(schema)));
    return v;
  }

  private validate(schema: object, value: unknown, what: string): string[] {
    const v = this.validator(schema);
    return v(value) ? [] : (v.errors ?? []).map((e) => `${what}${e.instancePath}: ${e.message ?? 'invalid'}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
  }

  private headerProblems(spec: Record<string, Header> | undefined, got: IncomingHttpHeaders, kind: string): string[] {
    const problems: string[] = [];
    for (const [rawName, h] of Object.entries(spec ?? {})) {
      const name = rawName.toLowerCase();
      const value = got[name];
      if (value === undefined) {
        if (h.required) problems.push(`${kind} ${name} is required and absent`);
        continue;
      }
      if (Array.isArray(value)) problems.push(`${kind} ${name} given ${value.length} times`);
      else if (h.schema) problems.push(...this.validate(h.schema, value, `${kind} ${name}`));
    }
    return problems;
  }

  private bodyProblems(content: Record<string, OpenAPIV3_1.MediaTypeObject> | undefined, contentType: string | string[] | undefined, text: string): string[] {
    if (content === undefined) return [];
    const type = mediaType(contentType);
    const media = type === undefined ? undefined : content[type];
    if (!media) return [`content-type ${String(contentType)} is not one of ${Object.keys(content).join(', ')}`];
    if (!media.schema) return [];
    if (type !== 'application/json') return this.validate(media.schema, text, 'body');
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return ['body is not JSON'];
    }
    return this.validate(media.schema, value, 'body');
  }
}

/** Every test of a suite, however deeply nested. */
function testsOf(suite: { tasks?: readonly unknown[] }): { mode: string }[] {
  return (suite.tasks ?? []).flatMap((t) => ((t as { type: string }).type === 'suite' ? testsOf(t as { tasks: unknown[] }) : [t as { mode: string }]));
}

/**
 * Registers, in the calling file, a check that runs once every test of the file has (whatever their
 * order: shuffled, or in parallel): each `claimed` entry was exercised by one of them. A run that
 * leaves some of the file's tests out (`-t`, `.only`) exercises less on purpose, and is not judged.
 */
export function checkClaimsAfterAll(contract: () => Contract, claimed: readonly string[]): void {
  // The hook context comes first (vitest reads its destructuring for fixtures); the file, second.
  afterAll(({}, file) => {
    if (testsOf(file).some((t) => t.mode !== 'run')) return;
    expect(claimed.filter((e) => !contract().exercised().has(e)), 'claimed by this file and exercised by none of its tests').toEqual([]);
  });
}
