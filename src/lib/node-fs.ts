import { createRequire } from 'node:module';
import type * as Fs from 'node:fs';

/**
 * `node:fs`, loaded with `require`, for the reason of `node-http.ts`: an ESM import builds the
 * module's namespace, which reads every export, lazy ones included (`fs.promises` and the rest),
 * about 2 MiB of RSS a serve never uses (docs/performance.md, Footprint).
 */
const fs = createRequire(import.meta.url)('node:fs') as typeof Fs;

export const { constants, createWriteStream, existsSync, lstatSync, openSync, readFileSync, statSync, unlinkSync, writeSync } = fs;

/**
 * `stat` and `readFile` (UTF-8) as promises, on fs's callback functions: `node:fs/promises` loads
 * the FileHandle machinery and with it readline and the REPL's history (13 modules, about 1 MiB),
 * for two calls.
 */
export const statFile = (path: string): Promise<Fs.Stats> => new Promise((resolve, reject) => fs.stat(path, (err, st) => (err ? reject(err) : resolve(st))));
export const readTextFile = (path: string): Promise<string> => new Promise((resolve, reject) => fs.readFile(path, 'utf8', (err, text) => (err ? reject(err) : resolve(text))));
