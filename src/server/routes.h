/* Every route llmlimitd answers, in one table (docs/api.md). */
#ifndef LLMLIMIT_SERVER_ROUTES_H
#define LLMLIMIT_SERVER_ROUTES_H

#include "router.h"

extern const struct router server_routes;

#endif
