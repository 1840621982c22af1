// Drives the official openai SDK against llmlimitd's gateway and prints what
// each call gave back, one JSON line per call; test_gw_sdk.py checks the lines
// and what the gateway charged for them.
//
// Environment: GW_BASE_URL (http://127.0.0.1:PORT/v1), GW_API_KEY (a virtual
// key), GW_MODEL (chat, completion and embedding model), GW_LIMITED_API_KEY (a
// key whose limits are full: its call must fail with RateLimitError).
// Exits 1 after printing {"call": ..., "error": ...} for the first call that
// fails unexpectedly.
import OpenAI from 'openai';

const baseURL = process.env.GW_BASE_URL;
const model = process.env.GW_MODEL;
if (!baseURL || !model || !process.env.GW_API_KEY || !process.env.GW_LIMITED_API_KEY) {
    console.error('sdk_gateway: set GW_BASE_URL, GW_API_KEY, GW_LIMITED_API_KEY and GW_MODEL');
    process.exit(2);
}
// No retries: a 429 must reach the test, not be retried away.
const options = { baseURL, maxRetries: 0, timeout: 30000 };
const client = new OpenAI({ ...options, apiKey: process.env.GW_API_KEY });
const limited = new OpenAI({ ...options, apiKey: process.env.GW_LIMITED_API_KEY });
const messages = [{ role: 'user', content: 'say a few words' }];

function print(line) {
    process.stdout.write(JSON.stringify(line) + '\n');
}

function headersOf(response) {
    const headers = {};
    for (const [name, value] of response.headers) {
        if (name.startsWith('x-') || name.startsWith('retry-')) headers[name] = value;
    }
    return headers;
}

async function chat() {
    const { data, response } = await client.chat.completions
        .create({ model, messages, max_tokens: 600 })
        .withResponse();
    return {
        object: data.object,
        content: data.choices[0].message.content,
        usage: data.usage ?? null,
        headers: headersOf(response),
    };
}

async function chatStream(includeUsage) {
    const request = { model, messages, max_tokens: 600, stream: true };
    if (includeUsage) request.stream_options = { include_usage: true };
    const { data: stream, response } = await client.chat.completions
        .create(request)
        .withResponse();
    let chunks = 0;
    let content = '';
    let finishReason = null;
    let usage = null;
    for await (const chunk of stream) {
        chunks += 1;
        for (const choice of chunk.choices) {
            content += choice.delta?.content ?? '';
            finishReason = choice.finish_reason ?? finishReason;
        }
        if (chunk.usage) usage = chunk.usage;
    }
    return {
        chunks,
        words: content.split(' ').length,
        finish_reason: finishReason,
        usage,
        headers: headersOf(response),
    };
}

async function completion() {
    const data = await client.completions.create({ model, prompt: 'one two', max_tokens: 600 });
    return { object: data.object, usage: data.usage ?? null };
}

async function embedding() {
    // The SDK asks for base64 and decodes it when no encoding_format is given.
    const data = await client.embeddings.create({ model, input: ['one two', 'three'] });
    return {
        count: data.data.length,
        dimensions: data.data.map((item) => item.embedding.length),
        usage: data.usage ?? null,
    };
}

async function models() {
    const ids = [];
    for await (const item of client.models.list()) ids.push(item.id);
    return { ids };
}

async function rateLimited() {
    try {
        await limited.chat.completions.create({ model, messages });
    } catch (error) {
        return {
            rate_limit_error: error instanceof OpenAI.RateLimitError,
            api_error: error instanceof OpenAI.APIError,
            status: error.status ?? null,
            code: error.code ?? null,
            type: error.type ?? null,
            message: error.message ?? null,
            retry_after: error.headers?.['retry-after'] ?? null,
            retry_after_ms: error.headers?.['retry-after-ms'] ?? null,
        };
    }
    throw new Error('the limited key was not refused');
}

async function badKey() {
    const stranger = new OpenAI({ ...options, apiKey: 'llk-not-a-key' });
    try {
        await stranger.chat.completions.create({ model, messages });
    } catch (error) {
        return {
            authentication_error: error instanceof OpenAI.AuthenticationError,
            status: error.status ?? null,
            code: error.code ?? null,
        };
    }
    throw new Error('a wrong key was let in');
}

const calls = [
    ['chat', chat],
    ['chat_stream', () => chatStream(false)],
    ['chat_stream_usage', () => chatStream(true)],
    ['completion', completion],
    ['embedding', embedding],
    ['models', models],
    ['rate_limited', rateLimited],
    ['bad_key', badKey],
];
for (const [name, run] of calls) {
    try {
        print({ call: name, ...(await run()) });
    } catch (error) {
        print({ call: name, error: String(error?.message ?? error), status: error?.status ?? null });
        process.exit(1);
    }
}
