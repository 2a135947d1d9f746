import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

/**
 * Tests whose verdict does not depend on the Node line they run on: they read files (the chart, the
 * docs, the OpenAPI document, the Dockerfile, the house's imports), run other toolchains (helm,
 * promtool, prometheus, the Python, Go and Java clients), or measure the sidecar's footprint and its
 * floods as the image's line runs it. `npm test` runs them with everything else; `npm run test:lines`
 * runs them on the image's line only, and every other test (project `src`: the tests that execute
 * src) on every line (test/node-lines.mjs). test/packaging/test-scopes.test.ts holds each entry to a
 * file that exists.
 */
export const ONCE = [
  'test/architecture.test.ts',
  'test/readme.test.ts',
  'test/docs/**/*.test.ts',
  'test/packaging/**/*.test.ts',
  'test/contract/document.test.ts',
  'test/chaos/checker.test.ts',
  // floods and footprint: what a flood costs the image's process, not a behaviour of the line
  'test/e2e/webhook-flood.test.ts',
  'test/e2e/connection-flood.test.ts',
  'test/e2e/redec-listing-flood.test.ts',
  'test/e2e/footprint-*.test.ts',
  'test/grpc/lazy-load.test.ts',
];

export default defineConfig({
  test: {
    // Builds dist/ when src/ is newer: the tests that spawn the CLI run the build, as users do.
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Files run in parallel, each worker a process of its own that runs file after file. Most of a
    // file's time is spent waiting on real servers and child processes, not on the CPU, so one file
    // more than the machine has cores runs at once.
    maxWorkers: availableParallelism() + 1,
    // A worker keeps its modules from one file to the next instead of importing the sidecar's and
    // the helpers' modules again for each file: about a third of the suite's CPU (docs/testing.md).
    // Each file still starts and stops its own servers, and restores what it fakes (timers, the clock).
    isolate: false,
    // Time limits are safety nets for a test that hangs, never a measure of speed: a test waits for
    // conditions, and on a busy machine (CI shares two cores) a healthy run may take several times
    // as long as on an idle one.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    expect: { poll: { timeout: 15_000, interval: 20 } },
    projects: [
      { extends: true, test: { name: 'src', include: ['test/**/*.test.ts'], exclude: ONCE } },
      { extends: true, test: { name: 'once', include: ONCE } },
    ],
  },
});
