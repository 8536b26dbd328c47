// The tests run the machine's tools by name (ip, tc, bridge, and more). npm's `node_modules/.bin`
// holds bins that shadow some of them: ava's dependency @vercel/nft installs one named `nft`. So
// scripts/test.mjs hands ava the machine's PATH; this checks it did, and that `nft` here is nftables.
import test from 'ava';
import { execFileSync } from 'node:child_process';

test('the tests see the machine PATH: no node_modules/.bin on it, and `nft` is nftables', (t) => {
  const dirs = (process.env.PATH ?? '').split(':');
  t.deepEqual(dirs.filter((d) => d.includes('node_modules')), []);
  t.regex(execFileSync('nft', ['--version'], { encoding: 'utf8' }), /^nftables v\d/);
});
