/* The memory backend: every limit, hold and lease in this process, one
 * critical section per call; usage is lost on restart (docs/architecture.md). */
#ifndef LLMLIMIT_BACKEND_MEMORY_H
#define LLMLIMIT_BACKEND_MEMORY_H

#include "backend/backend.h"

extern const struct backend_ops mem_backend_ops;

#endif
