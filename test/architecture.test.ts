import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

/** Every specifier a file names: static and type-only imports, `export … from`, `import()` and `import('…')` types. */
function specifiersOf(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteralLike(node.arguments[0])) {
      found.push(node.arguments[0].text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      found.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const path = join(dir, d.name);
    if (d.isDirectory()) return sourceFiles(path);
    return d.name.endsWith('.ts') ? [path] : [];
  });
}

/** One module of src/ and what it imports: `deps` are other modules of src/ (paths relative to src/), `packages` the rest. */
interface Module {
  readonly deps: readonly string[];
  readonly packages: readonly string[];
}

function importGraph(): Map<string, Module> {
  const graph = new Map<string, Module>();
  for (const file of sourceFiles(SRC)) {
    const deps: string[] = [];
    const packages: string[] = [];
    for (const spec of specifiersOf(file)) {
      if (spec.startsWith('.')) deps.push(relative(SRC, resolve(dirname(file), spec)).replace(/\.js$/, '.ts'));
      else packages.push(spec);
    }
    graph.set(relative(SRC, file), { deps, packages });
  }
  return graph;
}

/**
 * The files caught in cycles, one group per strongly connected component (Tarjan), each shown as
 * the shortest cycle through its first file: `a.ts → b.ts → a.ts`.
 */
function cyclesOf(graph: Map<string, Module>): string[] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const components: string[][] = [];
  const connect = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)?.deps ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)!.deps.includes(v)) components.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) connect(v);
  return components.map((component) => shortestCycle(graph, component));
}

/** Breadth first from the component's first file back to it, through the component only. */
function shortestCycle(graph: Map<string, Module>, component: readonly string[]): string {
  const inside = new Set(component);
  const start = component[0]!;
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const v = queue.shift()!;
    for (const w of graph.get(v)!.deps) {
      if (w === start) {
        const path = [start];
        for (let at: string | undefined = v; at !== undefined && at !== start; at = cameFrom.get(at)) path.unshift(at);
        return [start, ...path].join(' → ');
      }
      if (inside.has(w) && !cameFrom.has(w)) {
        cameFrom.set(w, v);
        queue.push(w);
      }
    }
  }
  return component.join(', ');
}

/**
 * Every function of `text` longer than `maxLines` (declarations, methods, constructors, accessors,
 * function expressions and arrows; an inner function counts within its outer one too), as
 * `file:line name (n lines)`.
 */
