import { SAMPLER_NAMES, type SamplerName, type TracingOptions } from '../observability/tracing.js';
import type { RawEnv, Reader } from './reader.js';

// The options belong to the tracer (observability); the section's reader builds them from the variables.
export type { TracingOptions };

/** The OpenTelemetry variables `serve` follows; their defaults are the specification's. */
export const OTEL_VARIABLES = [
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_EXPORTER_OTLP_PROTOCOL',
  'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL',
  'OTEL_EXPORTER_OTLP_HEADERS',
  'OTEL_TRACES_EXPORTER',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
  'OTEL_SERVICE_NAME',
  'OTEL_RESOURCE_ATTRIBUTES',
  'OTEL_BSP_SCHEDULE_DELAY',
  'OTEL_SDK_DISABLED',
] as const;

/**
 * Tracing, configured the standard way (the `OTEL_*` variables, not flags): on when an OTLP
 * endpoint is given or `OTEL_TRACES_EXPORTER=otlp` is set, unless `OTEL_SDK_DISABLED=true` or
 * `OTEL_TRACES_EXPORTER=none`. A value the
 * sidecar cannot honour is a problem naming its variable, not a silent default.
 */
export function readTracing(r: Reader, env: RawEnv): TracingOptions | null {
  const v = (name: (typeof OTEL_VARIABLES)[number]): string | undefined => {
    const value = env[name]?.trim();
    return value === undefined || value === '' ? undefined : value;
  };
  const exporter = v('OTEL_TRACES_EXPORTER') ?? 'otlp';
  if (exporter !== 'otlp' && exporter !== 'none') r.problem('OTEL_TRACES_EXPORTER', `must be otlp or none, got "${exporter}"`);
  for (const name of ['OTEL_EXPORTER_OTLP_PROTOCOL', 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] as const) {
    const protocol = v(name);
    if (protocol !== undefined && protocol !== 'http/json' && protocol !== 'http/protobuf') {
      r.problem(name, `must be http/json or http/protobuf (the sidecar sends OTLP over HTTP, JSON-encoded; a collector takes both on one port), got "${protocol}"`);
    }
  }
  const samplerRaw = v('OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on';
  const sampler = (SAMPLER_NAMES as readonly string[]).includes(samplerRaw) ? (samplerRaw as SamplerName) : null;
  if (sampler === null) r.problem('OTEL_TRACES_SAMPLER', `must be one of ${SAMPLER_NAMES.join(', ')}, got "${samplerRaw}"`);
  const argRaw = v('OTEL_TRACES_SAMPLER_ARG');
  const ratio = argRaw === undefined ? 1 : Number(argRaw);
  if (argRaw !== undefined && !(/^\s*(\d+(\.\d*)?|\.\d+)\s*$/.test(argRaw) && ratio >= 0 && ratio <= 1)) r.problem('OTEL_TRACES_SAMPLER_ARG', `must be a number from 0 to 1, got "${argRaw}"`);
  const delayRaw = v('OTEL_BSP_SCHEDULE_DELAY');
  const scheduleDelayMs = delayRaw === undefined ? 5000 : Number(delayRaw);
  if (delayRaw !== undefined && !(/^\d+$/.test(delayRaw) && scheduleDelayMs >= 1 && scheduleDelayMs <= 600_000)) r.problem('OTEL_BSP_SCHEDULE_DELAY', `must be whole milliseconds from 1 to 600000, got "${delayRaw}"`);
  const endpoint = v('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ?? v('OTEL_EXPORTER_OTLP_ENDPOINT');
  if (endpoint !== undefined && !/^https?:\/\/[^\s]+$/.test(endpoint)) r.problem(v('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT', 'must be an http:// or https:// URL');
  // Off unless asked for: an endpoint, or OTEL_TRACES_EXPORTER=otlp said out loud (the exporter then
  // sends to the specification's default, http://localhost:4318, e.g. a collector in the pod).
  const asked = endpoint !== undefined || v('OTEL_TRACES_EXPORTER') === 'otlp';
  if (!asked || exporter === 'none' || v('OTEL_SDK_DISABLED') === 'true' || sampler === null) return null;
  return Object.freeze({ sampler, ratio, scheduleDelayMs });
}
