import { createRequire } from 'node:module';
import type * as Fs from 'node:fs';

/**
 * `node:fs`, loaded with `require`, for the reason of `node-http.ts`: an ESM import builds the
 * module's namespace, which reads every export, lazy ones included (`fs.promises` and the rest),
 * about 2 MiB of RSS a serve never uses (docs/performance.md, Footprint).
 */
const fs = createRequire(import.meta.url)('node:fs') as typeof Fs;

export const { constants, createWriteStream, existsSync, lstatSync, openSync, readFileSync, statSync, unlinkSync, writeSync } = fs;
