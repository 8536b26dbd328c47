// Runs knit's daemon in this process exactly as `knit serve --config <file>` does (same
// serve()), for the bench's knit contender while there is no built CLI. Usage:
//   node build/bench/knit-daemon.js <config.json>
import { serve } from '../src/daemon/serve.js';

const config = process.argv[2];
if (!config) {
  console.error('usage: knit-daemon <config.json>');
  process.exit(2);
}
serve({ config }).then(
  () => process.exit(0),
  (e: Error) => {
    console.error(`knit daemon: ${e.stack ?? e.message}`);
    process.exit(1);
  },
);
