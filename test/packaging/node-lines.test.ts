import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { claimed } from '../node-lines.mjs';

// The Node we ship is the Node we test: package.json engines, the pinned binaries the suite runs on
// (test/node-lines.json, npm run test:lines) and the image's Node (Dockerfile) say the same thing.

const read = (path: string): string => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const pkg = JSON.parse(read('package.json')) as { engines: { node: string }; scripts: Record<string, string>; devDependencies: Record<string, string> };
const { lines } = JSON.parse(read('test/node-lines.json')) as { lines: { version: string; integrity: string; image?: boolean }[] };
const major = (v: string): number => Number(v.split('.')[0]);

describe('Node lines', () => {
  it('engines claims exactly the pinned lines, each from its pinned version', () => {
    expect(pkg.engines.node).toBe(lines.map((l) => `^${l.version}`).join(' || '));
    for (const l of lines) expect(l.integrity).toMatch(/^sha512-[A-Za-z0-9+/]{86}==$/);
  });

  it('the image runs one of them, from the defaults of its base image arguments', () => {
    const image = lines.filter((l) => l.image);
    expect(image).toHaveLength(1);
    const m = major(image[0]!.version);
    const dockerfile = read('Dockerfile');
    expect(dockerfile).toMatch(new RegExp(`^ARG NODE_BUILD_IMAGE=node:${m}-bookworm-slim$`, 'm'));
    expect(dockerfile).toMatch(new RegExp(`^ARG NODE_RUNTIME_IMAGE=gcr\\.io/distroless/nodejs${m}-debian12:nonroot$`, 'm'));
  });

  it('npm test refuses a node outside them (Node 20, an odd line, an older patch), and takes the pinned ones', () => {
    expect(pkg.scripts.test).toMatch(/^node test\/node-lines\.mjs --check && /);
    expect(pkg.scripts['test:lines']).toBe('node test/node-lines.mjs');
    for (const v of ['20.20.2', '23.11.0', '25.9.0', '22.12.0', '18.20.0']) expect(claimed(v), v).toBe(false);
    for (const l of lines) expect(claimed(l.version), l.version).toBe(true);
    expect(claimed('24.99.0')).toBe(true);
  });

  it('the compiler knows the oldest line\'s API, not a newer one (@types/node)', () => {
    expect(pkg.devDependencies['@types/node']).toMatch(new RegExp(`^\\^${Math.min(...lines.map((l) => major(l.version)))}\\.`));
  });
});
