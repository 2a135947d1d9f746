import { expect } from 'vitest';
import { ConfigError, loadServeConfig, type RawFlags } from '../../src/config/index.js';

/**
 * The problems `loadServeConfig` reports for these flags and variables (`[]` when it accepts them);
 * anything thrown other than an ERR_CONFIG_INVALID ConfigError fails the test.
 */
export function configProblems(flags: RawFlags, env: Record<string, string> = {}): string[] {
  try {
    loadServeConfig(flags, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).code).toBe('ERR_CONFIG_INVALID');
    return [...(err as ConfigError).problems];
  }
  return [];
}
