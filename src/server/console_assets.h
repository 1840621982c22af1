/* The console's page, script and style sheet (src/console/), embedded in
 * llmlimitd by the build (src/console/embed.cmake writes console_assets.c):
 * nothing is read from disk or fetched at run time. */
#ifndef LLMLIMIT_SERVER_CONSOLE_ASSETS_H
#define LLMLIMIT_SERVER_CONSOLE_ASSETS_H

#include <stddef.h>

struct console_asset {
    const char *path; /* the route: /console, /console/app.js, /console/app.css */
    const char *content_type;
    const char *etag; /* a quoted prefix of the content's SHA-256 */
    const unsigned char *data;
    size_t size;
};

#define CONSOLE_ASSET_COUNT 3
extern const struct console_asset console_assets[CONSOLE_ASSET_COUNT];

#endif
