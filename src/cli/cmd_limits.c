/* llmlimit limits put|get|list|delete: limit definitions through the admin
 * API. `put` takes flags or a JSON file holding one definition, an array of
 * them, or what `limits list` printed (LimitState objects), so a registry
 * can be exported and loaded again. Flags change a limit that exists only
 * where they say (the rest is read from it first) and print what changed:
 * the server replaces a whole definition, so a flag left out must never
 * silently reset a field (docs/cli.md). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char limits_usage[] =
    "usage: llmlimit limits put --key K --kind rolling|concurrency|budget --capacity N\n"
    "                           [--window-seconds S] [--timeout-seconds S]\n"
    "                           [--period day|week|month|none] [--period-anchor-day D]\n"
    "                           [--time-zone ZONE] [--unit U] [--description D]\n"
    "                           [--overage debt|deny] [--alerts JSON] [--webhook URL|JSON]\n"
    "       (on a limit that exists, every flag but --key is optional: what is not\n"
    "        given stays as it is, and the answer says what changed)\n"
    "       llmlimit limits put --file FILE   (one definition, an array, or the output\n"
    "                                          of `limits list`; - reads stdin)\n"
    "       llmlimit limits get KEY\n"
    "       llmlimit limits list\n"
    "       llmlimit limits delete KEY\n"
    "Needs the admin token ($LLMLIMIT_ADMIN_TOKEN or --token-file).\n";

static json_t *definition_json(const struct llmlimit_limit_definition *definition)
{
    /* What the library hands back has every string (empty when unset). */
    assert(definition->key != NULL);
    assert(definition->kind != NULL);
    json_t *json = json_pack("{s:s,s:s,s:I,s:I,s:I,s:s,s:s,s:s,s:s}", "key", definition->key,
                             "kind", definition->kind, "capacity", (json_int_t)definition->capacity,
                             "window_seconds", (json_int_t)definition->window_seconds,
                             "timeout_seconds", (json_int_t)definition->timeout_seconds, "period",
                             definition->period, "unit", definition->unit, "description",
                             definition->description, "overage", definition->overage);
    /* As the server prints them: only when set. */
    if (json != NULL && definition->period_anchor_day > 0)
        json_object_set_new(json, "period_anchor_day",
                            json_integer((json_int_t)definition->period_anchor_day));
    if (json != NULL && definition->time_zone != NULL && definition->time_zone[0] != '\0')
        json_object_set_new(json, "time_zone", json_string(definition->time_zone));
    const char *json_names[] = {"alerts", "webhook"};
    const char *json_texts[] = {definition->alerts_json, definition->webhook_json};
    for (size_t i = 0; json != NULL && i < 2; i++) {
        json_t *value = json_texts[i] != NULL && json_texts[i][0] != '\0'
                            ? json_loads(json_texts[i], JSON_DECODE_ANY, NULL)
                            : NULL;
        if (value != NULL)
            json_object_set_new(json, json_names[i], value);
    }
    return json;
}

static json_t *state_json(const struct llmlimit_limit_state *state)
{
    return json_pack("{s:o,s:s,s:I}", "definition", definition_json(&state->definition), "status",
                     state->status, "pending_decrease_to", (json_int_t)state->pending_decrease_to);
}

static int put_one(const struct cli *cli, struct llmlimit_client *client,
                   const struct llmlimit_limit_definition *definition, json_t *answers)
{
    struct llmlimit_status status;
    bool decreasing;
    int rc = llmlimit_limit_put(client, definition, &decreasing, &status);
    if (rc != 0) {
        char what[LLMLIMIT_KEY_LENGTH_MAX + 16];
        snprintf(what, sizeof(what), "put %s", definition->key ? definition->key : "");
        return cli_fail(cli, what, rc, &status);
    }
    json_array_append_new(answers, json_pack("{s:b,s:s,s:s}", "ok", 1, "key", definition->key,
                                             "status", decreasing ? "decreasing" : "active"));
    return EXIT_OK;
}

/* The alerts and webhook of a definition object as JSON text, kept in the
 * object itself (members "\x01alerts", "\x01webhook": no key has a control
 * character) so that they live as long as the definition's other strings. */
