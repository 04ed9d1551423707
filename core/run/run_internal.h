/*
 * Internal state of rivetrun, the single-node launcher (never installed).
 *
 * One launcher_t holds the whole job. Its parts live in one file each:
 *
 *   rivetrun_main.c  options, the job's configuration, set-up and teardown
 *   run_loop.c       the poll() loop, timers, signals and ending the job
 *   run_server.c     the bootstrap server (rv_launch_proto.h): connections,
 *                    who may join as which rank, frames, the allgather round
 *   run_dir.c        the private directory of the socket, and sweeping
 *                    those that killed rivetruns left behind
 *   run_children.c   forking the ranks, placement, reaping and killing them,
 *                    and which processes descend from them
 *   run_output.c     rivetrun's own messages and the ranks' prefixed output
 *
 * Everything runs in rivetrun's single thread, from the loop: no function
 * here blocks, and none is thread-safe.
 */
#ifndef RIVET_RUN_INTERNAL_H
#define RIVET_RUN_INTERNAL_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "rv_launch_proto.h"
#include "rv_placement.h"

/* A rank's output streams: its stdout and its stderr, in this order. */
#define RUN_NSTREAMS 2

/* A rank killed by signal s makes rivetrun exit with this plus s, as a
 * shell reports it. */
#define RUN_EXIT_SIGNAL_BASE 128

/* ---------------------------------------------------------------------- */
/* Types                                                                   */
/* ---------------------------------------------------------------------- */

/* An outgoing frame, shared by every connection it is queued on. */
typedef struct frame {
    unsigned refs;
    size_t len;           /* header + payload */
    unsigned char data[]; /* rv_launch_hdr_t, then the payload */
} frame_t;

typedef struct qent {
    frame_t *frame;
    struct qent *next;
} qent_t;

/* A bootstrap connection. Closed connections keep their struct (fd -1)
 * until the end of the loop iteration, so handlers may close any of them. */
typedef struct conn {
    int fd;
    int rank;       /* -1 until its HELLO is accepted */
    pid_t peer_pid; /* the peer, as the kernel says (SO_PEERCRED) */
    uid_t peer_uid;
    rv_launch_hdr_t hdr; /* frame being received */
    size_t hdr_got;
    unsigned char *payload; /* where its payload goes */
    unsigned char *owned;   /* malloc'ed payload buffer, or NULL */
    size_t payload_got;
    qent_t *qhead, *qtail; /* frames to send */
    size_t qoff;           /* bytes of qhead already sent */
} conn_t;

/* One output stream (stdout or stderr) of a rank, in prefix mode. */
typedef struct outstream {
    int fd;     /* read end of the pipe, -1 when closed */
    int out_fd; /* where the prefixed lines go */
    char *buf;
    size_t len, cap;
    bool midline; /* a line was cut: no prefix before the rest */
} outstream_t;

typedef struct rank_proc {
    pid_t pid;        /* also its process group id */
    pid_t joined_pid; /* the process that joined as the rank (its HELLO),
                         when a wrapper started it; 0: none yet */
    bool exited;
    bool contributed; /* to the allgather round in progress */
    bool in_job;      /* joined (HELLO) and has not left (FINI) */
    int64_t heard_at; /* ms: its last frame (a BEAT at least every
                         RV_LAUNCH_BEAT_MS while it is in the job) */
    conn_t *conn;     /* its connection, NULL when it has none */
    outstream_t out[RUN_NSTREAMS];
} rank_proc_t;

typedef enum { PHASE_RUNNING, PHASE_ENDING } phase_t;

typedef struct launcher {
    /* job */
    int size;
    int threads;
    rv_placement_t placement;
    bool prefix;
    char *const *argv;      /* the program and its arguments */
    const char *config_abs; /* exported as RIVET_CONFIG, or NULL */
    double timeout_s;       /* 0: none */
    int64_t keepalive_ms;   /* job.keepalive: a rank unheard for so long
                               ends the job; 0: never */
    int64_t keepalive_at;   /* run_now_ms of the next check; 0: none */
    const char *timeout_str;
    pid_t self;
    /* The job's secret (RIVET_JOB_TOKEN): a process presents it to join. */
    uint8_t token[RV_LAUNCH_TOKEN_BYTES];

    /* resources */
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    /* The job's shared-memory directory, exported as UCX_POSIX_DIR; empty:
     * none (the user set UCX_POSIX_DIR, or /dev/shm is not there). */
    char shm_dir[PATH_MAX];
    int listen_fd;
    int sig_fd;
    sigset_t old_mask;
    bool tty_handed; /* rank 0's group holds the terminal */
    rank_proc_t *ranks;
    int nrunning;
    conn_t **conns;
    int nconns, max_conns;

    /* the allgather round in progress: its reply frame, filled in place */
    frame_t *round;
    uint64_t round_len;
    int round_count;

    /* ending */
    phase_t phase;
    int exit_code;
    int64_t timeout_at; /* ms, 0: none */
    int64_t kill_at;    /* SIGKILL everyone then; 0: not scheduled */
    int64_t giveup_at;  /* stop waiting for children then */
} launcher_t;

