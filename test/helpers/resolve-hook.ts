import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A module resolve hook for a child process (`NODE_OPTIONS: --import=<file>`): it writes
 * `RESOLVED <url>` on stderr for every module resolved whose URL contains one of `watched`, in
 * thread where Node has `registerHooks` (22.15, 24), so the line is written before the import
 * returns. Built-ins are also written as `RESOLVED node:<name>` when the process exits, from node's
 * own list of what it loaded: the bundle takes them from `process.getBuiltinModule`, which no
 * resolve hook sees. What a process loaded can then be read from its output.
 */
export function resolveHook(watched: readonly string[]): { file: string; env: Record<string, string>; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'resolve-hook-'));
  const list = JSON.stringify(watched);
  const body = (next: string): string => `const r = ${next};
  if (${list}.some((w) => r.url.includes(w))) process.stderr.write('RESOLVED ' + r.url + '\\n');
  return r;`;
  writeFileSync(join(dir, 'hooks.mjs'), `export async function resolve(specifier, context, next) {\n  ${body('await next(specifier, context)')}\n}\n`);
  const file = join(dir, 'hook.mjs');
  writeFileSync(
    file,
    `import * as m from 'node:module';
if (m.registerHooks) m.registerHooks({ resolve(specifier, context, next) {
  ${body('next(specifier, context)')}
} });
else m.register('./hooks.mjs', import.meta.url);
process.on('exit', () => {
  for (const entry of process.moduleLoadList) {
    if (!entry.startsWith('NativeModule ')) continue;
    const id = 'node:' + entry.slice('NativeModule '.length);
    if (${list}.some((w) => id.includes(w))) process.stderr.write('RESOLVED ' + id + '\\n');
  }
});
`,
  );
  return { file, env: { NODE_OPTIONS: `--import=${file}` }, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Where the CLI's bundle lives (scripts/bundle.mjs); its files hold many modules each. */
export const BUNDLE_DIR = '/dist/bundle/';

let bundleMeta: { outputs: Record<string, { inputs: Record<string, unknown> }> } | undefined;

/**
 * The modules behind the URLs a resolve hook reported: a file of the CLI's bundle stands for the
 * modules it holds (from the bundle's metafile, `/node_modules/...`, `/dist/...`); any other URL for
 * itself. Throws on a bundle file the metafile does not know (a stale build).
 */
export function modulesLoaded(output: string): string[] {
  bundleMeta ??= JSON.parse(readFileSync(new URL('../../dist/bundle/meta.json', import.meta.url), 'utf8')) as NonNullable<typeof bundleMeta>;
  const urls = new Set([...output.matchAll(/^RESOLVED (\S+)$/gm)].map((m) => m[1]!));
  const modules: string[] = [];
  for (const url of urls) {
    const at = url.indexOf(BUNDLE_DIR);
    if (at === -1) {
      modules.push(url);
      continue;
    }
    const file = `dist/bundle/${url.slice(at + BUNDLE_DIR.length)}`;
    const out = bundleMeta.outputs[file];
    if (!out) throw new Error(`${file}: not in the bundle's metafile (a stale build: npm run build)`);
    modules.push(...Object.keys(out.inputs).map((i) => `/${i}`));
  }
  return modules;
}
