/*
 * CMicroHTTPD: libmicrohttpd for Swift.
 *
 * Swift does not import C variadic functions (MHD_start_daemon, MHD_get_connection_info,
 * MHD_get_daemon_info, MHD_set_connection_option) nor cast macros (MHD_SIZE_UNKNOWN,
 * MHD_CONTENT_READER_END_*). These small static inline wrappers give Swift what it needs;
 * they hold no state of their own.
 */
#ifndef SHEETD_CMICROHTTPD_SHIM_H
#define SHEETD_CMICROHTTPD_SHIM_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <poll.h>
#include <pthread.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <microhttpd.h>

/* Macros Swift does not import. */
static const uint64_t sheetd_size_unknown = MHD_SIZE_UNKNOWN;
static const ssize_t sheetd_reader_end_of_stream = MHD_CONTENT_READER_END_OF_STREAM;
static const ssize_t sheetd_reader_end_with_error = MHD_CONTENT_READER_END_WITH_ERROR;

/* ---- listening socket ------------------------------------------------------------------ */

/* sheetd_listen error kinds */
enum { SHEETD_LISTEN_OK = 0, SHEETD_LISTEN_INVALID_ADDRESS = 1, SHEETD_LISTEN_BIND_FAILED = 2 };

/*
 * Creates, binds and listens on a TCP socket for an IPv4 or IPv6 literal.
 * "::" listens dual stack. Returns the fd, or -1 with *kind and *err set.
 * *is_ipv6 tells the caller which family it got.
 */
static inline int sheetd_listen(const char *host, int port, int backlog,
                                int *kind, int *err, int *is_ipv6) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    struct sockaddr *sa;
    socklen_t salen;
    int family;
    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    *kind = SHEETD_LISTEN_OK;
    *err = 0;
    *is_ipv6 = 0;
    if (port < 0 || port > 65535) { *kind = SHEETD_LISTEN_INVALID_ADDRESS; return -1; }
    if (inet_pton(AF_INET, host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&v4; salen = sizeof v4; family = AF_INET;
    } else if (inet_pton(AF_INET6, host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons((uint16_t)port);
        sa = (struct sockaddr *)&v6; salen = sizeof v6; family = AF_INET6;
        *is_ipv6 = 1;
    } else {
        *kind = SHEETD_LISTEN_INVALID_ADDRESS;
        return -1;
    }
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) { *kind = SHEETD_LISTEN_BIND_FAILED; *err = errno; return -1; }
    int on = 1, off = 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (family == AF_INET6) {
        /* "::" means every address, IPv4 included. */
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    }
    if (bind(fd, sa, salen) != 0 || listen(fd, backlog) != 0) {
        *kind = SHEETD_LISTEN_BIND_FAILED;
        *err = errno;
        close(fd);
        return -1;
    }
    return fd;
}

/* The port a socket is bound to, or -1. */
static inline int sheetd_socket_port(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0) return -1;
    if (ss.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return -1;
}

