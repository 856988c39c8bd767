/*
 * baseline: the ceiling sheetd is measured against.
 *
 * A minimal libmicrohttpd 0.9.75 server in the SAME mode sheetd runs in:
 *   MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, a pool of --threads,
 *   sheetd's connection memory limit (--memory-limit, default 12 KiB), a connection timeout.
 * It reads every POST body fully (chunks accumulated, answer queued on the final call, so
 * keep-alive holds exactly as in sheetd) and answers a fixed JSON body whose size is given
 * on the command line. It implements NO sheet logic: any path answers.
 *
 *   POST /sessions      201, a session-shaped JSON with a fresh 22-char id ("detent":"large"),
 *                       padded to --create-size bytes (default: --body-size)
 *   GET  anything       200, fixed body of --get-size bytes (default: --body-size)
 *   anything else       200, fixed body of --body-size bytes
 *
 * The create answer carries a unique id (a counter, base64url) only so that the benchmark
 * harness can be tested end to end against this server before sheetd exists.
 *
 * --burn-ns N (default 0) is for calibration: what a C server with sheetd's CPU cost per
 * request measures. With N > 0 the handler's final call for every request (drag/generic, GET
 * and create alike), just before it queues the answer, runs an arithmetic loop calibrated at
 * start to take N nanoseconds of CPU (bench.py's calibration phase passes sheetd's extra CPU
 * per drag).
 *
 * --fresh-answers 1 makes every POST other than a create answer the way sheetd answers: a
 * response made for it, with a copy of the body (a fresh id in it), and sheetd's four header
 * fields (Content-Type, Cache-Control, an X-Request-Id of 22 characters where sheetd sends 12
 * to 14, an ETag), created, queued and destroyed per request. It measures what
 * libmicrohttpd's per-answer work costs, apart from anything sheetd computes.
 *
 * Usage: baseline [--host 127.0.0.1] --port P --threads N --body-size BYTES
 *                 [--get-size BYTES] [--create-size BYTES] [--burn-ns N] [--memory-limit BYTES]
 *                 [--fresh-answers 1]
 * Logs "baseline listening on http://HOST:PORT" on stderr; SIGINT/SIGTERM stop it.
 *
 * Build: cc -O2 -o baseline-server baseline.c $(pkg-config --cflags --libs libmicrohttpd) -lpthread
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <microhttpd.h>

#define BODY_LIMIT (64 * 1024) /* sheetd refuses bodies over 64 KiB */
#define INLINE_BODY 256

struct req {
  size_t len;
  size_t cap;
  char *buf;             /* points at inline or at a heap block */
  char inline_buf[INLINE_BODY];
};

static struct MHD_Response *resp_generic; /* POST (drag, gesture, ...) */
static struct MHD_Response *resp_get;
static struct MHD_Response *resp_413;
static size_t create_size;
static char *create_template; /* create answer; the id is written at create_id_off */
static size_t create_id_off;
static long long burn_ns; /* --burn-ns: thread CPU time spent per request (0: none) */
static char *generic_template; /* --fresh-answers: the POST answer; its id at generic_id_off */
static size_t generic_size, generic_id_off;
static int fresh_answers;
static atomic_uint_fast64_t answer_counter; /* ids for creates and fresh answers */

static const char CT[] = "application/json; charset=utf-8";

/* A JSON text of exactly `size` bytes (or the smallest possible when size is smaller):
 * prefix + "\"pad\":\"xxx…\"}". */
static char *padded_json(const char *prefix, size_t size, size_t *out_len) {
  const char *pad_open = "\"pad\":\"";
  const char *pad_close = "\"}";
  size_t fixed = strlen(prefix) + strlen(pad_open) + strlen(pad_close);
  size_t n = size > fixed ? size - fixed : 0;
  size_t total = fixed + n;
  char *s = malloc(total + 1);
  if (!s) { perror("malloc"); exit(1); }
  char *p = s;
  p = stpcpy(p, prefix);
  p = stpcpy(p, pad_open);
  memset(p, 'x', n);
  p += n;
  p = stpcpy(p, pad_close);
  *out_len = total;
  return s;
}

static struct MHD_Response *fixed_response(const char *body, size_t len) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
  if (!r) { fprintf(stderr, "baseline: cannot create response\n"); exit(1); }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CT);
  return r;
}

static void encode_id(uint64_t n, char out[22]) {
  static const char alphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (int i = 21; i >= 0; i--) {
    out[i] = alphabet[n & 63];
    n >>= 6;
  }
}

