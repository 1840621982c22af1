// Drives the official @anthropic-ai/sdk (messages.create, messages.stream) and
// openai (responses.create, streamed and not) against a base URL (the fake
// upstream, or llmlimitd's gateway) and prints what each call gave back, one
// JSON line per call: {"call": NAME, ...} or {"call": NAME, "error": ..., "status": ...}.
//
// Environment: AGENT_SDK_BASE_URL (required, without /v1), AGENT_SDK_API_KEY,
// AGENT_SDK_MODEL (default "fake-normal"), AGENT_SDK_CALLS (comma-separated:
// anthropic, anthropic_stream, responses, responses_stream; default all),
// AGENT_SDK_MAX_RETRIES (the SDKs' maxRetries, default 0), AGENT_SDK_MAX_TOKENS
// (max_tokens / max_output_tokens, default 1000; 0: none for Responses).
// Exits 1 when a call failed, after running them all.
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';

const baseURL = process.env.AGENT_SDK_BASE_URL;
if (!baseURL) {
    console.error('agent_sdks: set AGENT_SDK_BASE_URL');
    process.exit(2);
}
const apiKey = process.env.AGENT_SDK_API_KEY || 'sk-agent-sdk';
const model = process.env.AGENT_SDK_MODEL || 'fake-normal';
const maxRetries = Number(process.env.AGENT_SDK_MAX_RETRIES || '0');
const maxTokens = Number(process.env.AGENT_SDK_MAX_TOKENS || '1000');
const calls = (process.env.AGENT_SDK_CALLS || 'anthropic,anthropic_stream,responses,responses_stream')
    .split(',');
const prompt = 'say a few words';

const anthropic = new Anthropic({ baseURL, apiKey, maxRetries, timeout: 60000 });
const openai = new OpenAI({ baseURL: baseURL + '/v1', apiKey, maxRetries, timeout: 60000 });

function headersOf(response) {
    const headers = {};
    for (const [name, value] of response.headers) {
        if (name !== 'date') headers[name] = value;
    }
    return headers;
}

function textOf(message) {
    return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

async function anthropicCreate() {
    const { data, response } = await anthropic.messages
        .create({ model, max_tokens: maxTokens, messages: [{ role: 'user', content: prompt }] })
        .withResponse();
    return { id: data.id, text: textOf(data), stop_reason: data.stop_reason, usage: data.usage,
        headers: headersOf(response) };
}

async function anthropicStream() {
    const stream = anthropic.messages.stream({
        model, max_tokens: maxTokens, messages: [{ role: 'user', content: prompt }],
    });
    const events = [];
    for await (const event of stream) events.push(event.type);
    const message = await stream.finalMessage();
    return { id: message.id, text: textOf(message), stop_reason: message.stop_reason,
        usage: message.usage, events };
}

function responsesRequest() {
    const request = { model, input: prompt };
    if (maxTokens > 0) request.max_output_tokens = maxTokens;
    return request;
}

async function responsesCreate() {
    const { data, response } = await openai.responses.create(responsesRequest()).withResponse();
    return { id: data.id, status: data.status, text: data.output_text, usage: data.usage,
        headers: headersOf(response) };
}

async function responsesStream() {
    const stream = await openai.responses.create({ ...responsesRequest(), stream: true });
    const events = [];
    let text = '';
    let final = null;
    for await (const event of stream) {
        events.push(event.type);
        if (event.type === 'response.output_text.delta') text += event.delta;
        if (event.response && event.type !== 'response.created'
            && event.type !== 'response.in_progress') final = event.response;
    }
    return { id: final?.id ?? null, status: final?.status ?? null, text,
        usage: final?.usage ?? null, events };
}

const runners = {
    anthropic: anthropicCreate,
    anthropic_stream: anthropicStream,
    responses: responsesCreate,
    responses_stream: responsesStream,
};
let failed = false;
for (const name of calls) {
    const run = runners[name];
    if (!run) {
        console.error(`agent_sdks: unknown call ${name}`);
        process.exit(2);
    }
    try {
        process.stdout.write(JSON.stringify({ call: name, ...(await run()) }) + '\n');
    } catch (error) {
        failed = true;
        const headers = error?.headers ? Object.fromEntries(
            error.headers instanceof Headers ? error.headers.entries()
                : Object.entries(error.headers)) : null;
        process.stdout.write(JSON.stringify({
            call: name, error: String(error?.message ?? error), status: error?.status ?? null,
            type: error?.constructor?.name ?? null, headers,
        }) + '\n');
    }
}
process.exit(failed ? 1 : 0);