static inline int sheetd_set_send_buffer(int fd, int bytes) {
    return setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

/* ---- daemon ------------------------------------------------------------------------------ */

typedef void (*sheetd_log_fn)(void *ctx, const char *message);

/* The error-log sink: libmicrohttpd's printf-style messages, formatted, to a plain callback. */
struct sheetd_log_sink {
    sheetd_log_fn fn;
    void *ctx;
};

static inline void sheetd_log_trampoline(void *cls, const char *fmt, va_list ap) {
    struct sheetd_log_sink *sink = (struct sheetd_log_sink *)cls;
    char buffer[1024];
    int n = vsnprintf(buffer, sizeof buffer, fmt, ap);
    if (n < 0) return;
    /* libmicrohttpd ends most messages with a newline; the sink gets lines without it. */
    size_t len = strlen(buffer);
    while (len > 0 && (buffer[len - 1] == '\n' || buffer[len - 1] == '\r')) buffer[--len] = '\0';
    if (sink != NULL && sink->fn != NULL) sink->fn(sink->ctx, buffer);
}

struct sheetd_daemon_options {
    unsigned int extra_flags;         /* ORed into the fixed flags below */
    unsigned int thread_pool_size;    /* <= 1: a single internal thread */
    unsigned int connection_timeout;  /* seconds, 0 = none */
    unsigned int connection_limit;
    unsigned int per_ip_connection_limit; /* 0 = none */
    size_t connection_memory_limit;
    MHD_AccessHandlerCallback access_handler;
    void *access_handler_cls;
    MHD_RequestCompletedCallback completed;
    void *completed_cls;
    MHD_NotifyConnectionCallback notify_connection;
    void *notify_connection_cls;
    /* Sees each request's target exactly as it arrived (before libmicrohttpd unescapes it). */
    void *(*uri_log)(void *cls, const char *uri, struct MHD_Connection *connection);
    void *uri_log_cls;
    struct sheetd_log_sink *log_sink; /* must outlive the daemon */
    const char *tls_certificate;      /* PEM; with tls_key: serve HTTPS (MHD_USE_TLS); else NULL */
    const char *tls_key;              /* PEM; must outlive the daemon, like the certificate */
};

/*
 * MHD_OPTION_UNESCAPE_CALLBACK that leaves the text as it is. The server reads the path and the
 * query from the raw target itself (see uri_log): libmicrohttpd's own unescaping turns "%2F" into
 * a separator and cuts the path at "%00", and its result is never used, so it is not worth its cost.
 */
static inline size_t sheetd_keep_escapes(void *cls, struct MHD_Connection *connection, char *s) {
    (void)cls; (void)connection;
    return strlen(s);
}

/*
 * Starts a daemon without a listening socket of its own (connections come through
 * sheetd_accept_one) with MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
 * MHD_USE_ERROR_LOG, and MHD_USE_TLS (libmicrohttpd's GnuTLS) when a certificate and key are given.
 * Options are passed as one MHD_OPTION_ARRAY so zero-valued ones can be left out.
 */
static inline struct MHD_Daemon *sheetd_start_daemon(const struct sheetd_daemon_options *o) {
    struct MHD_OptionItem items[16];
    unsigned int n = 0;
    if (o->thread_pool_size > 1)
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)o->thread_pool_size, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)o->connection_timeout, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)o->connection_limit, NULL };
    if (o->per_ip_connection_limit > 0)
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)o->per_ip_connection_limit, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)o->connection_memory_limit, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)o->completed, o->completed_cls };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)o->notify_connection, o->notify_connection_cls };
    if (o->uri_log != NULL)
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)o->uri_log, o->uri_log_cls };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)&sheetd_keep_escapes, NULL };
    unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG
                         | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC | o->extra_flags;
    if (o->tls_certificate != NULL && o->tls_key != NULL) {
        flags |= MHD_USE_TLS;
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_CERT, 0, (void *)o->tls_certificate };
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)o->tls_key };
    }
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };
    /* The logger must be the very first option, or libmicrohttpd warns through its default logger. */
    return MHD_start_daemon(flags, 0, NULL, NULL, o->access_handler, o->access_handler_cls,
                            MHD_OPTION_EXTERNAL_LOGGER, &sheetd_log_trampoline, (void *)o->log_sink,
                            MHD_OPTION_ARRAY, items, MHD_OPTION_END);
}

/* sheetd_accept_one outcomes */
enum {
    SHEETD_ACCEPT_ADDED = 0,            /* accepted and handed to the daemon */
    SHEETD_ACCEPT_REFUSED = 1,          /* accepted; the daemon refused it and closed it */
    SHEETD_ACCEPT_NONE = 2,             /* nothing waiting (EAGAIN) */
    SHEETD_ACCEPT_AGAIN = 3,            /* this one failed (it was aborted, EINTR...): try the next */
    SHEETD_ACCEPT_OUT_OF_RESOURCES = 4, /* EMFILE, ENFILE, ENOBUFS, ENOMEM: wait before the next */
    SHEETD_ACCEPT_BROKEN = 5            /* the listening socket itself failed (EBADF, EINVAL...) */
};

/*
 * Accepts one connection on the non-blocking listening socket and hands it to the daemon
 * (MHD_add_connection, which closes it if it refuses it: a client over its per-address limit,
 * or no memory). *err is the errno of a failure, else 0.
 */
