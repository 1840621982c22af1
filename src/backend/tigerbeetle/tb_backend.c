/* The tigerbeetle backend's identity, below every other file of it: the
 * name its ops table carries (tigerbeetle.c), which tb_backend_of() checks a
 * backend's ops by, so a file that works on a struct tb_backend does not
 * reach up to the ops table (and through it to every op). */
#include "tb_backend.h"

const char tb_backend_name[] = "tigerbeetle";
