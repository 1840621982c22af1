/* Placeholder until the memory backend lands. */
#include "backend.h"
const struct backend_ops memory_backend_ops = {.name = "memory"};