static inline int sheetd_accept_one(struct MHD_Daemon *daemon, int listen_fd, int *err) {
    struct sockaddr_storage address;
    socklen_t length = sizeof address;
    *err = 0;
    int fd = accept4(listen_fd, (struct sockaddr *)&address, &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        switch (errno) {
        case EAGAIN:
#if EWOULDBLOCK != EAGAIN
        case EWOULDBLOCK:
#endif
            return SHEETD_ACCEPT_NONE;
        case EMFILE: case ENFILE: case ENOBUFS: case ENOMEM:
            return SHEETD_ACCEPT_OUT_OF_RESOURCES;
        case EBADF: case EINVAL: case ENOTSOCK: case EOPNOTSUPP: case EFAULT:
            return SHEETD_ACCEPT_BROKEN;
        default: /* ECONNABORTED, EINTR, EPROTO, EPERM (a firewall), network errors of the peer */
            return SHEETD_ACCEPT_AGAIN;
        }
    }
    if (MHD_add_connection(daemon, fd, (const struct sockaddr *)&address, length) != MHD_YES) {
        *err = errno;
        return SHEETD_ACCEPT_REFUSED;
    }
    return SHEETD_ACCEPT_ADDED;
}

/* Waits until the listening socket has a connection (1) or the wake descriptor was written (2,
 * drained); listen_fd < 0 waits for the wake descriptor alone, timeout_ms < 0 for ever.
 * 0 on timeout or EINTR, -1 on other errors. */
static inline int sheetd_accept_wait(int listen_fd, int wake_fd, int timeout_ms) {
    struct pollfd fds[2] = { { wake_fd, POLLIN, 0 }, { listen_fd, POLLIN, 0 } };
    int n = poll(fds, listen_fd < 0 ? 1 : 2, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -1;
    if (fds[0].revents != 0) {
        uint64_t value;
        ssize_t got = read(wake_fd, &value, sizeof value);
        (void)got;
        return 2;
    }
    return (n > 0) ? 1 : 0;
}

/* ---- connection ------------------------------------------------------------------------ */

/* Writes the client's address (no port) as text into buf; returns its length or -1. */
static inline int sheetd_client_address(struct MHD_Connection *connection, char *buf, size_t len) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || len == 0) return -1;
    const struct sockaddr *sa = info->client_addr;
    const char *ok = NULL;
    if (sa->sa_family == AF_INET) {
        ok = inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            /* A dual-stack socket reports IPv4 clients as ::ffff:a.b.c.d; show them as IPv4. */
            ok = inet_ntop(AF_INET, &a6->s6_addr[12], buf, (socklen_t)len);
        } else {
            ok = inet_ntop(AF_INET6, a6, buf, (socklen_t)len);
        }
    }
    if (ok == NULL) return -1;
    return (int)strlen(buf);
}

/* Bytes of the request's head, from the first byte of the method to the end of the empty line
   (MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE), or 0 if unknown. */
static inline size_t sheetd_request_head_size(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    return info == NULL ? 0 : info->header_size;
}

/* The connection's socket, or -1. */
static inline int sheetd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : (int)info->connect_fd;
}

/* The pointer stored in *socket_context by the NOTIFY_CONNECTION callback, or NULL. */
static inline void *sheetd_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

/* Monotonic clock in nanoseconds (cheap: vDSO). */
static inline int64_t sheetd_monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* shutdown(2) both directions: libmicrohttpd then sees the peer gone and closes the connection
   on its own thread. */
static inline int sheetd_shutdown_socket(int fd) {
    return shutdown(fd, SHUT_RDWR);
}

