import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../src/cli/program.js';

// Issue 20: a secret given as a flag value is visible to anyone who can list processes. Every
// flag that has a `-file` form says so in --help, in every command that takes it, and names the
// file form.

const walk = (cmd: Command): Command[] => [cmd, ...cmd.commands.flatMap(walk)];
const path = (cmd: Command): string => {
  const names: string[] = [];
  for (let c: Command | null = cmd; c?.parent; c = c.parent) names.unshift(c.name());
  return names.join(' ');
};

/** `[command, flag, description]` of every flag whose `--<flag>-file` form exists in the same command. */
function secretFlags(): [string, string, string][] {
  const out: [string, string, string][] = [];
  for (const cmd of walk(buildProgram())) {
    const longs = cmd.options.map((o) => o.long ?? '');
    for (const o of cmd.options) if (o.long && longs.includes(`${o.long}-file`)) out.push([path(cmd), o.long, o.description]);
  }
  return out;
}

describe('--help on secrets given as flags', () => {
  it('covers the secrets of serve, check, redec pending and webhook dead-letters', () => {
    const byCommand = new Map<string, string[]>();
    for (const [cmd, flag] of secretFlags()) byCommand.set(cmd, [...(byCommand.get(cmd) ?? []), flag]);
    expect(byCommand.get('serve')).toEqual(expect.arrayContaining(['--api-key', '--webhook-secret', '--webhook-required-header', '--redis-url', '--decision-log-hash-key']));
    expect(byCommand.get('check')).toEqual(expect.arrayContaining(['--api-key']));
    expect(byCommand.get('redec pending')).toEqual(expect.arrayContaining(['--api-key']));
    expect(byCommand.get('webhook dead-letters list')).toEqual(expect.arrayContaining(['--redis-url']));
  });

  it.each(secretFlags())('%s %s says it shows in ps and recommends the -file form', (_cmd, flag, description) => {
    expect(description).toMatch(/\bps\b/);
    expect(description).toContain(`${flag}-file`);
  });

  it('serve --help prints it', () => {
    const serve = buildProgram().commands.find((c) => c.name() === 'serve')!;
    const help = serve.helpInformation().replace(/\s+/g, ' ');
    expect(help).toMatch(/--api-key <key>.*visible in ps.*--api-key-file/);
  });
});
