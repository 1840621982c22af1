/* The gateway's own estimate, for the integration tests: they compute what
 * a call is charged when the upstream gives no usage (input estimate plus
 * the output counted from the streamed text) from the same code the
 * gateway runs, instead of a copy of it in Python.
 *
 *   gw_estimate_tool request chat|completions|embeddings|messages|responses MAX DEFAULT < BODY
 *       prints "<input_tokens> <output_tokens>" of the request body
 *   gw_estimate_tool text < TEXT
 *       prints the token count of the text */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gateway/gw_estimate.h"
#include "util/arena.h"
#include "util/jdoc.h"

#define INPUT_BYTES_MAX (4 * 1024 * 1024)

static char input[INPUT_BYTES_MAX + 1];

static size_t read_stdin(void)
{
    size_t length = fread(input, 1, INPUT_BYTES_MAX + 1, stdin);
    if (length > INPUT_BYTES_MAX) {
        fprintf(stderr, "gw_estimate_tool: input larger than %d bytes\n", INPUT_BYTES_MAX);
        exit(2);
    }
    input[length] = '\0';
    return length;
}

static int endpoint_of(const char *name, enum gw_endpoint *out)
{
    if (strcmp(name, "chat") == 0)
        *out = GW_ENDPOINT_CHAT_COMPLETIONS;
    else if (strcmp(name, "completions") == 0)
        *out = GW_ENDPOINT_COMPLETIONS;
    else if (strcmp(name, "embeddings") == 0)
        *out = GW_ENDPOINT_EMBEDDINGS;
    else if (strcmp(name, "messages") == 0)
        *out = GW_ENDPOINT_MESSAGES;
    else if (strcmp(name, "responses") == 0)
        *out = GW_ENDPOINT_RESPONSES;
    else if (strcmp(name, "gemini") == 0)
        *out = GW_ENDPOINT_GEMINI;
    else
        return -1;
    return 0;
}

static int estimate_request(char **argv)
{
    enum gw_endpoint endpoint;
    if (endpoint_of(argv[2], &endpoint) != 0) {
        fprintf(stderr, "gw_estimate_tool: unknown endpoint %s\n", argv[2]);
        return 2;
    }
    struct gw_model model = {.name = "model",
                             .max_output_tokens = strtoull(argv[3], NULL, 10),
                             .default_max_output_tokens = strtoull(argv[4], NULL, 10)};
    size_t length = read_stdin();
    struct arena arena;
    arena_init(&arena, NULL, 0);
    struct jdoc_value *root = NULL;
    char error[GW_ESTIMATE_ERROR_SIZE];
    struct gw_estimate estimate;
    int rc =
        jdoc_parse_nested(input, length, GW_JSON_DEPTH_MAX, &arena, &root, error, sizeof error);
    if (rc == 0)
        rc = gw_estimate_request(root, endpoint, &model, &estimate, error, sizeof error);
    arena_free(&arena);
    if (rc != 0) {
        fprintf(stderr, "gw_estimate_tool: %s\n", error);
        return 1;
    }
    printf("%llu %llu\n", (unsigned long long)estimate.input_tokens,
           (unsigned long long)estimate.output_tokens);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "request") == 0)
        return estimate_request(argv);
    if (argc == 2 && strcmp(argv[1], "text") == 0) {
        size_t length = read_stdin();
        printf("%llu\n", (unsigned long long)gw_estimate_text(input, length));
        return 0;
    }
    fprintf(stderr,
            "usage: gw_estimate_tool request chat|completions|embeddings|messages|responses MAX "
            "DEFAULT "
            "< BODY | gw_estimate_tool text < TEXT\n");
    return 2;
}
