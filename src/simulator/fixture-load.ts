import { readFile } from 'node:fs/promises';
import { DEFAULT_FIXTURE } from './default-fixture.js';
import { SimulatorError } from './errors.js';
import type { Fixture } from './fixture-types.js';
import { validateFixture } from './fixture-validate.js';

/**
 * Resolves the `fixtures` option: a path to a JSON file, an object (validated), or nothing (the
 * shipped {@link DEFAULT_FIXTURE}).
 */
export async function loadFixture(source: string | unknown | undefined): Promise<Fixture> {
  if (source === undefined) return validateFixture(DEFAULT_FIXTURE, 'default fixture');
  if (typeof source !== 'string') return validateFixture(source);
  let text: string;
  try {
    text = await readFile(source, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new SimulatorError('ERR_SIMULATOR_FIXTURE_INVALID', `cannot read ${source}: ${code}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new SimulatorError('ERR_SIMULATOR_FIXTURE_INVALID', `${source}: not JSON (${(err as Error).message})`);
  }
  return validateFixture(parsed, `fixture ${source}`);
}
