/* The request heads the direct path serves (lane.h), and only those. A head
 * that is not whole in the bytes given, or that asks for anything more
 * than a plain POST with its body at once, is left to libmicrohttpd, which
 * serves every HTTP/1.x request llmlimitd accepts. */
#ifndef LLMLIMIT_SERVER_LANE_HEAD_H
#define LLMLIMIT_SERVER_LANE_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LANE_HEAD_FIELDS_MAX 64 /* header lines of one head */

struct lane_head {
    size_t length;           /* through the blank line */
    uint64_t content_length; /* the body's, always given */
    size_t path_offset;      /* in the bytes parsed */
    size_t path_length;
    size_t authorization_offset; /* the value, blanks trimmed */
    size_t authorization_length;
    bool has_authorization;
    bool close; /* Connection: close */
};

enum {
    LANE_HEAD_REFUSED = 0, /* not one the direct path serves */
    LANE_HEAD_WHOLE = 1,
    LANE_HEAD_PARTIAL = 2, /* the bytes end inside a head it would serve, so far */
};

/* LANE_HEAD_WHOLE when data[0, length) begins with a whole head the direct
 * path serves:
 * "POST", a path of [A-Za-z0-9/._~-] starting with '/', "HTTP/1.1"; header
 * names of token characters, values of visible ASCII, blanks and tabs, every
 * line ending in CRLF; one Content-Length of 1 to 19 digits; Connection
 * absent, "close" or "keep-alive"; at most one Authorization; no
 * Transfer-Encoding, Expect or Upgrade; at most LANE_HEAD_FIELDS_MAX lines.
 * LANE_HEAD_PARTIAL when the bytes end before the head does and nothing so
 * far is refused; LANE_HEAD_REFUSED for anything else. The body is not
 * looked at. */
int lane_head_parse(const char *data, size_t length, struct lane_head *head);

#endif
