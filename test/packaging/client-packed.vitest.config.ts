import { defineConfig } from 'vitest/config';

// test/client/hostile-sidecar.property.test.ts, unchanged, against the packed @consent-sidecar/client
// (test/packaging/client-pack.test.ts installs the tarball and runs this): its import of the client's
// source is aliased to the installed package's ES module, which node loads as it is (node_modules
// is external to vitest). If anything of src/client/ were loaded, the run fails.

const entry = process.env.CONSENT_CLIENT_PACKED_ENTRY;
if (!entry) throw new Error('CONSENT_CLIENT_PACKED_ENTRY: the installed package entry (run by test/packaging/client-pack.test.ts)');

export default defineConfig({
  resolve: { alias: [{ find: /^(\.\.\/)+src\/client\/index\.js$/, replacement: entry }] },
  plugins: [
    {
      name: 'no-client-source',
      load(id) {
        if (/[\\/]src[\\/]client[\\/]/.test(id)) throw new Error(`the packed client's run loaded the source ${id}`);
        return null;
      },
    },
  ],
  test: {
    include: ['test/client/hostile-sidecar.property.test.ts'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
