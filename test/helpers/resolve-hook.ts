import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A module resolve hook for a child process (`NODE_OPTIONS: --import=<file>`): it writes
 * `RESOLVED <url>` on stderr for every module resolved whose URL contains one of `watched`, in
 * thread where Node has `registerHooks` (22.15, 24), so the line is written before the import
 * returns. What a process loaded can then be read from its output.
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
`,
  );
  return { file, env: { NODE_OPTIONS: `--import=${file}` }, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