static void json_members_take(json_t *object, struct llmlimit_limit_definition *definition)
{
    static const char *const names[] = {"alerts", "webhook"};
    static const char *const kept[] = {"\x01alerts", "\x01webhook"};
    const char **texts[] = {&definition->alerts_json, &definition->webhook_json};
    for (size_t i = 0; i < 2; i++) {
        const json_t *value = json_object_get(object, names[i]);
        char *text = value != NULL && !json_is_null(value)
                         ? json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY)
                         : NULL;
        if (text != NULL && json_object_set_new(object, kept[i], json_string(text)) == 0)
            *texts[i] = json_string_value(json_object_get(object, kept[i]));
        free(text);
    }
}

/* Fills a definition from a JSON object; strings point into the object. */
static int definition_from_json(const struct cli *cli, const json_t *object,
                                struct llmlimit_limit_definition *definition)
{
    const json_t *inner = json_object_get(object, "definition");
    if (json_is_object(inner))
        object = inner; /* a LimitState, as `limits list` prints */
    memset(definition, 0, sizeof(*definition));
    const char *field;
    const json_t *value;
    json_object_foreach((json_t *)object, field, value)
    {
        const char **text = NULL;
        if (strcmp(field, "key") == 0)
            text = &definition->key;
        else if (strcmp(field, "kind") == 0)
            text = &definition->kind;
        else if (strcmp(field, "period") == 0)
            text = &definition->period;
        else if (strcmp(field, "unit") == 0)
            text = &definition->unit;
        else if (strcmp(field, "description") == 0)
            text = &definition->description;
        else if (strcmp(field, "overage") == 0)
            text = &definition->overage;
        else if (strcmp(field, "time_zone") == 0)
            text = &definition->time_zone;
        else if (strcmp(field, "alerts") == 0 || strcmp(field, "webhook") == 0)
            continue; /* JSON values, taken below */
        if (text != NULL) {
            if (!json_is_string(value))
                return cli_usage_error(cli, "%s: must be a string", field);
            *text = json_string_value(value);
            continue;
        }
        json_int_t number = json_integer_value(value);
        if (!json_is_integer(value) || number < 0)
            return cli_usage_error(cli, "%s: unknown field or not a non-negative integer", field);
        if (strcmp(field, "capacity") == 0)
            definition->capacity = (uint64_t)number;
        else if (strcmp(field, "window_seconds") == 0 && number <= UINT32_MAX)
            definition->window_seconds = (uint32_t)number;
        else if (strcmp(field, "timeout_seconds") == 0 && number <= UINT32_MAX)
            definition->timeout_seconds = (uint32_t)number;
        else if (strcmp(field, "period_anchor_day") == 0 && number <= UINT32_MAX)
            definition->period_anchor_day = (uint32_t)number;
        else
            return cli_usage_error(cli, "%s: unknown field or out of range", field);
    }
    if (definition->key == NULL || definition->kind == NULL || definition->capacity == 0)
        return cli_usage_error(cli, "a definition needs key, kind and capacity > 0");
    json_members_take((json_t *)object, definition);
    assert(definition->capacity >= 1);
    return EXIT_OK;
}

static json_t *file_load(const struct cli *cli, const char *path)
{
    json_error_t error;
    FILE *file = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    if (file == NULL) {
        cli_usage_error(cli, "%s: cannot open", path);
        return NULL;
    }
    json_t *json = json_loadf(file, JSON_REJECT_DUPLICATES, &error);
    if (file != stdin)
        fclose(file);
    if (json == NULL)
        cli_usage_error(cli, "%s: line %d, column %d: %s", path, error.line, error.column,
                        error.text);
    return json;
}

