/*
 * seqbench: drives seed 000's per-view script (seed_view.lua) on a
 * redis-server as fast as it takes it: the baseline of hotrank's Redis
 * ingest figures (bench/redis_ingest.sh, pipeline_ingest.sh, run.sh).
 *
 * Each of C connections sends rounds of P commands at once (pipelined)
 * and waits for their P replies before the next round:
 *   -m script   one EVALSHA of the script per event;
 *   -m dedupe   seed 000's dedupe step first, `SET dedup:V:A 1 NX EX 900`
 *               for the round's P events, then one more round trip with
 *               the script for the pairs whose SET took (new pairs only).
 * Events: article ids uniform over -a articles, visitor ids over -V.
 * At the end one line: RESULT ... events_per_s=N plus round-trip
 * percentiles in microseconds (a dedupe round's two trips count as one).
 *
 * C, one thread, poll(2): the client must cost less than the server it
 * measures, on a machine where both share two cores.
 *
 *   gcc -O2 -o seqbench seqbench.c -lm
 *   ./seqbench -p 6390 -c 50 -P 16 -d 5 -a 10000 -V 1000000000 -m dedupe -s SHA
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_P 1024
#define LAT_MAX 1000000

struct conn {
    int fd;
    char *out;
    size_t out_len, out_sent, out_cap;
    char *in;
    size_t in_len, in_cap;
    int waiting;           /* replies still expected this trip */
    int phase;             /* 0: SETs (dedupe) or scripts; 1: scripts after SETs */
    uint64_t art[MAX_P], vis[MAX_P];
    int fresh[MAX_P];
    int got;               /* replies parsed this trip */
    double started;        /* when the round began */
};

