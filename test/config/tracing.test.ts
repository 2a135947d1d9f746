import { describe, expect, it } from 'vitest';
import { loadServeConfig } from '../../src/config/index.js';
import { configProblems } from '../helpers/config.js';

const FLAGS = { 'upstream-url': 'http://127.0.0.1:7800', 'api-key': 'k' };
const ENDPOINT = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' };

describe('tracing is configured the standard way (OTEL_* variables)', () => {
  it('is off without an OTLP endpoint or exporter, whatever else is set', () => {
    expect(loadServeConfig(FLAGS, {}).tracing).toBeNull();
    expect(loadServeConfig(FLAGS, { OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }).tracing).toBeNull();
  });

  it('is on with an endpoint: parent-based always-on by default, batches every 5 s', () => {
    expect(loadServeConfig(FLAGS, ENDPOINT).tracing).toStrictEqual({ sampler: 'parentbased_always_on', ratio: 1, scheduleDelayMs: 5000 });
    expect(loadServeConfig(FLAGS, { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector:4318/v1/traces' }).tracing).not.toBeNull();
    // the exporter named out loud: on, to the specification's default endpoint (localhost:4318)
    expect(loadServeConfig(FLAGS, { OTEL_TRACES_EXPORTER: 'otlp' }).tracing).toStrictEqual({ sampler: 'parentbased_always_on', ratio: 1, scheduleDelayMs: 5000 });
    expect(loadServeConfig(FLAGS, { ...ENDPOINT, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01', OTEL_BSP_SCHEDULE_DELAY: '200' }).tracing).toStrictEqual({
      sampler: 'parentbased_traceidratio',
      ratio: 0.01,
      scheduleDelayMs: 200,
    });
  });

  it('OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off', () => {
    expect(loadServeConfig(FLAGS, { ...ENDPOINT, OTEL_SDK_DISABLED: 'true' }).tracing).toBeNull();
    expect(loadServeConfig(FLAGS, { ...ENDPOINT, OTEL_TRACES_EXPORTER: 'none' }).tracing).toBeNull();
  });

  it('a value it cannot honour is a problem naming the variable, never a silent default', () => {
    expect(configProblems(FLAGS, { ...ENDPOINT, OTEL_TRACES_SAMPLER: 'sometimes' })).toEqual([expect.stringMatching(/^OTEL_TRACES_SAMPLER: must be one of always_on, .* got "sometimes"$/)]);
    expect(configProblems(FLAGS, { ...ENDPOINT, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1.5' })).toEqual([expect.stringMatching(/^OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1/)]);
    expect(configProblems(FLAGS, { ...ENDPOINT, OTEL_TRACES_SAMPLER_ARG: 'half' })).toEqual([expect.stringMatching(/^OTEL_TRACES_SAMPLER_ARG:/)]);
    expect(configProblems(FLAGS, { ...ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toEqual([expect.stringMatching(/^OTEL_EXPORTER_OTLP_PROTOCOL: must be http\/json or http\/protobuf/)]);
    expect(configProblems(FLAGS, { ...ENDPOINT, OTEL_TRACES_EXPORTER: 'zipkin' })).toEqual([expect.stringMatching(/^OTEL_TRACES_EXPORTER: must be otlp or none/)]);
    expect(configProblems(FLAGS, { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' })).toEqual([expect.stringMatching(/^OTEL_EXPORTER_OTLP_ENDPOINT: must be an http/)]);
    expect(configProblems(FLAGS, { ...ENDPOINT, OTEL_BSP_SCHEDULE_DELAY: '0' })).toEqual([expect.stringMatching(/^OTEL_BSP_SCHEDULE_DELAY:/)]);
    // and with the others: one run tells everything
    expect(configProblems({ ...FLAGS, 'cache-max-entries': '-1' }, { ...ENDPOINT, OTEL_TRACES_SAMPLER: 'x' })).toHaveLength(2);
  });
});