function longFunctions(file: string, text: string, maxLines: number): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: string[] = [];
  const nameOf = (node: ts.FunctionLikeDeclaration): string => {
    if (node.name && (ts.isIdentifier(node.name) || ts.isStringLiteral(node.name) || ts.isPrivateIdentifier(node.name))) return node.name.text;
    if (ts.isConstructorDeclaration(node)) return 'constructor';
    const parent = node.parent;
    if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && ts.isIdentifier(parent.name)) return parent.name.text;
    return '(anonymous)';
  };
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body) {
      const fn = node as ts.FunctionLikeDeclaration;
      const first = source.getLineAndCharacterOfPosition(fn.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(fn.getEnd()).line;
      const lines = last - first + 1;
      if (lines > maxLines) found.push(`${file}:${first + 1} ${nameOf(fn)} (${lines} lines)`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

const graph = importGraph();
const under = (folder: string) => (path: string) => path.startsWith(`${folder}/`);
/** Every edge `from → to` where `from` matches and `to` matches. */
function edges(from: (p: string) => boolean, to: (p: string) => boolean): string[] {
  return [...graph].filter(([p]) => from(p)).flatMap(([p, m]) => m.deps.filter(to).map((d) => `${p} → ${d}`));
}
function packageEdges(from: (p: string) => boolean, to: (spec: string) => boolean): string[] {
  return [...graph].filter(([p]) => from(p)).flatMap(([p, m]) => m.packages.filter(to).map((d) => `${p} → ${d}`));
}

const CAPABILITIES = ['decision', 'webhooks', 'redec', 'redis', 'config', 'observability', 'lib', 'simulator', 'client'];
const capability = (p: string): boolean => CAPABILITIES.some((c) => under(c)(p));
const listener = (p: string): boolean => under('http')(p) || under('grpc')(p);
/** What both listeners share, below them: the decision boundary, the verdict mapping, the decision headers, the connection gate. */
const edge = under('edge');
/** The assembly room: the composition root and the wiring that builds and starts each room. */
const assembly = under('assembly');
/** The one entry point at the root of src/: the CLI's (the bin). */
const ENTRY_POINTS = ['cli.ts'];
/** The most lines a function of the assembly room may take: it is read at a glance. */
const ASSEMBLY_MAX_FUNCTION_LINES = 60;

describe('the import graph of src/', () => {
  it('is read whole: every relative import names a file of src/', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect([...graph].flatMap(([p, m]) => m.deps.filter((d) => !graph.has(d)).map((d) => `${p} → ${d}`))).toEqual([]);
    expect(edges(() => true, under('config')).length).toBeGreaterThan(10);
  });

  it('has no cycle', () => {
    expect(cyclesOf(graph)).toEqual([]);
  });

  it('finds a cycle when there is one (the check can fail)', () => {
    const circle = new Map<string, Module>([
      ['a.ts', { deps: ['b.ts'], packages: [] }],
      ['b.ts', { deps: ['c.ts'], packages: [] }],
      ['c.ts', { deps: ['a.ts'], packages: [] }],
      ['d.ts', { deps: ['a.ts'], packages: [] }],
    ]);
    expect(cyclesOf(circle)).toEqual(['a.ts → b.ts → c.ts → a.ts']);
  });

  it('nothing imports the CLI but src/cli.ts', () => {
    expect(edges((p) => p !== 'cli.ts' && !under('cli')(p), under('cli'))).toEqual([]);
  });

  it('every file of src/ is in a room the rules here know, and none at the root but the entry points', () => {
    const known = (p: string): boolean => capability(p) || listener(p) || edge(p) || assembly(p) || under('cli')(p) || ENTRY_POINTS.includes(p);
    expect([...graph.keys()].filter((p) => !known(p))).toEqual([]);
    expect([...graph.keys()].filter((p) => !p.includes('/')).sort()).toEqual(ENTRY_POINTS);
  });

  it('a capability never imports a listener (src/http, src/grpc), the edge or the assembly room', () => {
    expect(edges(capability, (d) => listener(d) || edge(d) || assembly(d))).toEqual([]);
  });

  it('the edge (src/edge) imports neither listener nor the assembly room: both listeners import it', () => {
    expect(edges(edge, (d) => listener(d) || assembly(d))).toEqual([]);
    expect(edges(under('http'), edge).length).toBeGreaterThan(0);
    expect(edges(under('grpc'), edge).length).toBeGreaterThan(0);
  });

  it('src/grpc never imports src/http (what both need is in the edge)', () => {
    expect(edges(under('grpc'), under('http'))).toEqual([]);
  });

  it('nothing imports the assembly room but the CLI', () => {
    expect(edges((p) => !assembly(p) && !under('cli')(p), assembly)).toEqual([]);
  });

  it(`the assembly room holds the composition root, and no function of it is over ${ASSEMBLY_MAX_FUNCTION_LINES} lines`, () => {
    const files = [...graph.keys()].filter(assembly).sort();
    expect(files).toContain('assembly/sidecar.ts');
    expect(files.flatMap((f) => longFunctions(f, readFileSync(join(SRC, f), 'utf8'), ASSEMBLY_MAX_FUNCTION_LINES))).toEqual([]);
  });

  it('finds a function over the limit when there is one (the check can fail)', () => {
    const body = Array.from({ length: 60 }, (_, i) => `  const v${i} = ${i};`).join('\n');
    const text = `export async function startAll(): Promise<void> {\n${body}\n}\nconst short = () => {\n  return 1;\n};\nclass Room {\n  close(): void {\n${body}\n  }\n}\n`;
    expect(longFunctions('a.ts', text, 60)).toEqual(['a.ts:1 startAll (62 lines)', 'a.ts:67 close (62 lines)']);
  });

  it('decision and webhooks never import src/redis or a Redis client', () => {
    const policy = (p: string): boolean => under('decision')(p) || under('webhooks')(p);
    expect(edges(policy, under('redis'))).toEqual([]);
    expect(packageEdges(policy, (s) => s === '@redis/client' || s.startsWith('@redis/'))).toEqual([]);
  });

  it('the listeners of src/http stay on node:http: no express', () => {
    expect(packageEdges(under('http'), (s) => s === 'express' || s.startsWith('express/'))).toEqual([]);
  });
});
