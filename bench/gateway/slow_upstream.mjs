// A slow streaming upstream for the gateway's stream benchmark: every
// POST /v1/chat/completions with "stream": true answers with N chat
// completion chunks, one every DELAY ms, then a usage chunk (when asked
// for) and [DONE]; Node's event loop holds thousands of them at once.
// Usage: node slow_upstream.mjs PORT [--chunks 20] [--delay-ms 250]
import http from "node:http";

const args = process.argv.slice(2);
const port = Number(args[0] || 0);
const option = (name, fallback) => {
  const i = args.indexOf(name);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};
const chunks = option("--chunks", 20);
const delayMs = option("--delay-ms", 250);
let open = 0;

const chunk = (content, finish) => "data: " + JSON.stringify({
  id: "chatcmpl-slow", object: "chat.completion.chunk", created: 0, model: "slow",
  choices: [{ index: 0, delta: content === null ? {} : { content }, finish_reason: finish }],
}) + "\n\n";

const server = http.createServer((request, response) => {
  let body = "";
  request.on("data", (piece) => { body += piece; });
  request.on("end", () => {
    const json = JSON.parse(body || "{}");
    const usage = json.stream_options && json.stream_options.include_usage;
    response.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
    open++;
    let sent = 0;
    const timer = setInterval(() => {
      if (sent < chunks) {
        response.write(chunk(" word", null));
        sent++;
        return;
      }
      clearInterval(timer);
      response.write(chunk(null, "stop"));
      if (usage)
        response.write("data: " + JSON.stringify({ id: "chatcmpl-slow", object: "chat.completion.chunk",
          created: 0, model: "slow", choices: [],
          usage: { prompt_tokens: 10, completion_tokens: chunks, total_tokens: 10 + chunks } }) + "\n\n");
      response.end("data: [DONE]\n\n");
      open--;
    }, delayMs);
    response.on("close", () => { clearInterval(timer); });
  });
});
server.listen(port, "127.0.0.1", () => {
  console.log("slow_upstream listening on 127.0.0.1:" + server.address().port);
});
setInterval(() => {}, 1 << 30);
