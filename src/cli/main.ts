// Entry point of the `knit` command (bin/knit imports this file).
import { run } from './run.js';

process.exitCode = await run(process.argv.slice(2));
