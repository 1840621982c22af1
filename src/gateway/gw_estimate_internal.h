/* Shared by the request walks of the estimate: gw_estimate.c (OpenAI chat,
 * completions, embeddings) and gw_estimate_agents.c (Anthropic Messages,
 * OpenAI Responses). Not for other modules. */
#ifndef LLMLIMIT_GATEWAY_ESTIMATE_INTERNAL_H
#define LLMLIMIT_GATEWAY_ESTIMATE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gw_estimate.h"

struct gw_walk {
    struct gw_text_counter text; /* all text of the request */
    uint64_t fixed_tokens;       /* overheads, images, audio, token ids */
    char *error;
    size_t error_size;
};

/* Writes the error and returns -1. */
int gw_walk_fail(struct gw_walk *w, const char *format, ...) __attribute__((format(printf, 2, 3)));

/* A member that is absent or null counts as absent (the APIs' own rule). */
const struct jdoc_value *gw_walk_member(const struct jdoc_value *object, const char *name);

/* Counts a text (a string value) as a text of its own. */
void gw_walk_text(struct gw_walk *w, const char *text, size_t length);
void gw_walk_string(struct gw_walk *w, const struct jdoc_value *string);

/* Counts value as its compact JSON text (what a model reads of tools and
 * schemas, and of parts not known here). */
void gw_walk_json(struct gw_walk *w, const struct jdoc_value *value);

/* An optional string member counted as text; -1 when it is not a string.
 * path is the object's ("" for the body). */
int gw_walk_string_member(struct gw_walk *w, const struct jdoc_value *object, const char *name,
                          const char *path);

/* An optional output count, 0..the model's max_output_tokens; *out keeps
 * its value when the member is absent or null. 0, or -1 with the error. */
int gw_walk_output_tokens(struct gw_walk *w, const struct jdoc_value *body, const char *name,
                          const struct gw_model *model, uint64_t *out);

/* An audio input's tokens from its base64 data and format. */
uint64_t gw_walk_audio_tokens(const struct jdoc_value *data, const struct jdoc_value *format);

/* The estimates of the agent surfaces (gw_estimate_agents.c): input into
 * w, output and the cache hint into out. 0 or -1 with the error written. */
int gw_estimate_messages(struct gw_walk *w, const struct jdoc_value *body,
                         enum gw_endpoint endpoint, const struct gw_model *model,
                         struct gw_estimate *out);
/* OpenAI's chat, completions and embeddings (gw_estimate.c). */
int gw_estimate_openai(struct gw_walk *w, const struct jdoc_value *body, enum gw_endpoint endpoint,
                       const struct gw_model *model, struct gw_estimate *out);
int gw_estimate_responses(struct gw_walk *w, const struct jdoc_value *body,
                          enum gw_endpoint endpoint, const struct gw_model *model,
                          struct gw_estimate *out);

#endif
