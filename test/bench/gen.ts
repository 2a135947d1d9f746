/**
 * The load generators' process (never the process that measures, never a server's):
 * `gen.ts raw <json RawLoadOptions>` (our open- or closed-loop raw-socket generator) or
 * `gen.ts autocannon <json>` (the fallback when wrk is not installed). Prints one JSON line.
 */
import { load, rawLoadHere, type RawLoadOptions } from './lib.js';

const [mode, json] = [process.argv[2], process.argv[3] ?? '{}'];
if (mode === 'raw') {
  process.stdout.write(`${JSON.stringify(await rawLoadHere(JSON.parse(json) as RawLoadOptions))}\n`);
} else if (mode === 'autocannon') {
  process.stdout.write(`${JSON.stringify(await load(JSON.parse(json) as Parameters<typeof load>[0]))}\n`);
} else {
  throw new Error(`usage: gen.ts raw|autocannon <json>`);
}
process.exit(0);
