/* Every route llmlimitd answers, in one table (docs/api.md). */
#ifndef LLMLIMIT_SERVER_ROUTES_H
#define LLMLIMIT_SERVER_ROUTES_H

#include "router.h"

/* Built once, on the first call, from the rows of routes.c and the
 * gateway's dialects. */
const struct router *routes_server(void);

#endif