static int put_file(const struct cli *cli, struct llmlimit_client *client, const char *path)
{
    json_t *json = file_load(cli, path);
    if (json == NULL)
        return EXIT_USAGE;
    json_t *list = json_is_object(json) ? json_object_get(json, "limits") : NULL;
    json_t *items = json_is_array(json) ? json : json_is_array(list) ? list : NULL;
    json_t *answers = json_array();
    int rc = EXIT_OK;
    if (items == NULL && json_is_object(json)) {
        struct llmlimit_limit_definition definition;
        rc = definition_from_json(cli, json, &definition);
        if (rc == EXIT_OK)
            rc = put_one(cli, client, &definition, answers);
    } else if (items == NULL) {
        rc = cli_usage_error(cli, "%s: want a definition object or an array", path);
    }
    size_t index;
    json_t *item;
    json_array_foreach(items, index, item)
    {
        struct llmlimit_limit_definition definition;
        if (rc != EXIT_OK)
            break;
        if (!json_is_object(item))
            rc = cli_usage_error(cli, "%s: item %zu is not an object", path, index);
        else if ((rc = definition_from_json(cli, item, &definition)) == EXIT_OK)
            rc = put_one(cli, client, &definition, answers);
    }
    if (json_array_size(answers) > 0 || rc == EXIT_OK)
        cli_print_json(cli, items == NULL && json_array_size(answers) == 1
                                ? json_incref(json_array_get(answers, 0))
                                : json_incref(answers));
    json_decref(answers);
    json_decref(json);
    return rc;
}

/* Which fields the flags of a put named. */
struct put_given {
    bool capacity;
    bool window_seconds;
    bool timeout_seconds;
    bool period_anchor_day;
};

static int put_flags(const struct cli *cli, int argc, char **argv,
                     struct llmlimit_limit_definition *definition, struct put_given *given,
                     const char **file)
{
    static const char *const string_flags[] = {"--key",       "--kind",        "--period",
                                               "--unit",      "--description", "--overage",
                                               "--time-zone", "--alerts"};
    memset(definition, 0, sizeof(*definition));
    memset(given, 0, sizeof(*given));
    const char **strings[] = {&definition->key,         &definition->kind,
                              &definition->period,      &definition->unit,
                              &definition->description, &definition->overage,
                              &definition->time_zone,   &definition->alerts_json};
    for (int i = 2; i < argc; i++) {
        const char *value;
        int matched = 0;
        for (size_t f = 0; f < 8 && matched == 0; f++) {
            if ((matched = cli_flag(argc, argv, &i, string_flags[f], &value)) == 1)
                *strings[f] = value;
        }
        if (matched == 0 && (matched = cli_flag(argc, argv, &i, "--file", &value)) == 1)
            *file = value;
        if (matched == 0 && (matched = cli_flag(argc, argv, &i, "--webhook", &value)) == 1) {
            /* A URL, or the {"url","format"} object as JSON. One put per run. */
            static char url_json[2 * 512 + 8];
            json_t *url = value[0] == '{' ? NULL : json_string(value);
            char *text = url != NULL ? json_dumps(url, JSON_ENCODE_ANY) : NULL;
            json_decref(url);
            if (url != NULL && (text == NULL || strlen(text) >= sizeof url_json)) {
                free(text);
                return cli_usage_error(cli, "--webhook: want a URL of at most 512 bytes");
            }
            if (text != NULL)
                snprintf(url_json, sizeof url_json, "%s", text);
            free(text);
            definition->webhook_json = url != NULL ? url_json : value;
        }
        if (matched == 0 && (matched = cli_flag(argc, argv, &i, "--capacity", &value)) == 1) {
            given->capacity = true;
            if (cli_parse_u64(value, &definition->capacity) != 0)
                return cli_usage_error(cli, "--capacity: want an integer 1..%ju",
                                       (uintmax_t)LLMLIMIT_AMOUNT_MAX);
        }
        if (matched == 0 && (matched = cli_flag(argc, argv, &i, "--window-seconds", &value)) == 1) {
            given->window_seconds = true;
            if (cli_parse_u32(value, &definition->window_seconds) != 0)
                return cli_usage_error(cli, "--window-seconds: want an integer");
        }
        if (matched == 0 &&
            (matched = cli_flag(argc, argv, &i, "--timeout-seconds", &value)) == 1) {
            given->timeout_seconds = true;
            if (cli_parse_u32(value, &definition->timeout_seconds) != 0)
                return cli_usage_error(cli, "--timeout-seconds: want an integer");
        }
        if (matched == 0 &&
            (matched = cli_flag(argc, argv, &i, "--period-anchor-day", &value)) == 1) {
            given->period_anchor_day = true;
            if (cli_parse_u32(value, &definition->period_anchor_day) != 0)
                return cli_usage_error(cli, "--period-anchor-day: want an integer");
        }
        if (matched < 0)
            return cli_usage_error(cli, "%s needs a value", argv[i]);
        if (matched == 0)
            return cli_usage_error(cli, "unknown argument \"%s\"", argv[i]);
    }
    return EXIT_OK;
}