/* Calibration (--burn-ns): a loop of plain arithmetic, user-space CPU like sheetd's extra
 * cost. Its iterations per nanosecond are measured once at start (burn_calibrate): timing each
 * request's burn with clock_gettime(CLOCK_THREAD_CPUTIME_ID) instead would be a system call per
 * read on this kind of VM, and spend the burn in the kernel. */
static double burn_iterations_per_ns;
static volatile uint64_t burn_sink;

static void burn_loop(uint64_t iterations) {
  uint64_t x = burn_sink;
  for (uint64_t i = 0; i < iterations; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  burn_sink = x;
}

static long long thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void burn_calibrate(void) {
  uint64_t n = 1 << 20;
  for (;;) { /* grow until one run takes at least 50 ms of CPU, then take the fastest of 5 */
    long long t0 = thread_cpu_ns();
    burn_loop(n);
    if (thread_cpu_ns() - t0 >= 50000000LL) break;
    n *= 2;
  }
  long long best = -1;
  for (int k = 0; k < 5; k++) {
    long long t0 = thread_cpu_ns();
    burn_loop(n);
    long long dt = thread_cpu_ns() - t0;
    if (best < 0 || dt < best) best = dt;
  }
  burn_iterations_per_ns = (double)n / (double)best;
}

static void burn_cpu(void) { burn_loop((uint64_t)(burn_iterations_per_ns * (double)burn_ns)); }

/* An answer made for one request: a copy of `template` with a fresh id at `id_off`; with
 * `contract_fields`, also the header fields sheetd adds to every answer. */
static enum MHD_Result answer_fresh(struct MHD_Connection *c, unsigned status,
                                    const char *template, size_t size, size_t id_off,
                                    int contract_fields) {
  char *body = malloc(size);
  if (!body) return MHD_NO;
  memcpy(body, template, size);
  uint64_t n = atomic_fetch_add_explicit(&answer_counter, 1, memory_order_relaxed) + 1;
  encode_id(n, body + id_off);
  struct MHD_Response *r = MHD_create_response_from_buffer(size, body, MHD_RESPMEM_MUST_FREE);
  if (!r) { free(body); return MHD_NO; }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CT);
  if (contract_fields) {
    char request_id[23], etag[32];
    encode_id(n * 2654435761u, request_id);
    request_id[22] = 0;
    snprintf(etag, sizeof etag, "\"%llu\"", (unsigned long long)(n % 1000) + 2);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Request-Id", request_id);
    MHD_add_response_header(r, MHD_HTTP_HEADER_ETAG, etag);
  }
  enum MHD_Result ret = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version,
                               const char *upload_data, size_t *upload_data_size,
                               void **con_cls) {
  (void)cls;
  (void)version;
  struct req *r = *con_cls;
  if (r == NULL) {
    /* First call: headers only. Only early refusals may answer here (it closes the
     * connection); everything else waits for the body so keep-alive holds. */
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > BODY_LIMIT)
      return MHD_queue_response(c, 413 /* Content Too Large */, resp_413);
    r = malloc(sizeof *r);
    if (!r) return MHD_NO;
    r->len = 0;
    r->cap = INLINE_BODY;
    r->buf = r->inline_buf;
    *con_cls = r;
    return MHD_YES;
  }
  if (*upload_data_size != 0) {
    size_t n = *upload_data_size;
    if (r->len + n > BODY_LIMIT) return MHD_NO; /* chunked body past the limit */
    if (r->len + n > r->cap) {
      size_t cap = r->cap * 2;
      while (cap < r->len + n) cap *= 2;
      char *nb = malloc(cap);
      if (!nb) return MHD_NO;
      memcpy(nb, r->buf, r->len);
      if (r->buf != r->inline_buf) free(r->buf);
      r->buf = nb;
      r->cap = cap;
    }
    memcpy(r->buf + r->len, upload_data, n);
    r->len += n;
    *upload_data_size = 0;
    return MHD_YES;
  }
  /* Final call: the whole body is in r->buf (unused: there is no sheet logic here). */
  if (burn_ns > 0) burn_cpu();
  if (strcmp(method, MHD_HTTP_METHOD_POST) == 0 && strcmp(url, "/sessions") == 0)
    return answer_fresh(c, MHD_HTTP_CREATED, create_template, create_size, create_id_off, 0);
  if (strcmp(method, MHD_HTTP_METHOD_GET) == 0)
    return MHD_queue_response(c, MHD_HTTP_OK, resp_get);
  if (fresh_answers)
    return answer_fresh(c, MHD_HTTP_OK, generic_template, generic_size, generic_id_off, 1);
  return MHD_queue_response(c, MHD_HTTP_OK, resp_generic);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls,
                      enum MHD_RequestTerminationCode toe) {
  (void)cls;
  (void)c;
  (void)toe;
  struct req *r = *con_cls;
  if (r) {
    if (r->buf != r->inline_buf) free(r->buf);
    free(r);
    *con_cls = NULL;
  }
}

