#ifndef SHEETD_EPOLL_INTERPOSER_H
#define SHEETD_EPOLL_INTERPOSER_H

#include <sys/epoll.h>

/// 1 when the process's `epoll_wait` is the one of epoll_interposer.c (it is found before libc's,
/// so libmicrohttpd calls it), 0 otherwise.
int sheetd_epoll_interposer_installed(void);

#endif