/* Fills what the flags did not give from the limit as it is. */
static void keep_unset(struct llmlimit_limit_definition *definition, const struct put_given *given,
                       const struct llmlimit_limit_definition *current)
{
    /* Called for the limit of the same key and kind only. */
    assert(strcmp(definition->key, current->key) == 0);
    assert(definition->kind == NULL || strcmp(definition->kind, current->kind) == 0);
    if (definition->kind == NULL)
        definition->kind = current->kind;
    if (!given->capacity)
        definition->capacity = current->capacity;
    if (!given->window_seconds)
        definition->window_seconds = current->window_seconds;
    if (!given->timeout_seconds)
        definition->timeout_seconds = current->timeout_seconds;
    if (!given->period_anchor_day)
        definition->period_anchor_day = current->period_anchor_day;
    const char **mine[] = {&definition->period,      &definition->unit,
                           &definition->description, &definition->overage,
                           &definition->time_zone,   &definition->alerts_json,
                           &definition->webhook_json};
    const char *const theirs[] = {current->period,      current->unit,      current->description,
                                  current->overage,     current->time_zone, current->alerts_json,
                                  current->webhook_json};
    for (size_t i = 0; i < 7; i++) {
        if (*mine[i] == NULL)
            *mine[i] = theirs[i];
    }
    assert(definition->kind != NULL);
}

static const char *text_or_empty(const char *text)
{
    return text != NULL ? text : "";
}

/* {"field": {"from": ..., "to": ...}} for every field the put changes. */
static json_t *changes_json(const struct llmlimit_limit_definition *from,
                            const struct llmlimit_limit_definition *to)
{
    json_t *changes = json_object();
    const char *const text_names[] = {"kind",    "period",    "unit",   "description",
                                      "overage", "time_zone", "alerts", "webhook"};
    const char *const text_from[] = {from->kind,        from->period,      from->unit,
                                     from->description, from->overage,     from->time_zone,
                                     from->alerts_json, from->webhook_json};
    const char *const text_to[] = {to->kind,    to->period,    to->unit,        to->description,
                                   to->overage, to->time_zone, to->alerts_json, to->webhook_json};
    for (size_t i = 0; i < 8; i++) {
        const char *a = text_or_empty(text_from[i]), *b = text_or_empty(text_to[i]);
        if (strcmp(a, b) != 0)
            json_object_set_new(changes, text_names[i], json_pack("{s:s,s:s}", "from", a, "to", b));
    }
    const char *const number_names[] = {"capacity", "window_seconds", "timeout_seconds",
                                        "period_anchor_day"};
    const uint64_t number_from[] = {from->capacity, from->window_seconds, from->timeout_seconds,
                                    from->period_anchor_day};
    const uint64_t number_to[] = {to->capacity, to->window_seconds, to->timeout_seconds,
                                  to->period_anchor_day};
    for (size_t i = 0; i < 4; i++) {
        if (number_from[i] != number_to[i])
            json_object_set_new(changes, number_names[i],
                                json_pack("{s:I,s:I}", "from", (json_int_t)number_from[i], "to",
                                          (json_int_t)number_to[i]));
    }
    return changes;
}

/* A put by flags: a limit that exists keeps what the flags do not name (a
 * kind change is sent as given, for the server to refuse); a new one needs
 * --kind and --capacity. Prints the answer with what changed. */
static int put_by_flags(const struct cli *cli, struct llmlimit_client *client,
                        struct llmlimit_limit_definition *definition, const struct put_given *given)
{
    struct llmlimit_limit_state *current = NULL;
    struct llmlimit_status status;
    int rc = llmlimit_limit_get(client, definition->key, &current, &status);
    if (rc != 0 && rc != LLMLIMIT_ERR_NOT_FOUND)
        return cli_fail(cli, definition->key, rc, &status);
    assert(definition->key != NULL); /* limits_put checked it */
    bool same_kind = current != NULL && (definition->kind == NULL ||
                                         strcmp(definition->kind, current->definition.kind) == 0);
    if (same_kind)
        keep_unset(definition, given, &current->definition);
    if (current == NULL && (definition->kind == NULL || definition->capacity == 0)) {
        rc = cli_usage_error(cli, "%s is not a limit yet: put needs --kind and --capacity (> 0)",
                             definition->key);
    } else {
        json_t *answers = json_array();
        rc = put_one(cli, client, definition, answers);
        if (rc == EXIT_OK) {
            json_t *answer = json_array_get(answers, 0);
            json_object_set_new(answer, "created", json_boolean(current == NULL));
            if (current != NULL)
                json_object_set_new(answer, "changed",
                                    changes_json(&current->definition, definition));
            cli_print_json(cli, json_incref(answer));
        }
        json_decref(answers);
    }
    llmlimit_limit_state_free(current);
    return rc;
}

