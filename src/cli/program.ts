import type { Command } from 'commander';
import { registerCheck } from './check.js';
import { registerDemo } from './demo.js';
import { newProgram } from './new-program.js';
import { registerRedec } from './redec.js';
import { registerServe } from './serve.js';
import { registerSimulate } from './simulate.js';
import { refuseRepeatedOptions } from './spec-options.js';
import { registerWebhook } from './webhook.js';

/** The `consent-sidecar` program with every command registered. */
export function buildProgram(): Command {
  const program = newProgram();
  registerServe(program);
  registerCheck(program);
  registerWebhook(program);
  registerRedec(program);
  registerSimulate(program);
  registerDemo(program);
  refuseRepeatedOptions(program);
  return program;
}
