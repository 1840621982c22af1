// The hand-written alternative to llmlimitd's tigerbeetle backend: an
// application that reserves 3 limits per call directly with the official
// tigerbeetle-node client. Each of C concurrent callers sends one linked
// chain of 3 pending transfers (an RPM, a TPM and a budget account, each
// with debits_must_not_exceed_credits) per request and waits for it; the
// client batches the callers' requests itself. Prints reserves/s, and the
// machine's CPU counters (the first line of /proc/stat, where there is one)
// as the load starts and ends, so a benchmark can tell where the CPU went.
// Its ids are tigerbeetle-node's own id(): time-based, ascending. With
// --random-ids they are 128 random bits instead, to measure what scattered
// ids cost the cluster (docs/benchmarks-history.md, "Time-ordered ids").
// Usage: node peer.mjs ADDRESSES [--callers 200] [--seconds 10] [--timeout 60] [--random-ids]
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createClient, id as timeId, AccountFlags, TransferFlags } from "tigerbeetle-node";

const args = process.argv.slice(2);
const addresses = args[0];
if (!addresses) {
  console.error("usage: node peer.mjs HOST:PORT[,...] [--callers N] [--seconds N] [--timeout S] " +
    "[--random-ids]");
  process.exit(2);
}
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const callers = option("--callers", 200);
const seconds = option("--seconds", 10);
const timeout = option("--timeout", 60); // of the pending transfers, like a 60 s window
const id = args.includes("--random-ids")
  ? () => BigInt("0x" + randomBytes(16).toString("hex")) || 1n
  : timeId;

const client = createClient({ cluster_id: 0n, replica_addresses: addresses.split(",") });
const ledger = 1;
const account = (flags) => ({
  id: id(), debits_pending: 0n, debits_posted: 0n, credits_pending: 0n, credits_posted: 0n,
  user_data_128: 0n, user_data_64: 0n, user_data_32: 0, reserved: 0, ledger, code: 1, flags,
  timestamp: 0n,
});
const operator = account(0);
const limits = [0, 1, 2].map(() => account(AccountFlags.debits_must_not_exceed_credits));
const transfer = (debit, credit, amount, flags, pendingTimeout) => ({
  id: id(), debit_account_id: debit, credit_account_id: credit, amount, pending_id: 0n,
  user_data_128: 0n, user_data_64: 0n, user_data_32: 0, timeout: pendingTimeout, ledger,
  code: 1, flags, timestamp: 0n,
});

const failed = await client.createAccounts([operator, ...limits]);
if (failed.length > 0) throw new Error("create_accounts: " + JSON.stringify(failed));
// Capacity far above what a run can use: every reserve is allowed.
const funding = limits.map((l) => transfer(operator.id, l.id, 1n << 60n, 0, 0));
const fundFailed = await client.createTransfers(funding);
if (fundFailed.length > 0) throw new Error("funding: " + JSON.stringify(fundFailed));

const amounts = [1n, 500n, 2500n]; // one request, 500 tokens, 2500 usd_micros
let reserves = 0;
let errors = 0;
const end = Date.now() + seconds * 1000;
async function caller() {
  while (Date.now() < end) {
    const chain = limits.map((l, i) =>
      transfer(l.id, operator.id, amounts[i],
        TransferFlags.pending | (i < 2 ? TransferFlags.linked : 0), timeout));
    const result = await client.createTransfers(chain);
    if (result.length === 0) reserves++;
    else errors++;
  }
}
const cpu = () => {
  try {
    return readFileSync("/proc/stat", "utf8").split("\n")[0];
  } catch {
    return null;
  }
};
const cpuStart = cpu();
const started = process.hrtime.bigint();
await Promise.all(Array.from({ length: callers }, caller));
const elapsed = Number(process.hrtime.bigint() - started) / 1e9;
const cpuEnd = cpu();
console.log(JSON.stringify({ peer: "tigerbeetle-node 0.15.3", callers, seconds: +elapsed.toFixed(2),
  reserves, errors, reserves_per_second: Math.round(reserves / elapsed), cpu_start: cpuStart,
  cpu_end: cpuEnd }));
client.destroy();
