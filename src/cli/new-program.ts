import { Command } from 'commander';
import { VERSION } from '../lib/version.js';

/** The `consent-sidecar` program before any command is added. */
export function newProgram(): Command {
  return (
    new Command('consent-sidecar')
      .description('A fail-closed sidecar between an application and a consent service')
      .version(VERSION)
      // A short error with commander's "Did you mean" suggestion, not the whole help.
      .showHelpAfterError('(add --help for usage)')
      // serve's longest flag leaves its descriptions 34 columns of 80; commander would stop wrapping
      // below 40 and print 200-column lines. Set before the commands are added: they inherit it.
      .configureHelp({ minWidthToWrap: 30 })
      .exitOverride()
  );
}
