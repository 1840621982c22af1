/* Prices read from a file in LiteLLM's model_prices_and_context_window.json
 * format (per-token prices in USD, as JSON numbers), converted once to the
 * gateway's integer usd_micros per million tokens. The conversion works on
 * the number's decimal text, never through a binary double: value x 10^12,
 * rounded up when a fraction remains, so a budget is never charged less
 * than the provider bills (docs/gateway.md, "Prices from a LiteLLM file"). */
#ifndef LLMLIMIT_GATEWAY_PRICES_H
#define LLMLIMIT_GATEWAY_PRICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gw_bounds.h"

enum gw_price_result {
    GW_PRICE_OK = 0,
    GW_PRICE_NOT_A_NUMBER = -1, /* not a JSON number */
    GW_PRICE_NEGATIVE = -2,     /* below 0 (-0 is 0) */
    GW_PRICE_TOO_LARGE = -3,    /* above AMOUNT_MAX usd_micros per Mtok once converted */
};

/* The JSON number text[0..length), a price in USD per token, as usd_micros
 * per million tokens (value x 10^12, rounded up) into *out. GW_PRICE_OK, or
 * an error with *out untouched. */
enum gw_price_result gw_price_usd_per_token(const char *text, size_t length, uint64_t *out);

/* "must be a number", ... for messages. */
const char *gw_price_result_text(enum gw_price_result result);

/* The prices of one entry, in the order of the gateway's model fields. */
enum gw_price_field {
    GW_PRICE_INPUT = 0,        /* input_cost_per_token */
    GW_PRICE_CACHED_INPUT,     /* cache_read_input_token_cost */
    GW_PRICE_CACHE_WRITE_5M,   /* cache_creation_input_token_cost */
    GW_PRICE_CACHE_WRITE_1H,   /* cache_creation_input_token_cost_above_1hr */
    GW_PRICE_OUTPUT,           /* output_cost_per_token */
    GW_PRICE_REASONING_OUTPUT, /* output_cost_per_reasoning_token */
    GW_PRICE_FIELDS,
};

/* The LiteLLM member name of a field. */
const char *gw_price_field_name(enum gw_price_field field);

struct gw_price_entry {
    uint64_t usd_micros_per_mtok[GW_PRICE_FIELDS];
    unsigned present;           /* bit 1 << field for each price the entry gives */
    uint64_t max_output_tokens; /* 0 when the entry gives none */
    uint32_t line;              /* of the entry's name in the file */
};

/* A loaded prices file: its text and an index of its top-level entries.
 * Only the entries asked for are parsed (strictly); the rest is only
 * skipped over, so a large file with entries this gateway never reads
 * costs one pass. */
struct gw_prices;

/* Reads the file at path (at most GW_PRICES_FILE_BYTES_MAX bytes, a JSON
 * object of at most GW_PRICES_ENTRIES_MAX members). 0 with *out (the
 * caller's; free with gw_prices_free), or -1 with "<path>: <reason>" or
 * "<path>: line L: <reason>" in error. */
int gw_prices_load(const char *path, struct gw_prices **out, char *error, size_t error_size);

/* The same from text in memory (copied); name stands for the file in
 * messages. */
int gw_prices_parse(const char *name, const char *text, size_t length, struct gw_prices **out,
                    char *error, size_t error_size);

void gw_prices_free(struct gw_prices *prices);

/* The entry named name (length bytes) into *out: 1 found, 0 not in the
 * file, -1 with "<file>: line L: '<name>'.<field>: <reason>" in error (the
 * entry is not an object, a price is not a number 0 or more or is too
 * large, max_output_tokens is not an integer 1..GW_OUTPUT_TOKENS_MAX, the
 * name appears twice). */
int gw_prices_find(const struct gw_prices *prices, const char *name, size_t length,
                   struct gw_price_entry *out, char *error, size_t error_size);

#endif
