/* Every bound the gateway's modules enforce, in one place (the same rule as
 * src/core/bounds.h: a limit on everything, each with a test one past it).
 * The fixed token amounts of the estimate live here too, so docs/gateway.md
 * and the code cannot disagree about where they are written down. */
#ifndef LLMLIMIT_GATEWAY_BOUNDS_H
#define LLMLIMIT_GATEWAY_BOUNDS_H

#include "core/bounds.h"

/* gateway.json */
#define GW_CONFIG_BYTES_MAX (16 * 1024 * 1024)
#define GW_UPSTREAMS_MAX 64
#define GW_MODELS_MAX 1024
#define GW_KEYS_MAX 100000
/* Each template gives at most one requirement, so a reserve never carries
 * more than a reserve may. */
#define GW_LIMITS_MAX REQUIREMENTS_PER_RESERVE_MAX
#define GW_MCP_SERVERS_MAX 256             /* mcp_servers */
#define GW_MCP_TOOLS_MAX 1024              /* tools of one MCP server */
#define GW_MCP_ID_LENGTH_MAX 128           /* a tools/call's JSON-RPC id, as text */
#define GW_MCP_TIMEOUT_SECONDS_DEFAULT 300 /* an MCP server's timeout_seconds */
#define GW_MCP_SESSION_ID_LENGTH_MAX 255   /* Mcp-Session-Id, both ways */
#define GW_MCP_SESSIONS_MAX 65536          /* MCP sessions whose key is remembered */
#define GW_NAME_LENGTH_MAX 128             /* upstream and model names */
#define GW_UPSTREAM_MODEL_LENGTH_MAX 256   /* the model name sent upstream */
#define GW_BASE_URL_LENGTH_MAX 2048
#define GW_ENV_NAME_LENGTH_MAX 256 /* api_key_env */
#define GW_PATH_LENGTH_MAX 4095    /* api_key_file */
#define GW_API_KEY_BYTES_MAX 4096  /* a provider key, from the environment or a file */
#define GW_TEMPLATE_LENGTH_MAX 512 /* a limit key template, before instantiation */
#define GW_TEAM_LENGTH_MAX CALLER_LENGTH_MAX
#define GW_TIMEOUT_SECONDS_DEFAULT 600
#define GW_CONNECT_TIMEOUT_SECONDS_DEFAULT 10
#define GW_TIMEOUT_SECONDS_MAX 86400 /* both timeouts: 1..this */
/* A key's max_wait_seconds (docs/gateway.md "Waiting for capacity"). */
#define GW_KEY_WAIT_SECONDS_MAX 60
#define GW_PRIORITY_MAX 9               /* priorities 0 (first) .. this */
#define GW_OUTPUT_TOKENS_MAX (1u << 24) /* max_output_tokens of a model */
/* prices_file, in LiteLLM's format: its size and its top-level entries
 * (LiteLLM's own file held about 1.5 MB and a few thousand entries in 2026). */
#define GW_PRICES_FILE_BYTES_MAX (16 * 1024 * 1024)
#define GW_PRICES_ENTRIES_MAX 65536

/* Forwarding (gw_forward.c, src/server/gateway.c). */
#define GW_TRANSFERS_MAX 65536           /* upstream calls at once; past it: 503 */
#define GW_UPSTREAM_CONNECTIONS_MAX 4096 /* idle keep-alive connections kept */
#define GW_EASY_HANDLES_KEPT 256         /* curl handles of ended transfers kept for reuse */
#define GW_CALLS_KEPT 256                /* ended calls' objects kept for reuse */
#define GW_CONTENT_TYPE_LENGTH_MAX 255   /* the upstream's Content-Type we keep */
#define GW_RETRY_AFTER_LENGTH_MAX 31     /* its Retry-After and retry-after-ms, relayed */
#define GW_ANSWER_BYTES_MAX (64u << 20)  /* an upstream answer that does not stream */
/* The bytes of such answers the gateway holds at once, from the upstream's
 * first byte until the client has taken the last (--max-gateway-answer-bytes,
 * 1 .. the ceiling): past it a call is not forwarded, and an answer that
 * would pass it is refused. A client that does not read keeps its answer
 * held until the connection's stall deadline. */
