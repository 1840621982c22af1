// Compares the gateway's token estimate (the C driver, estimate.c) with
// real tokenizers (gpt-tokenizer: o200k_base and cl100k_base) on every
// sample of corpus/, and prints per sample and overall: real tokens,
// estimate, ratio, and the worst under-estimate.
//
//   node measure.mjs [--driver build/gw_estimate_driver] [--check FRACTION]
//
// --check F exits 1 when the estimate of a corpus file is below (1 - F)
// times its o200k count, or the estimate of a one-line sample is below its
// o200k count by more than one token (docs/gateway-estimate.md).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const o200k = await import('gpt-tokenizer/encoding/o200k_base');
const cl100k = await import('gpt-tokenizer/encoding/cl100k_base');

function option(name, fallback) {
  const i = process.argv.indexOf(name);
  return i > 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}
const driver = option('--driver', path.join(here, '..', '..', 'build', 'gw_estimate_driver'));
const check = option('--check', null);
const tolerance = check === null ? null : Number(check);
if (tolerance !== null && !(tolerance >= 0 && tolerance < 1)) {
  console.error('--check takes a fraction in [0, 1)');
  process.exit(2);
}

const corpus = path.join(here, 'corpus');
const files = fs.readdirSync(corpus).sort().map((name) => path.join(corpus, name));
const estimates = new Map(
  execFileSync(driver, files, { encoding: 'utf8', maxBuffer: 64 << 20 })
    .trim().split('\n').map((line) => line.split('\t')).map(([name, n]) => [name, Number(n)]));

// The same samples as the driver: a ".lines." file is one sample per line.
const samples = [];
for (const file of files) {
  const name = path.basename(file);
  const text = fs.readFileSync(file, 'utf8');
  if (!name.includes('.lines.')) {
    samples.push({ name, text, short: false });
    continue;
  }
  text.split('\n').forEach((line, i) => {
    if (line.length > 0) samples.push({ name: `${name}:${i + 1}`, text: line, short: true });
  });
}

const plain = { disallowedSpecial: new Set() }; // special-token text is ordinary text here
const pad = (v, n) => String(v).padStart(n);
const failures = [];
let total = { o200k: 0, cl100k: 0, estimate: 0 }, worst = { ratio: Infinity }, shortUnder = 0;
console.log(`${'sample'.padEnd(26)} ${pad('bytes', 7)} ${pad('o200k', 6)} ${pad('cl100k', 6)} ${pad('est', 6)} ${pad('/o200k', 7)} ${pad('/cl100k', 7)}`);
for (const s of samples) {
  const estimate = estimates.get(s.name);
  if (estimate === undefined) throw new Error(`the driver printed no estimate for ${s.name}`);
  const real = o200k.encode(s.text, plain).length, real100 = cl100k.encode(s.text, plain).length;
  total.o200k += real; total.cl100k += real100; total.estimate += estimate;
  if (s.short) {
    if (estimate < real) shortUnder++;
    if (estimate < real - 1) failures.push(`${s.name}: estimate ${estimate} < o200k ${real} - 1`);
    continue;
  }
  const ratio = estimate / real;
  if (ratio < worst.ratio) worst = { ratio, name: s.name };
  if (tolerance !== null && estimate < (1 - tolerance) * real)
    failures.push(`${s.name}: estimate ${estimate} < ${(1 - tolerance).toFixed(2)} x o200k ${real}`);
  console.log(`${s.name.padEnd(26)} ${pad(Buffer.byteLength(s.text), 7)} ${pad(real, 6)} ${pad(real100, 6)} ${pad(estimate, 6)} ${pad(ratio.toFixed(3), 7)} ${pad((estimate / real100).toFixed(3), 7)}`);
}
const lines = samples.filter((s) => s.short).length;
console.log(`${'all samples'.padEnd(26)} ${pad('', 7)} ${pad(total.o200k, 6)} ${pad(total.cl100k, 6)} ${pad(total.estimate, 6)} ${pad((total.estimate / total.o200k).toFixed(3), 7)} ${pad((total.estimate / total.cl100k).toFixed(3), 7)}`);
console.log(`worst file ratio (o200k): ${worst.ratio.toFixed(3)} (${worst.name}); one-line samples under their o200k count: ${shortUnder} of ${lines}`);
if (tolerance !== null) {
  for (const f of failures) console.log(`FAIL ${f}`);
  console.log(failures.length === 0 ? `ok: every estimate within the tolerance (${tolerance})` : `${failures.length} samples under the tolerance`);
  process.exit(failures.length === 0 ? 0 : 1);
}
