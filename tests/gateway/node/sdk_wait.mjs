// Drives the official openai SDK against llmlimitd's gateway with calls that
// may wait for capacity (Prefer: wait=N): COUNT chat calls at once, each with
// its x-llmlimit-priority; prints one JSON line per call: its index, status
// ("ok" or the error's status), and when it was answered.
//
// Environment: GW_BASE_URL, GW_API_KEY, GW_MODEL, GW_WAIT_SECONDS, and
// GW_PRIORITIES: comma-separated, one per call (its length is the count).
import OpenAI from 'openai';

const {GW_BASE_URL: baseURL, GW_API_KEY: apiKey, GW_MODEL: model} = process.env;
const priorities = (process.env.GW_PRIORITIES || '').split(',').filter((p) => p !== '');
if (!baseURL || !apiKey || !model || priorities.length === 0) {
    console.error('sdk_wait: set GW_BASE_URL, GW_API_KEY, GW_MODEL and GW_PRIORITIES');
    process.exit(2);
}
// No retries: every call must get through by waiting, not by retrying.
const client = new OpenAI({
    baseURL, apiKey, maxRetries: 0, timeout: 120000,
    defaultHeaders: {Prefer: 'wait=' + (process.env.GW_WAIT_SECONDS || '60')},
});

async function one(index, priority) {
    try {
        const {response} = await client.chat.completions
            .create({model, messages: [{role: 'user', content: 'call ' + index}], max_tokens: 16},
                    {headers: {'x-llmlimit-priority': priority}})
            .withResponse();
        return {index, priority: Number(priority), status: 'ok', at: Date.now(),
                waited_ms: Number(response.headers.get('x-llmlimit-waited-ms') ?? -1)};
    } catch (error) {
        return {index, priority: Number(priority), status: error.status ?? String(error),
                at: Date.now()};
    }
}

const results = await Promise.all(priorities.map((p, i) => one(i, p)));
for (const result of results) process.stdout.write(JSON.stringify(result) + '\n');
