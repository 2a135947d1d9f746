import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** How the image runs node (the Dockerfile's runtime stage), so that tests and the bench run it alike. */
const DOCKERFILE = readFileSync(fileURLToPath(new URL('../../Dockerfile', import.meta.url)), 'utf8');

/** The image's NODE_OPTIONS (its `ENV`). */
export const IMAGE_NODE_OPTIONS = /^ENV NODE_OPTIONS=(.+)$/m.exec(DOCKERFILE)?.[1] ?? '';

const ENTRYPOINT: readonly string[] = (() => {
  const m = /^ENTRYPOINT (\[.+\])$/m.exec(DOCKERFILE);
  if (!m) throw new Error('Dockerfile: no ENTRYPOINT in exec form');
  const argv = JSON.parse(m[1]!) as string[];
  if (argv.length < 2 || argv.at(-1) !== '/app/dist/cli.js') throw new Error(`Dockerfile: the ENTRYPOINT does not end with /app/dist/cli.js: ${m[1]}`);
  return argv;
})();

/** The node flags of the image's ENTRYPOINT: what comes between node and the CLI (V8 flags NODE_OPTIONS refuses). */
export const IMAGE_NODE_FLAGS: readonly string[] = ENTRYPOINT.slice(1, -1);

/** The image's node and CLI, by its own paths (what a `kubectl exec … --` command runs). */
export const IMAGE_NODE_AND_CLI: readonly string[] = [ENTRYPOINT[0]!, ENTRYPOINT.at(-1)!];
