#!/usr/bin/env node
// The process's entry: handles signals before anything else is loaded, then runs the CLI (src/cli.ts).
// Loading the CLI's modules takes a few hundred milliseconds, during which Node.js would end the process
// on SIGHUP (129), SIGTERM or SIGINT without the handling docs/configuration.md "Signals" promises.

import { StartupSignals } from './health/startup-signals.js';

const startup = new StartupSignals();
const { runCli } = await import('./cli.js');
runCli(startup);
