// One reserve at a time with the official tigerbeetle-node client, for
// backup_down.py to compare with llmlimitd in the same fault: each reserve
// is one pending transfer (limit -> operator, debits_must_not_exceed_credits
// on the limit), sent once the last was answered. Creates its accounts,
// prints "ready", waits for a line on stdin (the fault is made meanwhile),
// then prints each reserve's latency in seconds and "done".
// Usage: node sequential.mjs ADDRESSES [--reserves 50]
import { createInterface } from "node:readline";
import { createClient, id, AccountFlags } from "tigerbeetle-node";

const args = process.argv.slice(2);
const addresses = args[0];
if (!addresses) {
  console.error("usage: node sequential.mjs HOST:PORT[,...] [--reserves N]");
  process.exit(2);
}
const at = args.indexOf("--reserves");
const reserves = at >= 0 ? Number(args[at + 1]) : 50;

const client = createClient({ cluster_id: 0n, replica_addresses: addresses.split(",") });
const ledger = 1;
const account = (flags) => ({
  id: id(), debits_pending: 0n, debits_posted: 0n, credits_pending: 0n, credits_posted: 0n,
  user_data_128: 0n, user_data_64: 0n, user_data_32: 0, reserved: 0, ledger, code: 1, flags,
  timestamp: 0n,
});
const transfer = (debit, credit, amount, flags, timeout) => ({
  id: id(), debit_account_id: debit, credit_account_id: credit, amount, pending_id: 0n,
  user_data_128: 0n, user_data_64: 0n, user_data_32: 0, timeout, ledger, code: 1, flags,
  timestamp: 0n,
});
const PENDING = 2; // TransferFlags.pending

const operator = account(0);
const limit = account(AccountFlags.debits_must_not_exceed_credits);
let failed = await client.createAccounts([operator, limit]);
if (failed.length > 0) throw new Error("create_accounts: " + JSON.stringify(failed));
failed = await client.createTransfers([transfer(operator.id, limit.id, 1n << 60n, 0, 0)]);
if (failed.length > 0) throw new Error("funding: " + JSON.stringify(failed));
console.log("ready");

const lines = createInterface({ input: process.stdin });
await new Promise((resolve) => lines.once("line", resolve));
for (let i = 0; i < reserves; i++) {
  const started = process.hrtime.bigint();
  failed = await client.createTransfers([transfer(limit.id, operator.id, 1n, PENDING, 3600)]);
  const took = Number(process.hrtime.bigint() - started) / 1e9;
  if (failed.length > 0) throw new Error("reserve: " + JSON.stringify(failed));
  console.log(took.toFixed(6));
}
console.log("done");
client.destroy();
process.exit(0);