static void usage(void) {
  fprintf(stderr,
          "usage: baseline [--host 127.0.0.1] --port P --threads N --body-size BYTES\n"
          "                [--get-size BYTES] [--create-size BYTES] [--burn-ns N] [--memory-limit BYTES]\n"
          "  --memory-limit BYTES  MHD_OPTION_CONNECTION_MEMORY_LIMIT (default 12288, sheetd's)\n"
          "  --burn-ns N  calibration: spin N ns of thread CPU per request (what a C server with sheetd's CPU cost per request measures)\n"
          "  --fresh-answers 1  answer each POST with a response made for it, with sheetd's four header fields\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *host = "127.0.0.1";
  long port = -1, threads = 2, body_size = -1, get_size = -1, csize = -1, memory_limit = 12 * 1024;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 >= argc) usage();
    const char *v = argv[++i];
    if (!strcmp(a, "--host")) host = v;
    else if (!strcmp(a, "--port")) port = strtol(v, NULL, 10);
    else if (!strcmp(a, "--threads")) threads = strtol(v, NULL, 10);
    else if (!strcmp(a, "--body-size")) body_size = strtol(v, NULL, 10);
    else if (!strcmp(a, "--get-size")) get_size = strtol(v, NULL, 10);
    else if (!strcmp(a, "--create-size")) csize = strtol(v, NULL, 10);
    else if (!strcmp(a, "--burn-ns")) burn_ns = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--memory-limit")) memory_limit = strtol(v, NULL, 10);
    else if (!strcmp(a, "--fresh-answers")) fresh_answers = strtol(v, NULL, 10) != 0;
    else usage();
  }
  if (port < 0 || port > 65535 || threads < 1 || body_size < 0 || burn_ns < 0 || memory_limit < 2048) usage();
  if (burn_ns > 0) burn_calibrate();
  if (get_size < 0) get_size = body_size;
  if (csize < 0) csize = body_size;

  size_t len;
  char *generic = padded_json(
      "{\"session\":{\"id\":\"AAAAAAAAAAAAAAAAAAAAAA\",\"detent\":\"large\"},\"events\":[],", (size_t)body_size, &len);
  resp_generic = fixed_response(generic, len);
  generic_template = generic;
  generic_size = len;
  generic_id_off = strlen("{\"session\":{\"id\":\"");
  char *get = padded_json("{\"id\":\"AAAAAAAAAAAAAAAAAAAAAA\",\"detent\":\"large\",", (size_t)get_size, &len);
  resp_get = fixed_response(get, len);
  static const char too_large[] =
      "{\"error\":{\"code\":\"payload_too_large\",\"message\":\"The body is over 64 KiB.\"}}";
  resp_413 = fixed_response(too_large, sizeof too_large - 1);
  const char *cprefix = "{\"id\":\"AAAAAAAAAAAAAAAAAAAAAA\",\"version\":1,\"phase\":\"presented\",\"detent\":\"large\",";
  create_template = padded_json(cprefix, (size_t)csize, &create_size);
  create_id_off = strlen("{\"id\":\"");

  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
    fprintf(stderr, "baseline: --host must be an IPv4 address\n");
    return 2;
  }

  /* Block the stop signals before libmicrohttpd starts its threads; wait for them below. */
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, NULL);

  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG,
      0, NULL, NULL, &handler, NULL,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
      MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)threads,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)memory_limit,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)30,
      MHD_OPTION_NOTIFY_COMPLETED, &completed, NULL,
      MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "baseline: MHD_start_daemon failed (port %ld): %s\n", port, strerror(errno));
    return 1;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  fprintf(stderr, "baseline listening on http://%s:%u (threads %ld, body %ld, get %ld, create %zu bytes, burn %lld ns)\n",
          host, info ? (unsigned)info->port : (unsigned)port, threads, body_size, get_size,
          create_size, burn_ns);
  fflush(stderr);

  int sig;
  sigwait(&sigs, &sig);
  MHD_stop_daemon(d);
  return 0;
}