/* ---------------------------------------------------------------------- */
/* The loop and ending the job (run_loop.c)                                */
/* ---------------------------------------------------------------------- */

/* Milliseconds on the monotonic clock. */
int64_t run_now_ms(void);

/* Serves the job until every rank has exited (or will not die). The
 * timeout counts from the call. Returns -1 if rivetrun itself failed. */
int run_loop(launcher_t *l);

/* Starts ending the job: @p sig to every rank now, SIGKILL after
 * @p grace_ms; every bootstrap connection is closed. Once only. */
void run_end_job(launcher_t *l, int sig, int64_t grace_ms);

/* Reports the first failure of the job in one line and ends the job with
 * exit code @p code; later failures are not reported. */
void run_job_fail(launcher_t *l, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---------------------------------------------------------------------- */
/* The bootstrap server (run_server.c)                                     */
/* ---------------------------------------------------------------------- */

/* Creates the private directory and the listening socket in it. On
 * failure, says why and leaves nothing behind. */
int run_server_open(launcher_t *l);

/* Closes every connection and the listening socket and drops the round in
 * progress, so that ranks blocked in a collective read end-of-file. */
void run_server_stop(launcher_t *l);

/* run_server_stop, then frees the connections and removes the socket and
 * its directory. */
void run_server_close(launcher_t *l);

/* Accepts every pending connection. */
void run_server_accept(launcher_t *l);

/* Handles poll() events @p ev of connection @p c: sends what is queued,
 * reads and handles what arrived. */
void run_conn_on_events(launcher_t *l, conn_t *c, short ev);

/* Reads and handles everything @p c has to say now, until EAGAIN or EOF. */
void run_conn_read(launcher_t *l, conn_t *c);

/* Frees the closed connections; called where no handler holds one. */
void run_conns_sweep(launcher_t *l);

/* Fails the job if the round in progress waits for a rank that exited. */
void run_round_check_blocked(launcher_t *l);

/* ---------------------------------------------------------------------- */
/* The socket's directory (run_dir.c)                                      */
/* ---------------------------------------------------------------------- */

/* Removes the directories below $TMPDIR (else /tmp) that rivetruns of
 * this user, now gone, left behind; then creates this job's private (0700)
 * directory there, with rivetrun's pid in it, and sets l->dir and
 * l->sock_path. On failure, says why and leaves nothing behind. */
int run_dir_create(launcher_t *l);

/* Removes the socket, the pid file and the directory. */
void run_dir_remove(launcher_t *l);

/* ---------------------------------------------------------------------- */
/* The ranks' processes (run_children.c)                                   */
/* ---------------------------------------------------------------------- */

/* What /proc/PID/stat says of a process. */
typedef struct run_proc_info {
    char state; /* R, S, D, Z, ... */
    pid_t ppid;
    unsigned long long start_ticks; /* since boot, in clock ticks */
} run_proc_info_t;

/* Reads /proc/@p pid/stat. Returns 0, or -1 if there is no such process. */
int run_proc_stat(pid_t pid, run_proc_info_t *info);

/* True if @p pid is the process rivetrun started as rank @p r or one of
 * its descendants (a program a wrapper script started). */
bool run_rank_owns_pid(const launcher_t *l, int r, pid_t pid);

/* Forks and starts every rank; if one cannot be started, ends the job. */
void run_children_start(launcher_t *l);

/* Reaps every rank that exited and judges how it ended. */
void run_children_reap(launcher_t *l);

/* SIGKILLs what is left of the job and reaps what that ends, for a
 * bounded time. */
void run_children_finish(launcher_t *l);

/* Sends @p sig to the process group of every rank. */
void run_signal_groups(launcher_t *l, int sig);

/* Fails the job if a rank in the job, not stopped, has sent no frame for
 * job.keepalive (its beats stopped). Returns the ms until the next check
 * is due, or -1 when there is nothing to watch. */
int64_t run_keepalive_check(launcher_t *l);

/* ---------------------------------------------------------------------- */
/* Output (run_output.c)                                                   */
/* ---------------------------------------------------------------------- */

/* Prints "rivetrun: <message>" as one line on stderr, in one write. */
void run_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Marks every rank's streams closed and points them at rivetrun's stdout
 * and stderr. */
void run_output_init(launcher_t *l);

/* Makes @p fd, the read end of a rank's pipe, the source of @p s. */
void run_stream_attach(outstream_t *s, int fd);

/* Reads what the pipe of @p s holds now and writes its complete lines. */
void run_stream_read(outstream_t *s, int rank);

/* Reads what both pipes of rank @p r hold now. */
void run_output_read_rank(launcher_t *l, int r);

/* Closes every stream, writing out partial lines, and frees the buffers. */
void run_output_fini(launcher_t *l);

#endif
