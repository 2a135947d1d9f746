import { createRequire } from 'node:module';

// package.json sits two levels above both src/lib/ (tests) and dist/lib/ (built), so one path serves both.
const pkg = createRequire(import.meta.url)('../../package.json') as { version: string };

/** The package version, for the User-Agent and `--version`. */
export const VERSION: string = pkg.version;
