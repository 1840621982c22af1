/* llmlimitd as a whole: main.c only sees server_run(). The server object
 * is services.h's, one HTTP exchange and its API exchange.h's. */
#ifndef LLMLIMIT_SERVER_SERVER_H
#define LLMLIMIT_SERVER_SERVER_H

#include "config.h"

/* Runs llmlimitd until SIGTERM/SIGINT; returns the process exit code. */
int server_run(const struct server_config *config);

#endif
