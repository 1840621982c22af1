/* gateway.json's "mcp_servers" (docs/mcp.md): the MCP servers behind
 * /mcp/{server}, their credentials and the price of their tools' calls,
 * checked as strictly as the other sections (a key's "mcp_servers" list is
 * gw_config_decode.c's, the lookups gw_config.c's). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/limits.h"
#include "gw_config_internal.h"

static int fail_missing(struct loader *l, uint32_t line, const char *entry, const char *field)
{
    char path[192];
    snprintf(path, sizeof path, "%s.%s", entry, field);
    return gw_config_fail(l, line, path, "required");
}

static int decode_tool(struct loader *l, const struct jdoc_value *item, const char *entry,
                       struct gw_mcp_tool *tool)
{
    if (!jdoc_is(item, JDOC_OBJECT))
        return gw_config_fail(l, item->line, entry, "must be an object");
    bool price_seen = false;
    for (uint32_t k = 0; k < item->count; k++) {
        const struct jdoc_member *m = &item->as.members[k];
        char path[160];
        snprintf(path, sizeof path, "%s.%s", entry, m->key);
        uint64_t price = 0;
        int result = 0;
        if (strcmp(m->key, "name") == 0) {
            result = gw_config_text(l, &m->value, path, GW_NAME_LENGTH_MAX, true, &tool->name);
        } else if (strcmp(m->key, "usd_micros_per_call") == 0) {
            price_seen = true;
            result = gw_config_integer(l, &m->value, path, 0, AMOUNT_MAX, &price);
            tool->usd_micros_per_call = price;
        } else if (strcmp(m->key, "charge_errors") == 0) {
            if (m->value.kind != JDOC_TRUE && m->value.kind != JDOC_FALSE)
                return gw_config_fail(l, m->value.line, path, "must be true or false");
            tool->charge_errors = m->value.kind == JDOC_TRUE;
        } else {
            result = gw_config_fail(l, m->value.line, path, "unknown field");
        }
        if (result != 0)
            return -1;
    }
    if (tool->name == NULL)
        return fail_missing(l, item->line, entry, "name");
    if (!price_seen)
        return fail_missing(l, item->line, entry, "usd_micros_per_call");
    return 0;
}

static int decode_tools(struct loader *l, const struct jdoc_value *v, const char *path,
                        struct gw_mcp_server *server)
{
    if (!jdoc_is(v, JDOC_ARRAY) || v->count > GW_MCP_TOOLS_MAX)
        return gw_config_fail(l, v->line, path, "must be an array of at most %d tools",
                              GW_MCP_TOOLS_MAX);
    struct gw_mcp_tool *tools = arena_alloc(l->arena, (v->count + 1) * sizeof *tools);
    if (tools == NULL)
        return gw_config_fail(l, v->line, path, "out of memory");
    for (uint32_t i = 0; i < v->count; i++) {
        char entry[128];
        snprintf(entry, sizeof entry, "%s[%u]", path, i);
        if (decode_tool(l, &v->as.items[i], entry, &tools[i]) != 0)
            return -1;
        for (uint32_t k = 0; k < i; k++) {
            if (strcmp(tools[k].name, tools[i].name) == 0)
                return gw_config_fail(l, v->as.items[i].line, entry, "duplicate of %s[%u]", path,
                                      k);
        }
    }
    server->tools = tools;
    server->tool_count = v->count;
    return 0;
}

static int server_field(struct loader *l, const struct jdoc_member *m, const char *entry,
                        struct gw_mcp_server *server, bool *key_seen)
{
    char path[96];
    snprintf(path, sizeof path, "%s.%s", entry, m->key);
    const struct jdoc_value *v = &m->value;
    struct gw_upstream *u = &server->upstream;
    uint64_t number = 0;
    if (strcmp(m->key, "name") == 0)
        return gw_config_text(l, v, path, GW_NAME_LENGTH_MAX, true, &server->name);
    if (strcmp(m->key, "url") == 0)
        return gw_config_base_url(l, v, path, &u->base_url);
    if (strcmp(m->key, "api_key_env") == 0 || strcmp(m->key, "api_key_file") == 0) {
        if (*key_seen)
            return gw_config_fail(l, v->line, path, "give api_key_env or api_key_file, not both");
        *key_seen = true;
        return gw_config_api_key(l, v, path, strcmp(m->key, "api_key_env") == 0, u);
    }
    if (strcmp(m->key, "timeout_seconds") == 0 || strcmp(m->key, "connect_timeout_seconds") == 0) {
        if (gw_config_integer(l, v, path, 1, GW_TIMEOUT_SECONDS_MAX, &number) != 0)
            return -1;
        *(m->key[0] == 't' ? &u->timeout_seconds : &u->connect_timeout_seconds) = (uint32_t)number;
        return 0;
    }
    if (strcmp(m->key, "tools") == 0)
        return decode_tools(l, v, path, server);
    if (strcmp(m->key, "default_usd_micros_per_call") == 0) {
        if (gw_config_integer(l, v, path, 0, AMOUNT_MAX, &number) != 0)
            return -1;
        server->default_usd_micros_per_call = number;
        return 0;
    }
    return gw_config_fail(l, v->line, path, "unknown field");
}

static int decode_server(struct loader *l, const struct jdoc_value *item, uint32_t i,
                         struct gw_mcp_server *server)
{
    char entry[32];
    snprintf(entry, sizeof entry, "mcp_servers[%u]", i);
    if (!jdoc_is(item, JDOC_OBJECT))
        return gw_config_fail(l, item->line, entry, "must be an object");
    server->index = i;
    server->upstream.api = GW_API_OPENAI; /* its key goes as Authorization: Bearer */
    server->upstream.timeout_seconds = GW_MCP_TIMEOUT_SECONDS_DEFAULT;
    server->upstream.connect_timeout_seconds = GW_CONNECT_TIMEOUT_SECONDS_DEFAULT;
    bool key_seen = false;
    for (uint32_t k = 0; k < item->count; k++) {
        if (server_field(l, &item->as.members[k], entry, server, &key_seen) != 0)
            return -1;
    }
    if (server->name == NULL)
        return fail_missing(l, item->line, entry, "name");
    if (server->upstream.base_url == NULL)
        return fail_missing(l, item->line, entry, "url");
    server->upstream.name = server->name;
    for (uint32_t k = 0; k < i; k++) {
        if (strcmp(l->config->mcp_servers[k].name, server->name) == 0) {
            char path[64];
            snprintf(path, sizeof path, "%s.name", entry);
            return gw_config_fail(l, jdoc_get(item, "name")->line, path,
                                  "duplicate of mcp_servers[%u]", k);
        }
    }
    return 0;
}

int gw_config_decode_mcp_servers(struct loader *l, const struct jdoc_value *items)
{
    if (!jdoc_is(items, JDOC_ARRAY) || items->count > GW_MCP_SERVERS_MAX)
        return gw_config_fail(l, items->line, "mcp_servers", "must be an array of 0..%d entries",
                              GW_MCP_SERVERS_MAX);
    struct gw_mcp_server *servers = arena_alloc(l->arena, (items->count + 1) * sizeof *servers);
    if (servers == NULL)
        return gw_config_fail(l, items->line, "mcp_servers", "out of memory");
    l->config->mcp_servers = servers;
    for (uint32_t i = 0; i < items->count; i++) {
        l->config->mcp_server_count = i + 1; /* a key read before a failure is wiped too */
        if (decode_server(l, &items->as.items[i], i, &servers[i]) != 0)
            return -1;
    }
    l->config->mcp_server_count = items->count;
    return 0;
}
