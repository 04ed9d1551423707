/*
 * The wire protocol between rivetrun and the processes it starts (internal
 * to core/).
 *
 * rivetrun listens on a Unix-domain stream socket in a private directory and
 * exports its path as RIVET_BOOTSTRAP=unix:<path>, and a secret of the job,
 * RV_LAUNCH_TOKEN_BYTES random bytes, as RIVET_JOB_TOKEN=<hex> (in the
 * environment only, never on a command line). Each process opens one
 * connection and exchanges frames on it:
 *
 *     [u32 type][u32 rank][u64 len][len bytes of payload]
 *
 * in host byte order (both ends run on the same node). The rank field of a
 * frame sent by rivetrun is RV_LAUNCH_RANK_LAUNCHER.
 *
 *   HELLO      process -> rivetrun: payload rv_launch_hello_t, with the
 *              job's token. rivetrun answers with an empty HELLO once it
 *              accepted the rank, or closes the connection if it did not:
 *              a wrong or missing token, a peer (SO_PEERCRED) that is
 *              neither the process rivetrun started as that rank nor one
 *              of its descendants, a rank out of range, exited or already
 *              connected, or a wrong job size. rivetrun names the refused
 *              pid and the reason on its stderr; the job goes on.
 *   ALLGATHER  process -> rivetrun: this rank's contribution. All ranks
 *              contribute the same number of bytes. Once all `size` ranks
 *              contributed, rivetrun sends every rank one ALLGATHER whose
 *              payload is the contributions concatenated in rank order.
 *              A barrier is an allgather of 0 bytes. Collectives are
 *              sequential, so rivetrun keeps a single round in progress.
 *   ABORT      process -> rivetrun: payload rv_launch_abort_t then the
 *              reason text (not NUL-terminated). rivetrun reports
 *              "rank N aborted: reason" and ends the job with the code.
 *   FINI       process -> rivetrun: clean leave, empty payload; the process
 *              closes the connection after it.
 *   BEAT       process -> rivetrun: empty payload, every RV_LAUNCH_BEAT_MS
 *              from the thread that watches the connection
 *              (rv_bootstrap_watch.c), whatever the program does. A rank
 *              whose beats stop for job.keepalive seconds while its process
 *              lives on, and is not stopped (a debugger, SIGSTOP), has lost
 *              its runtime without the kernel noticing: its process image
 *              was replaced, or it hangs outside rivet. No transport sees
 *              that on every configuration (a UCX shared-memory or TCP peer
 *              whose segments and sockets outlive it), so rivetrun ends the
 *              job naming the rank instead of leaving it to --timeout.
 *              Frames from the watch thread and from the bootstrap's calls
 *              share the socket under one lock, so they never interleave.
 *
 * A frame that breaks the protocol (an unknown type, a length that does not
 * fit its type, a rank that is not the connection's) makes rivetrun close
 * that connection and say why; it does not end the job by itself.
 *
 * When the job ends (a process failed, a signal, a timeout), rivetrun closes
 * every connection: a process waiting for a reply reads end-of-file and
 * fails its collective instead of waiting forever.
 */
#ifndef RIVET_RV_LAUNCH_PROTO_H
#define RIVET_RV_LAUNCH_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rv_status.h"

typedef enum rv_launch_type {
    RV_LAUNCH_HELLO = 1,
    RV_LAUNCH_ALLGATHER = 2,
    RV_LAUNCH_ABORT = 3,
    RV_LAUNCH_FINI = 4,
    RV_LAUNCH_BEAT = 5,
} rv_launch_type_t;

/* How often a rank's watch thread sends BEAT. */
#define RV_LAUNCH_BEAT_MS 1000

/* The rank field of frames sent by rivetrun. */
#define RV_LAUNCH_RANK_LAUNCHER UINT32_MAX

/* Largest contribution of one rank to an allgather, and largest reply. */
#define RV_LAUNCH_MAX_CONTRIB (64ull << 20)
#define RV_LAUNCH_MAX_REPLY (1ull << 30)
/* Longest abort reason kept. */
#define RV_LAUNCH_MAX_REASON 1024

/* The prefix of RIVET_BOOTSTRAP's value. */
#define RV_LAUNCH_ADDR_PREFIX "unix:"

/* rivetrun's pid, and the process group it made for a rank (the rank's
 * wrapper, if any, and everything it started): a rank whose rivetrun is
 * gone ends that group (rv_bootstrap_watch.c). */
#define RV_LAUNCH_PID_ENV "RIVET_LAUNCHER_PID"
#define RV_LAUNCH_PGID_ENV "RIVET_JOB_PGID"
/* The name of the directory of rivetrun's socket starts so. */
#define RV_LAUNCH_DIR_PREFIX "rivetrun."
/* Where the job's shared-memory directory is made (rv_launch_shm.c), and
 * the variable that points UCX's posix transport at it. */
