/**
 * The CLI as it ships: tsc's dist/ bundled by esbuild into dist/bundle/, one ES module per entry
 * and per lazily imported part (the sidecar, Redis, tracing, gRPC, the other commands), with the
 * dependencies inside. A pod then loads a dozen files instead of some 300 modules: start time and
 * memory (docs/performance.md, Footprint). dist/cli.js becomes the bundle's entry; the rest of
 * dist/ stays as tsc wrote it (the client subpath, the tests).
 *
 *   node scripts/bundle.mjs        (npm run build runs it after tsc)
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { REDIS_COMMANDS_USED } from './bundle-config.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const out = `${root}dist/bundle`;

/**
 * Our modules require some files through `createRequire(import.meta.url)` (built-ins without their
 * ESM namespace, one file of undici or prom-client instead of its index, package.json). esbuild
 * bundles a plain `require('literal')` only: this rewrites the two forms used in dist/ to it. A
 * form it does not know is left alone and fails the bundle's own test (test/packaging/bundle.test.ts:
 * no `createRequire(import.meta.url)` may be left in dist/bundle/).
 */
const plainRequire = {
  name: 'plain-require',
  setup(b) {
    b.onLoad({ filter: /[\\/]dist[\\/].*\.js$/ }, (args) => {
      // Ours only (tsc's dist/), not a package's own dist/ folder.
      if (!args.path.startsWith(`${root}dist/`)) return undefined;
      let code = readFileSync(args.path, 'utf8');
      if (code.includes('createRequire(import.meta.url)')) {
        code = code
          // `const require = createRequire(...)`: the bundle's own require (the banner) already is that.
          .replace(/const require = createRequire\(import\.meta\.url\);/g, '')
          .replace(/const (\w+) = createRequire\(import\.meta\.url\);/g, (_m, name) => `const ${name} = (s) => require(s);`)
          .replace(/createRequire\(import\.meta\.url\)\(/g, 'require(');
        // `req('x')` through the alias above would be opaque: make each call a direct require, then
        // drop the alias, which nothing calls any more.
        for (const m of [...code.matchAll(/const (\w+) = \(s\) => require\(s\);/g)]) {
          code = code.replace(new RegExp(`\\b${m[1]}\\((['"\`])`, 'g'), 'require($1');
          // Kept when something still calls it with a computed name (esbuild cannot bundle that one).
          if (!new RegExp(`\\b${m[1]}\\(`).test(code.replace(m[0], ''))) code = code.replace(m[0], '');
        }
      }
      return { contents: code, loader: 'js' };
    });
  },
};

/**
 * Requires that stay outside the bundle, resolved (if ever) from node_modules at run time:
 * - `supports-color`, an optional require of `debug` (express's) inside a try, and a devDependency:
 *   bundled, a development package would ship in the image without being in its SBOM;
 * - `@opentelemetry/api` as the Redis client requires it: only in its `OpenTelemetry.init()`, which
 *   the sidecar never calls. Bundled, its 51 modules would load with every Redis serve. (The tracing
 *   part imports the API for itself and keeps it inside.)
 */
const keepOut = {
  name: 'keep-out',
  setup(b) {
    b.onResolve({ filter: /^supports-color$/ }, (args) => ({ path: args.path, external: true }));
    b.onResolve({ filter: /^@opentelemetry\/api$/ }, (args) => (/[\\/]@redis[\\/]client[\\/]/.test(args.importer) ? { path: args.path, external: true } : undefined));
  },
};

/**
 * The Redis client's command table, cut to what runs (REDIS_COMMANDS_USED, scripts/bundle-config.mjs).
 * The index is replaced by a table of those and the constants the package's index re-exports.
 */
const camel = (name) => name.toLowerCase().replace(/_([a-z])/g, (_m, c) => c.toUpperCase());
const redisCommands = {
  name: 'redis-commands',
  setup(b) {
    b.onLoad({ filter: /[\\/]@redis[\\/]client[\\/]dist[\\/]lib[\\/]commands[\\/]index\.js$/ }, () => ({
      loader: 'js',
      contents: [
        "'use strict';",
        "Object.defineProperty(exports, '__esModule', { value: true });",
        'const table = {};',
        ...REDIS_COMMANDS_USED.map((c) => `table.${c} = table.${camel(c)} = require('./${c}').default;`),
        'exports.default = table;',
        'exports.NON_STICKY_COMMANDS = table;',
        "exports.CLIENT_KILL_FILTERS = require('./CLIENT_KILL').CLIENT_KILL_FILTERS;",
        "exports.FAILOVER_MODES = require('./CLUSTER_FAILOVER').FAILOVER_MODES;",
        "exports.CLUSTER_SLOT_STATES = require('./CLUSTER_SETSLOT').CLUSTER_SLOT_STATES;",
        "exports.COMMAND_LIST_FILTER_BY = require('./COMMAND_LIST').COMMAND_LIST_FILTER_BY;",
        "exports.REDIS_FLUSH_MODES = require('./FLUSHALL').REDIS_FLUSH_MODES;",
      ].join('\n'),
    }));
  },
};

/**
 * undici's HTTP/2 client, loaded when a connection negotiates h2 rather than with the client: its
 * module requires node:http2 (and with it node:tls) at once, about 9 MiB of RSS, for a protocol
 * only a TLS connection offering h2 (undici's allowH2, which the sidecar does not set) can choose.
 * The call is unchanged; only the require moves into it.
 */
const lazyHttp2 = {
  name: 'lazy-http2',
  setup(b) {
    b.onLoad({ filter: /[\\/]undici[\\/]lib[\\/]dispatcher[\\/]client\.js$/ }, (args) => {
      const code = readFileSync(args.path, 'utf8');
      const eager = "const connectH2 = require('./client-h2.js')";
      if (!code.includes(eager)) throw new Error(`${args.path}: undici's require of client-h2.js moved; update scripts/bundle.mjs (lazy-http2)`);
      return { loader: 'js', contents: code.replace(eager, "const connectH2 = (...args) => require('./client-h2.js')(...args)") };
    });
  },
};

rmSync(out, { recursive: true, force: true });
const result = await build({
  stdin: { contents: "import { main } from './dist/cli/index.js';\nawait main(process.argv);\n", resolveDir: root, sourcefile: 'cli-entry.js' },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node22',
  outdir: out,
  entryNames: 'cli',
  chunkNames: '[name]-[hash]',
  // What a bundled CommonJS module requires at run time: a built-in from node (without loading
  // node:module and its source-map support for it), anything else (the externals above) through a
  // require made for this file.
  banner: {
    js: "const require = (id) => process.getBuiltinModule(id) ?? process.getBuiltinModule('node:module').createRequire(import.meta.url)(id);",
  },
  legalComments: 'eof',
  minifyWhitespace: true,
  minifySyntax: true,
  sourcemap: 'linked',
  metafile: true,
  plugins: [redisCommands, lazyHttp2, plainRequire, keepOut],
  logLevel: 'warning',
});
// What each output holds (test/e2e/footprint-imports.test.ts reads which inputs a serve loaded).
writeFileSync(`${out}/meta.json`, JSON.stringify(result.metafile));
writeFileSync(`${root}dist/cli.js`, "#!/usr/bin/env node\n// The bundle (scripts/bundle.mjs): tsc's entry is bundled into dist/bundle/cli.js.\nimport './bundle/cli.js';\n", { mode: 0o755 });
rmSync(`${root}dist/cli.js.map`, { force: true });
