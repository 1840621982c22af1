/* The sqlite backend's identity, below every other file of it: the name its
 * ops table carries (sqlite.c), which sq_backend_of() checks a backend's ops
 * by, so a file that works on a struct sq_backend does not reach up to the
 * ops table (and through it to the admin and console ops). */
#include "sq_backend.h"

const char sq_backend_name[] = "sqlite";