/* Bytes received on the socket that nobody has read yet (FIONREAD), or -1. */
static inline int sheetd_socket_unread(int fd) {
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

/* Bytes written to the socket that the peer has not yet acknowledged (TIOCOUTQ), or -1. */
static inline int sheetd_socket_unsent(int fd) {
    int n = 0;
    return ioctl(fd, TIOCOUTQ, &n) == 0 ? n : -1;
}

/* MHD_set_connection_option(MHD_CONNECTION_OPTION_TIMEOUT, seconds). */
static inline enum MHD_Result sheetd_set_connection_timeout(struct MHD_Connection *connection,
                                                            unsigned int seconds) {
    return MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

/* True when the connection's request head is complete and parsed (libmicrohttpd answers
   MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE only from then on, until the connection closes). */
static inline int sheetd_head_parsed(struct MHD_Connection *connection) {
    return MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE) != NULL;
}

/* True when an answer is queued on the connection (MHD_CONNECTION_INFO_HTTP_STATUS is answered
   only while a response is set). */
static inline int sheetd_answer_queued(struct MHD_Connection *connection) {
    return MHD_get_connection_info(connection, MHD_CONNECTION_INFO_HTTP_STATUS) != NULL;
}

/* Sends an answer on a non-blocking socket without waiting, then shuts down the sending side
   (the peer reads the answer, then the end). Returns the bytes sent, or -1. */
static inline long sheetd_send_then_shut(int fd, const void *bytes, size_t count) {
    ssize_t sent = send(fd, bytes, count, MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(fd, SHUT_WR);
    return (long)sent;
}

/* The current time as an HTTP date (IMF-fixdate) in buf; returns its length or 0. */
static inline size_t sheetd_http_date(char *buf, size_t len) {
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) == NULL) return 0;
    static const char *days[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
    static const char *months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
    int n = snprintf(buf, len, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
                     months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return (n > 0 && (size_t)n < len) ? (size_t)n : 0;
}

/* The calling thread, as a number (to tell libmicrohttpd's threads apart). */
static inline uint64_t sheetd_thread_id(void) {
    return (uint64_t)pthread_self();
}

/* ---- socket watcher (epoll; epoll_event is packed on x86-64, so Swift does not touch it) ---- */

enum { SHEETD_WATCH_PEER_CLOSED = 1, SHEETD_WATCH_READABLE = 2 };

/* Registers fd in the epoll set under token: peer-close events only (EPOLLRDHUP, HUP, ERR) or,
   with readable != 0, incoming data too. Returns 0 or -1 (errno). */
static inline int sheetd_watch_add(int epfd, int fd, uint64_t token, int readable) {
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = EPOLLRDHUP | EPOLLHUP | EPOLLERR | (readable ? EPOLLIN : 0);
    event.data.u64 = token;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event);
}

static inline int sheetd_watch_remove(int epfd, int fd) {
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &event);
}

/* Waits up to timeout_ms for events; writes up to max tokens and SHEETD_WATCH_* flags.
   Returns how many, 0 on timeout or EINTR, -1 on other errors. */
static inline int sheetd_watch_wait(int epfd, uint64_t *tokens, int *flags, int max, int timeout_ms) {
    struct epoll_event events[64];
    if (max > 64) max = 64;
    int n = epoll_wait(epfd, events, max, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -1;
    for (int i = 0; i < n; i++) {
        tokens[i] = events[i].data.u64;
        flags[i] = ((events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ? SHEETD_WATCH_PEER_CLOSED : 0)
                 | ((events[i].events & EPOLLIN) ? SHEETD_WATCH_READABLE : 0);
    }
    return n;
}

/* An eventfd to wake the server's own loops (WakeSignal), close-on-exec and non-blocking, or -1. */
static inline int sheetd_wake_descriptor(void) {
    return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

/* A second descriptor for the same socket, close-on-exec, or -1. */
static inline int sheetd_dup_socket(int fd) {
    return fcntl(fd, F_DUPFD_CLOEXEC, 0);
}

/* Reads and drops what is waiting on a non-blocking socket, at most max bytes. Returns the bytes
   dropped; *ended is set when the peer finished sending (EOF) or the socket failed. */
static inline long sheetd_drain_socket(int fd, long max, int *ended) {
    char buffer[16384];
    long total = 0;
    *ended = 0;
    while (total < max) {
        ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (n > 0) { total += n; continue; }
        if (n == 0) { *ended = 1; break; }
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) *ended = 1;
        break;
    }
    return total;
}

#endif /* SHEETD_CMICROHTTPD_SHIM_H */
