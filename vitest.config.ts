import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds dist/ when src/ is newer: the tests that spawn the CLI run the build, as users do.
    globalSetup: ['test/global-setup.ts'],
    pool: 'forks',
    // Files run in parallel, each in a process of its own. Most of a file's time is spent waiting on
    // real servers and child processes, not on the CPU, so more files than cores run at once.
    maxWorkers: 4,
    // Time limits are safety nets for a test that hangs, never a measure of speed: a test waits for
    // conditions, and on a busy machine (CI shares two cores) a healthy run may take several times
    // as long as on an idle one.
    testTimeout: 120_000,
    hookTimeout: 120_000,
    expect: { poll: { timeout: 15_000, interval: 20 } },
  },
});
