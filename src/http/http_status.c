/* Texts every answer's head takes: the reason phrase of a status and the
 * HTTP date of now. */
#include "http_internal.h"

#include <time.h>

const char *http_reason_phrase(unsigned status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 417:
        return "Expectation Failed";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    case 529:
        return "Site Overloaded";
    default:
        return "Unknown";
    }
}

/* An HTTP date for now; the text is kept per thread for the second. */
const char *http_date_now(void)
{
    static __thread time_t cached = -1;
    static __thread char text[40];
    time_t now = time(NULL);
    if (now != cached) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cached = now;
    }
    return text;
}