#define GW_ANSWERS_HELD_BYTES_DEFAULT (UINT64_C(512) << 20)
#define GW_ANSWERS_HELD_BYTES_MAX (UINT64_C(1) << 40)
/* A stream's bytes waiting for the client: past this the upstream is paused. */
#define GW_STREAM_BUFFER_BYTES (256u << 10)
#define GW_SSE_ARENA_INLINE_BYTES 2048      /* a stream event's parse, without a heap block */
#define GW_UPLOAD_BUFFER_BYTES (16u << 10)  /* curl's upload buffer per transfer (its least) */
#define GW_DOWNLOAD_BUFFER_BYTES (4u << 10) /* curl's receive buffer per transfer */
/* Leases one X-Request-Id may take: a retry after a 429 or a released
 * failure is a new attempt (docs/gateway.md). */
#define GW_ATTEMPTS_MAX 16

/* A request. */
#define GW_N_MAX 128        /* n (and best_of) */
#define GW_PROMPTS_MAX 2048 /* strings or token arrays in one prompt or input */
/* Nesting of an OpenAI request or stream event (tool schemas, logprobs):
 * the gateway parses them with this bound (jdoc_parse_nested) instead of
 * the API's JSON_DEPTH_MAX, and the estimate walks at most this deep. */
#define GW_JSON_DEPTH_MAX 64

/* The estimate's fixed amounts, in tokens (docs/gateway.md, "The estimate"). */
#define GW_MESSAGE_OVERHEAD_TOKENS 4 /* per chat message, besides its text */
#define GW_NAME_OVERHEAD_TOKENS 1    /* a message's name */
#define GW_REPLY_OVERHEAD_TOKENS 3   /* the start of the answer every chat call gets */
#define GW_PROMPT_DEFAULT_TOKENS 1   /* a completion without a prompt */
/* An image part: the most a 2048x768 image at high detail takes on the
 * gpt-4o family (85 + 8 tiles of 170); "detail":"low" takes 85. */
#define GW_IMAGE_TOKENS 1445
#define GW_IMAGE_LOW_DETAIL_TOKENS 85
/* An audio part at 10 tokens per second of sound, from the size of its
 * base64 data at a low bitrate for its format (a higher one only makes the
 * estimate higher): 16 kHz 16-bit mono for wav, 32 kbit/s for mp3 and
 * anything else. */
#define GW_AUDIO_TOKENS_PER_SECOND 10
#define GW_AUDIO_WAV_BYTES_PER_SECOND 32000
#define GW_AUDIO_OTHER_BYTES_PER_SECOND 4000
#define GW_AUDIO_MIN_TOKENS 10
/* Anthropic Messages: an image block takes (width x height) / 750 tokens,
 * and images are scaled to at most about 1.15 megapixels: 1600 is that
 * largest image. A document block that is not text (a PDF, by URL or
 * file) takes this much a document: about one dense page with its page
 * image; a longer one is under-estimated until the call is reconciled. */
#define GW_MESSAGES_IMAGE_TOKENS 1600
#define GW_DOCUMENT_TOKENS 3000
/* The system prompt Anthropic adds when a request has tools (346 tokens
 * for Claude 4 models with tool_choice auto or none, fewer otherwise). */
#define GW_MESSAGES_TOOLS_OVERHEAD_TOKENS 346

/* The observed output reservation (gw_observed.c): per (model, caller) the
 * last GW_OBSERVED_WINDOW outputs; its GW_OBSERVED_PERCENTILE-th
 * percentile is reserved once GW_OBSERVED_MIN_CALLS are seen; at most
 * GW_OBSERVED_PAIRS_MAX pairs are tracked (the least recently used is
 * forgotten first). */
#define GW_OBSERVED_WINDOW 200
#define GW_OBSERVED_MIN_CALLS 20
#define GW_OBSERVED_PERCENTILE 99
#define GW_OBSERVED_PAIRS_MAX 4096

/* Which virtual key created which Responses id (gw_owners.c): at most this
 * many ids remembered (the oldest forgotten first), each at most this long. */
#define GW_RESPONSE_OWNERS_MAX 65536
#define GW_RESPONSE_ID_LENGTH_MAX 128
/* ... and which created which item of a stored response (its output items,
 * and its input items as their key lists them), for item_reference. */
#define GW_RESPONSE_ITEM_OWNERS_MAX 65536

/* The upstream's stream: one Server-Sent Event (all its lines). */
#define GW_SSE_EVENT_BYTES_MAX (1024 * 1024)

#endif