#define RV_LAUNCH_SHM_ROOT "/dev/shm"
#define RV_LAUNCH_SHM_ENV "UCX_POSIX_DIR"

/* The job's secret: 128 random bits, exported as RV_LAUNCH_TOKEN_ENV in
 * hexadecimal. A token of zeros stands for none. */
#define RV_LAUNCH_TOKEN_ENV "RIVET_JOB_TOKEN"
#define RV_LAUNCH_TOKEN_BYTES 16
/* Room for the token in hexadecimal and its NUL. */
#define RV_LAUNCH_TOKEN_HEX (2 * RV_LAUNCH_TOKEN_BYTES + 1)

typedef struct rv_launch_hdr {
    uint32_t type; /* rv_launch_type_t */
    uint32_t rank; /* sender's rank, or RV_LAUNCH_RANK_LAUNCHER */
    uint64_t len;  /* payload bytes that follow */
} rv_launch_hdr_t;

typedef struct rv_launch_hello {
    uint32_t size; /* job size the process was told (RIVET_SIZE) */
    uint32_t pad;
    uint64_t pid; /* as the sender sees it; rivetrun asks the kernel */
    uint8_t token[RV_LAUNCH_TOKEN_BYTES]; /* RIVET_JOB_TOKEN, or zeros */
} rv_launch_hello_t;

typedef struct rv_launch_abort {
    int32_t code;
    uint32_t pad;
} rv_launch_abort_t;

/* A short lowercase name of a frame type, for messages. */
const char *rv__launch_type_name(uint32_t type);

/*
 * Writes all @p len bytes, retrying on EINTR and short writes. On sockets
 * it uses MSG_NOSIGNAL, so a closed peer is RV_ERR_PEER, never SIGPIPE.
 * Blocking file descriptors only.
 * @return RV_OK, RV_ERR_PEER (peer closed) or RV_ERR_IO (errno set).
 */
rv_status_t rv__launch_write_full(int fd, const void *buf, size_t len);

/*
 * Reads exactly @p len bytes, retrying on EINTR and short reads.
 * @return RV_OK, RV_ERR_PEER (end of file before @p len bytes; errno is 0)
 *         or RV_ERR_IO (errno set).
 */
rv_status_t rv__launch_read_full(int fd, void *buf, size_t len);

/* Sends one frame: the header then @p len bytes of @p payload. */
rv_status_t rv__launch_send(int fd, uint32_t type, uint32_t rank,
                            const void *payload, size_t len);

/* Receives one frame header. */
rv_status_t rv__launch_recv_hdr(int fd, rv_launch_hdr_t *hdr);

/* Writes @p token as RV_LAUNCH_TOKEN_HEX - 1 lowercase hex digits and a
 * NUL into @p hex. */
void rv__launch_token_format(const uint8_t token[RV_LAUNCH_TOKEN_BYTES],
                             char hex[RV_LAUNCH_TOKEN_HEX]);

/* Reads a token written by rv__launch_token_format (either case).
 * @return RV_OK, or RV_ERR_INVALID (token untouched) if @p hex is not
 *         exactly that many hex digits. */
rv_status_t rv__launch_token_parse(const char *hex,
                                   uint8_t token[RV_LAUNCH_TOKEN_BYTES]);

/* Compares two tokens in a time that does not depend on where they
 * differ, so that timing tells a guesser nothing. */
int rv__launch_token_equal(const uint8_t a[RV_LAUNCH_TOKEN_BYTES],
                           const uint8_t b[RV_LAUNCH_TOKEN_BYTES]);

/* True if @p token is all zeros (no token). */
int rv__launch_token_none(const uint8_t token[RV_LAUNCH_TOKEN_BYTES]);

/* Makes the job's shared-memory directory RV_LAUNCH_SHM_ROOT/@p name
 * (@p name: the launcher directory's own, rivetrun.XXXXXX), mode 0700,
 * and writes its path into @p path.
 * @return 0, or -1 (nothing made) if it cannot be made or checked. */
int rv__launch_shm_dir_create(const char *name, char *path, size_t len);

/* Removes the job's shared-memory directory RV_LAUNCH_SHM_ROOT/@p name
 * and the segments in it, if it is this user's; nothing otherwise. Safe
 * from several processes at once. */
void rv__launch_shm_dir_remove(const char *name);

/* Removes this user's private SysV segments (key 0) that one of the
 * @p n processes @p pids made and no process holds: those of a rank
 * killed inside UCX's shmget/IPC_RMID window. Returns how many. */
int rv__launch_sysv_sweep(const pid_t *pids, size_t n);

#endif
