// epoll_wait, defined in the executable so that it is found before libc's, for libmicrohttpd.
//
// Why: libmicrohttpd's epoll loop (0.9.75, and 1.0.1 alike) drains events in batches of 128 and
// calls epoll_wait again, with the same timeout, whenever a batch came back full. The events of
// the full batch are handled only after that loop. When exactly 128 were ready, the second call
// finds none and blocks for the whole timeout (up to the connection timeout, 30 s), while the
// 128 requests it already has wait unread; those connections are then closed as idle. A burst of
// requests on one worker thread can hit it. Here a call that follows a full batch on the same
// thread and epoll set does not block: it takes what is ready and returns.
//
// Every other caller (libdispatch, SocketWatcher) sees at most one call return early, with 0
// events, after a full batch: what a timeout looks like, which each of them handles.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <sys/epoll.h>

#include "epoll_interposer.h"

/// The epoll set whose last epoll_wait on this thread returned a full batch, -1 if none.
static __thread int full_batch_epfd = -1;

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout) {
    if (epfd == full_batch_epfd) {
        timeout = 0;
    }
    // epoll_pwait with no signal mask is epoll_wait (epoll_wait(2)); a symbol of its own, so
    // this does not call itself.
    int count = epoll_pwait(epfd, events, maxevents, timeout, NULL);
    full_batch_epfd = (count > 0 && count == maxevents) ? epfd : -1;
    return count;
}

int sheetd_epoll_interposer_installed(void) {
    return dlsym(RTLD_DEFAULT, "epoll_wait") == (void *)epoll_wait;
}