static const char *host = "127.0.0.1";
static int port = 6379, nconns = 50, depth = 16, secs = 5, dedupe = 0;
static uint64_t articles = 10000, visitors = 1000000000ULL, rng = 88172645463325252ULL;
static const char *sha = NULL;
static uint64_t events = 0;
static double *lat;
static size_t nlat = 0;

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t next_rand(void) { /* xorshift64 */
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void die(const char *what) {
    fprintf(stderr, "seqbench: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void put(struct conn *c, const char *s, size_t n) {
    if (c->out_len + n > c->out_cap) {
        c->out_cap = (c->out_len + n) * 2;
        c->out = realloc(c->out, c->out_cap);
        if (!c->out) die("realloc");
    }
    memcpy(c->out + c->out_len, s, n);
    c->out_len += n;
}

/* One command in RESP: an array of bulk strings. */
static void command(struct conn *c, int argc, const char **argv) {
    char head[32];
    put(c, head, (size_t)snprintf(head, sizeof head, "*%d\r\n", argc));
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(argv[i]);
        put(c, head, (size_t)snprintf(head, sizeof head, "$%zu\r\n", n));
        put(c, argv[i], n);
        put(c, "\r\n", 2);
    }
}

static void send_script(struct conn *c, int i) {
    char a[32], v[32], k1[48], k2[48], k4[48];
    snprintf(a, sizeof a, "a%llu", (unsigned long long)c->art[i]);
    snprintf(v, sizeof v, "v%llu", (unsigned long long)c->vis[i]);
    snprintf(k1, sizeof k1, "counter:views:%s", a);
    snprintf(k2, sizeof k2, "hll:uv:%s", a);
    snprintf(k4, sizeof k4, "meta:article:%s", a);
    const char *argv[] = {"EVALSHA", sha, "4", k1, k2, "hot:score", k4, a, v, "1.0", "1.2", "2", "1.5"};
    command(c, 13, argv);
}

static void send_set(struct conn *c, int i) {
    char key[80];
    snprintf(key, sizeof key, "dedup:v%llu:a%llu", (unsigned long long)c->vis[i],
             (unsigned long long)c->art[i]);
    const char *argv[] = {"SET", key, "1", "NX", "EX", "900"};
    command(c, 6, argv);
}

/* Starts a round: P new events, their first trip. */
static void start_round(struct conn *c) {
    c->out_len = c->out_sent = 0;
    c->got = 0;
    c->phase = 0;
    c->started = now_s();
    for (int i = 0; i < depth; i++) {
        c->art[i] = next_rand() % articles;
        c->vis[i] = next_rand() % visitors;
        c->fresh[i] = 0;
        if (dedupe)
            send_set(c, i);
        else
            send_script(c, i);
    }
    c->waiting = depth;
}

/*
 * The length of one complete reply at p (n bytes available), 0 if it is
 * not all there yet; *nil is set for a null bulk string, *err for an error.
 */
static size_t reply_len(const char *p, size_t n, int *nil, int *err) {
    const char *end = memchr(p, '\n', n);
    if (!end) return 0;
    size_t line = (size_t)(end - p) + 1;
    long long v = atoll(p + 1);
    switch (p[0]) {
    case '+': case ':': return line;
    case '-': *err = 1; return line;
    case ',': return line;
    case '$':
        if (v < 0) { *nil = 1; return line; }
        return n >= line + (size_t)v + 2 ? line + (size_t)v + 2 : 0;
    case '*': {
        size_t at = line;
        for (long long i = 0; i < v; i++) {
            int sub_nil = 0, sub_err = 0;
            size_t s = reply_len(p + at, n - at, &sub_nil, &sub_err);
            if (!s) return 0;
            at += s;
        }
        if (v < 0) *nil = 1;
        return at;
    }
    default:
        fprintf(stderr, "seqbench: unexpected reply byte %d\n", p[0]);
        exit(1);
    }
}

/* Parses the replies in c->in; moves on when a trip's are all in. */
static void take_replies(struct conn *c, double deadline) {
    size_t at = 0;
    while (c->waiting > 0) {
        int nil = 0, err = 0;
        size_t n = reply_len(c->in + at, c->in_len - at, &nil, &err);
        if (!n) break;
        if (err) {
            fprintf(stderr, "seqbench: redis error: %.*s\n", (int)n, c->in + at);
            exit(1);
        }
        if (dedupe && c->phase == 0) c->fresh[c->got] = !nil;
        at += n;
        c->got++;
        c->waiting--;
    }
    memmove(c->in, c->in + at, c->in_len - at);
    c->in_len -= at;
    if (c->waiting > 0) return;
    if (dedupe && c->phase == 0) {
        /* The script for the new pairs only. */
        c->out_len = c->out_sent = 0;
        c->got = 0;
        c->phase = 1;
        for (int i = 0; i < depth; i++)
            if (c->fresh[i]) {
                send_script(c, i);
                c->waiting++;
            }
        if (c->waiting > 0) return;
    }
    events += (uint64_t)depth;
    if (nlat < LAT_MAX) lat[nlat++] = now_s() - c->started;
    if (now_s() < deadline) start_round(c);
    else c->fd = -c->fd - 1; /* done */
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double q) {
    if (!nlat) return 0;
    size_t i = (size_t)(q * (double)(nlat - 1));
    return lat[i] * 1e6;
}

int main(int argc, char **argv) {
    int opt;
    while ((opt = getopt(argc, argv, "h:p:c:P:d:a:V:m:s:r:")) != -1) {
        switch (opt) {
        case 'h': host = optarg; break;
        case 'p': port = atoi(optarg); break;
        case 'c': nconns = atoi(optarg); break;
        case 'P': depth = atoi(optarg); break;
        case 'd': secs = atoi(optarg); break;
        case 'a': articles = strtoull(optarg, NULL, 10); break;
        case 'V': visitors = strtoull(optarg, NULL, 10); break;
        case 'm': dedupe = strcmp(optarg, "dedupe") == 0; break;
        case 's': sha = optarg; break;
        case 'r': rng = strtoull(optarg, NULL, 10) | 1; break;
        default:
            fprintf(stderr, "usage: seqbench [-h host] [-p port] [-c conns] [-P depth] [-d secs] "
                            "[-a articles] [-V visitors] [-m script|dedupe] -s SHA [-r seed]\n");
            return 2;
        }
    }
    if (!sha || depth < 1 || depth > MAX_P || nconns < 1 || articles < 1 || visitors < 1) {
        fprintf(stderr, "seqbench: -s SHA is required; -P 1..%d, -c, -a, -V at least 1\n", MAX_P);
        return 2;
    }
    lat = malloc(sizeof(double) * LAT_MAX);
    struct conn *cs = calloc((size_t)nconns, sizeof *cs);
    struct pollfd *pf = calloc((size_t)nconns, sizeof *pf);
    if (!lat || !cs || !pf) die("calloc");
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "seqbench: -h takes an IPv4 address\n");
        return 2;
    }
    for (int i = 0; i < nconns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) die("socket");
        if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        cs[i].fd = fd;
        cs[i].in_cap = 1 << 16;
        cs[i].in = malloc(cs[i].in_cap);
        if (!cs[i].in) die("malloc");
    }
    double t0 = now_s(), deadline = t0 + secs, last_report = t0;
    for (int i = 0; i < nconns; i++) start_round(&cs[i]);
    for (;;) {
        int open = 0;
        for (int i = 0; i < nconns; i++) {
            struct conn *c = &cs[i];
            pf[i].fd = c->fd;
            pf[i].events = 0;
            if (c->fd < 0) continue;
            open++;
            pf[i].events = c->out_sent < c->out_len ? POLLOUT : POLLIN;
        }
        if (!open) break;
        if (poll(pf, (nfds_t)nconns, 1000) < 0) {
            if (errno == EINTR) continue;
            die("poll");
        }
        for (int i = 0; i < nconns; i++) {
            struct conn *c = &cs[i];
            if (c->fd < 0 || !pf[i].revents) continue;
            if (pf[i].revents & POLLOUT) {
                ssize_t n = write(c->fd, c->out + c->out_sent, c->out_len - c->out_sent);
                if (n < 0 && errno != EAGAIN) die("write");
                if (n > 0) c->out_sent += (size_t)n;
            } else if (pf[i].revents & (POLLIN | POLLHUP | POLLERR)) {
                if (c->in_cap - c->in_len < 4096) {
                    c->in_cap *= 2;
                    c->in = realloc(c->in, c->in_cap);
                    if (!c->in) die("realloc");
                }
                ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
                if (n == 0) {
                    fprintf(stderr, "seqbench: redis closed the connection\n");
                    return 1;
                }
                if (n < 0 && errno != EAGAIN) die("read");
                if (n > 0) {
                    c->in_len += (size_t)n;
                    take_replies(c, deadline);
                }
            }
        }
        double t = now_s();
        if (t - last_report >= 1.0) {
            fprintf(stderr, "seqbench: %.0f s, %llu events\n", t - t0, (unsigned long long)events);
            last_report = t;
        }
    }
    double took = now_s() - t0;
    qsort(lat, nlat, sizeof *lat, cmp_double);
    printf("RESULT mode=%s conns=%d pipeline=%d secs=%.2f events=%llu events_per_s=%.0f "
           "round_p50_us=%.0f round_p99_us=%.0f round_p999_us=%.0f\n",
           dedupe ? "dedupe" : "script", nconns, depth, took, (unsigned long long)events,
           (double)events / took, pct(0.5), pct(0.99), pct(0.999));
    return 0;
}
