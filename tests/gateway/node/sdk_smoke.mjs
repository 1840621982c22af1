// Drives the official openai SDK against any OpenAI-compatible base URL (the
// fake upstream, or llmlimitd's gateway) and prints what each call gave back,
// one JSON line per call, so a test can check that streams parse and usage is read.
//
// Environment: SDK_SMOKE_BASE_URL (required, e.g. http://127.0.0.1:PORT/v1),
// SDK_SMOKE_API_KEY (default "sk-smoke"), SDK_SMOKE_MODEL (chat and completion
// model, default "fake-normal"), SDK_SMOKE_EMBEDDING_MODEL (default SDK_SMOKE_MODEL).
// Exits 1 after printing {"call": ..., "error": ...} for the first call that fails.
import OpenAI from 'openai';

const baseURL = process.env.SDK_SMOKE_BASE_URL;
if (!baseURL) {
    console.error('sdk_smoke: set SDK_SMOKE_BASE_URL');
    process.exit(2);
}
const model = process.env.SDK_SMOKE_MODEL || 'fake-normal';
const embeddingModel = process.env.SDK_SMOKE_EMBEDDING_MODEL || model;
// No retries: a failure must show as one, not be hidden by a second try.
const client = new OpenAI({
    baseURL,
    apiKey: process.env.SDK_SMOKE_API_KEY || 'sk-smoke',
    maxRetries: 0,
    timeout: 30000,
});
const messages = [{ role: 'user', content: 'say a few words' }];

function print(line) {
    process.stdout.write(JSON.stringify(line) + '\n');
}

async function chat() {
    const { data, response } = await client.chat.completions
        .create({ model, messages, max_tokens: 5 })
        .withResponse();
    const headers = {};
    for (const [name, value] of response.headers) {
        if (name !== 'date') headers[name] = value;
    }
    const choice = data.choices[0];
    return {
        id: data.id,
        object: data.object,
        content: choice.message.content,
        finish_reason: choice.finish_reason,
        usage: data.usage ?? null,
        headers,
    };
}

async function chatStream(includeUsage) {
    const request = { model, messages, stream: true };
    if (includeUsage) request.stream_options = { include_usage: true };
    const stream = await client.chat.completions.create(request);
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
    return { include_usage: includeUsage, chunks, content, finish_reason: finishReason, usage };
}

async function completion() {
    const data = await client.completions.create({ model, prompt: 'one two', max_tokens: 4 });
    return {
        object: data.object,
        text: data.choices[0].text,
        finish_reason: data.choices[0].finish_reason,
        usage: data.usage ?? null,
    };
}

async function embedding() {
    // The SDK asks for base64 and decodes it when no encoding_format is given.
    const data = await client.embeddings.create({
        model: embeddingModel,
        input: ['one two', 'three'],
    });
    return {
        count: data.data.length,
        vectors: data.data.map((item) => Array.from(item.embedding)),
        usage: data.usage ?? null,
    };
}

async function models() {
    const ids = [];
    for await (const item of client.models.list()) ids.push(item.id);
    return { ids };
}

const calls = [
    ['chat', chat],
    ['chat_stream', () => chatStream(false)],
    ['chat_stream_usage', () => chatStream(true)],
    ['completion', completion],
    ['embedding', embedding],
    ['models', models],
];
for (const [name, run] of calls) {
    try {
        print({ call: name, ...(await run()) });
    } catch (error) {
        const status = error?.status ?? null;
        print({ call: name, error: String(error?.message ?? error), status });
        process.exit(1);
    }
}
