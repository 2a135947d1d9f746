import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

/**
 * prom-client's classes, required one file each. Its index also loads the Pushgateway (node:https,
 * TLS) and the cluster aggregator, which a sidecar never uses: about 5 MiB of RSS a pod would pay
 * for nothing (docs/performance.md, Footprint). The paths are pinned by prom-client's version in
 * package-lock.json, and test/observability/prom.test.ts holds each to be the very class the index
 * exports, so an upgrade that moves one fails the suite instead of the sidecar.
 */
const req = createRequire(import.meta.url);

export const Registry = req('prom-client/lib/registry') as typeof PromClient.Registry;
export const Counter = req('prom-client/lib/counter') as typeof PromClient.Counter;
export const Gauge = req('prom-client/lib/gauge') as typeof PromClient.Gauge;
export const Histogram = req('prom-client/lib/histogram') as typeof PromClient.Histogram;
export const collectDefaultMetrics = req('prom-client/lib/defaultMetrics') as typeof PromClient.collectDefaultMetrics;
export type Registry = PromClient.Registry;
export type Counter<T extends string = string> = PromClient.Counter<T>;
export type Gauge<T extends string = string> = PromClient.Gauge<T>;
export type Histogram<T extends string = string> = PromClient.Histogram<T>;