static int limits_put(const struct cli *cli, struct llmlimit_client *client, int argc, char **argv)
{
    struct llmlimit_limit_definition definition;
    struct put_given given;
    const char *file = NULL;
    int rc = put_flags(cli, argc, argv, &definition, &given, &file);
    if (rc != EXIT_OK)
        return rc;
    if (file != NULL) {
        if (definition.key != NULL || definition.kind != NULL || given.capacity)
            return cli_usage_error(cli, "--file and definition flags do not mix");
        return put_file(cli, client, file);
    }
    if (definition.key == NULL)
        return cli_usage_error(cli, "put needs --key (and --kind and --capacity for a new "
                                    "limit), or --file");
    if (given.capacity && definition.capacity == 0)
        return cli_usage_error(cli, "--capacity: want an integer 1..%ju",
                               (uintmax_t)LLMLIMIT_AMOUNT_MAX);
    return put_by_flags(cli, client, &definition, &given);
}

static int limits_get(const struct cli *cli, struct llmlimit_client *client, const char *key)
{
    struct llmlimit_limit_state *state;
    struct llmlimit_status status;
    int rc = llmlimit_limit_get(client, key, &state, &status);
    if (rc != 0)
        return cli_fail(cli, key, rc, &status);
    cli_print_json(cli, state_json(state));
    llmlimit_limit_state_free(state);
    return EXIT_OK;
}

static int limits_list(const struct cli *cli, struct llmlimit_client *client)
{
    struct llmlimit_limit_list *list;
    struct llmlimit_status status;
    int rc = llmlimit_limit_list(client, &list, &status);
    if (rc != 0)
        return cli_fail(cli, "list", rc, &status);
    json_t *limits = json_array();
    for (size_t i = 0; i < list->count; i++)
        json_array_append_new(limits, state_json(&list->limits[i]));
    llmlimit_limit_list_free(list);
    cli_print_json(cli, json_pack("{s:o}", "limits", limits));
    return EXIT_OK;
}

static int limits_delete(const struct cli *cli, struct llmlimit_client *client, const char *key)
{
    struct llmlimit_status status;
    int rc = llmlimit_limit_delete(client, key, &status);
    if (rc != 0)
        return cli_fail(cli, key, rc, &status);
    cli_print_json(cli, json_pack("{s:b}", "ok", 1));
    return EXIT_OK;
}

int cmd_limits(const struct cli *cli, int argc, char **argv)
{
    if (cli_wants_help(argc, argv, limits_usage))
        return EXIT_OK;
    if (argc < 2)
        return cli_usage_error(cli, "want put, get, list or delete");
    const char *action = argv[1];
    assert(action != NULL);
    bool takes_key = strcmp(action, "get") == 0 || strcmp(action, "delete") == 0;
    if (takes_key && argc != 3)
        return cli_usage_error(cli, "%s takes exactly one KEY", action);
    if (strcmp(action, "list") == 0 && argc != 2)
        return cli_usage_error(cli, "list takes no arguments");
    if (!takes_key && strcmp(action, "list") != 0 && strcmp(action, "put") != 0)
        return cli_usage_error(cli, "unknown action \"%s\"", action);
    struct llmlimit_client *client;
    int rc = cli_client(cli, TOKEN_ROLE_ADMIN, &client);
    if (rc != EXIT_OK)
        return rc;
    if (strcmp(action, "put") == 0)
        rc = limits_put(cli, client, argc, argv);
    else if (strcmp(action, "get") == 0)
        rc = limits_get(cli, client, argv[2]);
    else if (strcmp(action, "delete") == 0)
        rc = limits_delete(cli, client, argv[2]);
    else
        rc = limits_list(cli, client);
    llmlimit_client_free(client);
    return rc;
}
