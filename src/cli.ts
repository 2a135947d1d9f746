#!/usr/bin/env node
import { main } from './cli/index.js';

await main(process.argv);
