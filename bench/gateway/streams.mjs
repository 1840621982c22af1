// Holds S streaming calls open through the gateway at once and reports
// what they cost it: every stream is started together, each reads its
// events as they come; while all are open the gateway's resident memory and
// thread count are sampled from /proc (PID given), and compared with the
// same figures before the run. Prints one JSON line.
// Usage: node streams.mjs URL KEY PID [--streams 1000] [--model slow]
import fs from "node:fs";
import http from "node:http";

const [url, key, pid] = process.argv.slice(2, 5);
const args = process.argv.slice(5);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : fallback;
};
const streams = Number(option("--streams", 1000));
const model = option("--model", "slow");

function proc() {
  const status = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name) => Number(status.match(new RegExp(`^${name}:\\s+(\\d+)`, "m"))[1]);
  return { rss_kib: field("VmRSS"), threads: field("Threads") };
}

const agent = new http.Agent({ keepAlive: true, maxSockets: streams + 10 });
const target = new URL(url);
function one() {
  return new Promise((resolve) => {
    const body = JSON.stringify({ model, stream: true, max_tokens: 64,
      messages: [{ role: "user", content: "count slowly" }] });
    const request = http.request({ host: target.hostname, port: target.port, agent,
      path: "/v1/chat/completions", method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` } },
    (response) => {
      let events = 0;
      let done = false;
      let tail = "";
      response.setEncoding("utf8");
      response.on("data", (text) => {
        tail += text;
        let at;
        while ((at = tail.indexOf("\n\n")) >= 0) {
          const event = tail.slice(0, at);
          tail = tail.slice(at + 2);
          events++;
          if (event === "data: [DONE]") done = true;
        }
      });
      response.on("end", () => resolve({ status: response.statusCode, events, done }));
    });
    request.on("error", () => resolve({ status: 0, events: 0, done: false }));
    request.end(body);
  });
}

const before = proc();
const started = Date.now();
const running = Array.from({ length: streams }, one);
let peak = before;
const sampler = setInterval(() => {
  const now = proc();
  if (now.rss_kib > peak.rss_kib) peak = { ...now };
  peak.threads = Math.max(peak.threads, now.threads);
}, 100);
const results = await Promise.all(running);
clearInterval(sampler);
const complete = results.filter((r) => r.status === 200 && r.done).length;
console.log(JSON.stringify({
  streams, complete, seconds: (Date.now() - started) / 1000,
  rss_kib_before: before.rss_kib, rss_kib_peak: peak.rss_kib,
  rss_kib_per_stream: Math.round((peak.rss_kib - before.rss_kib) / streams * 10) / 10,
  threads_before: before.threads, threads_peak: peak.threads,
}));
agent.destroy();
