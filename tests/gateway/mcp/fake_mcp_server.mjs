// A fake MCP server for the gateway's tests, built with the official MCP
// TypeScript SDK (@modelcontextprotocol/sdk): Streamable HTTP with sessions,
// answering in event streams (or JSON with --json). Every HTTP request it
// gets is logged, one JSON line each, to --log FILE: the tests read there
// what reached the server (and with which credential).
// Tools: web_search (a result; with --slow-ms N only after N ms), broken_search (isError), slow (waits
// `ms`, and logs when it is cancelled); garbage, hang, stream_cut and
// rpc_error are answered by the HTTP layer itself: not JSON, never, a
// stream without the answer, a JSON-RPC error.
// Prints "fake-mcp listening on PORT" once it accepts requests.
import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import * as z from 'zod/v4';

const args = process.argv.slice(2);
const option = (name) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
};
const logFile = option('--log');
const json = args.includes('--json');
const slowMs = Number(option('--slow-ms') ?? 0); // web_search waits this long first
// --stateless: no sessions, a new server for each POST (MCP's stateless mode;
// bench/mcp/run.sh measures tools/call with it)
const stateless = args.includes('--stateless');
const sessionIdLength = Number(option('--session-id-length') ?? 0); // 0: a UUID
const newSessionId = () => sessionIdLength > 0
    ? randomUUID().replaceAll('-', '').repeat(Math.ceil(sessionIdLength / 32)).slice(0, sessionIdLength)
    : randomUUID();
const log = (entry) => {
    if (logFile) appendFileSync(logFile, JSON.stringify(entry) + '\n');
};

function newServer() {
    const server = new McpServer({ name: 'fake-search', version: '1.0.0' });
    server.registerTool('web_search', {
        description: 'Searches the web (fake): answers with one line naming the query.',
        inputSchema: { query: z.string() },
    }, async ({ query }, extra) => {
        log({ tool_ran: 'web_search', query });
        if (slowMs > 0) {
            await new Promise((resolve) => {
                const timer = setTimeout(resolve, slowMs);
                extra.signal.addEventListener('abort', () => {
                    log({ tool_cancelled: 'web_search' });
                    clearTimeout(timer);
                    resolve();
                });
            });
        }
        return { content: [{ type: 'text', text: `results for ${query}: llmlimit.example` }] };
    });
    server.registerTool('broken_search', {
        description: 'Always fails (fake).',
        inputSchema: { query: z.string() },
    }, async ({ query }) => {
        log({ tool_ran: 'broken_search', query });
        return { isError: true, content: [{ type: 'text', text: 'the search index is down' }] };
    });
    server.registerTool('slow', {
        description: 'Waits ms milliseconds, then answers.',
        inputSchema: { ms: z.number() },
    }, async ({ ms }, extra) => {
        log({ tool_ran: 'slow', ms });
        await new Promise((resolve) => {
            const timer = setTimeout(resolve, ms);
            extra.signal.addEventListener('abort', () => {
                log({ tool_cancelled: 'slow' });
                clearTimeout(timer);
                resolve();
            });
        });
        return { content: [{ type: 'text', text: `waited ${ms} ms` }] };
    });
    return server;
}

const sessions = new Map();

function readBody(req) {
    return new Promise((resolve) => {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
}

// The tools the HTTP layer answers itself, as a misbehaving server would.
function answeredHere(res, message) {
    if (message?.method !== 'tools/call') return false;
    const name = message.params?.name;
    if (name === 'garbage') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('this is not JSON-RPC {');
        return true;
    }
    if (name === 'hang') return true; // never answered
    if (name === 'stream_cut') { // an event stream that ends without the answer
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: message\ndata: ' + JSON.stringify({ jsonrpc: '2.0',
            method: 'notifications/message', params: { level: 'info', data: 'working' } }) + '\n\n');
        res.end();
        return true;
    }
    if (name === 'rpc_error') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: message.id,
                                 error: { code: -32603, message: 'the tool crashed' } }));
        return true;
    }
    return false;
}

const http = createServer(async (req, res) => {
    const text = req.method === 'POST' ? await readBody(req) : '';
    let body;
    try { body = text ? JSON.parse(text) : undefined; } catch { body = undefined; }
    log({
        http: req.method, path: req.url,
        authorization: req.headers.authorization ?? null,
        session: req.headers['mcp-session-id'] ?? null,
        protocol_version: req.headers['mcp-protocol-version'] ?? null,
        accept: req.headers.accept ?? null,
        rpc: body?.method ?? null, id: body?.id ?? null,
        tool: body?.method === 'tools/call' ? body.params?.name ?? null : null,
        body: body?.method === 'notifications/cancelled' ? body : undefined,
    });
    if (req.headers.authorization !== 'Bearer mcp-server-secret') {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'bad credential' } }));
        return;
    }
    if (answeredHere(res, body)) return;
    if (stateless && req.method === 'POST') {
        const once = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined,
                                                         enableJsonResponse: json });
        const server = newServer();
        res.on('close', () => { once.close(); server.close(); });
        await server.connect(once);
        await once.handleRequest(req, res, body);
        return;
    }
    const sessionId = req.headers['mcp-session-id'];
    let transport = sessionId ? sessions.get(sessionId) : undefined;
    if (!transport && req.method === 'POST' && !sessionId && isInitializeRequest(body)) {
        transport = new StreamableHTTPServerTransport({
            sessionIdGenerator: newSessionId,
            enableJsonResponse: json,
            onsessioninitialized: (id) => sessions.set(id, transport),
        });
        transport.onclose = () => sessions.delete(transport.sessionId);
        await newServer().connect(transport);
    }
    if (!transport && sessionId) { // MCP's answer to a session that is over
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'session not found' } }));
        return;
    }
    if (!transport) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: 'no valid session' } }));
        return;
    }
    await transport.handleRequest(req, res, body);
});

http.listen(0, '127.0.0.1', () => {
    process.stderr.write(`fake-mcp listening on ${http.address().port}\n`);
});
