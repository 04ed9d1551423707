/*
 * rivet-store, the program: what its commands share (rivet_store_main.c:
 * put and get; rivet_store_stage.c: stage).
 */
#ifndef RIVET_STORE_APP_H
#define RIVET_STORE_APP_H

#include <nettle/sha2.h>
#include <stdbool.h>
#include <stdint.h>

#include "rv_store.h"

typedef enum { CMD_PUT, CMD_GET, CMD_STAGE } store_cmd_t;

typedef struct {
    store_cmd_t cmd;
    int nfiles;
    char **files;
    uint8_t (*digests)[SHA256_DIGEST_SIZE]; /* rank 0's, for the others */
    uint32_t *modes; /* rank 0's files' permissions, for stage */
    double t_begin;  /* stage: when every process began (a barrier) */
    int64_t timeout_ms;
    bool timeout_given; /* -t: else GET_TIMEOUT_MS, and get says so */
    const char *to;     /* stage: the folder on every host ("%h": its name) */
} opts_t;

extern opts_t opt;

/* The last component of @p path. */
const char *base_name(const char *path);
/* The SHA-256 of @p n bytes, binary and as sha256sum prints it. */
void sha256_hex(const void *data, size_t n, uint8_t out[SHA256_DIGEST_SIZE],
                char hex[65]);
/* An object's id from the file's name, binary and in hex. */
void object_id(const char *name, rv_object_id_t *id, char hex[41]);
double now_s(void);

/* stage, on every worker of the job: rank 0's first worker puts the
 * files, and the first worker of each host's first process writes each
 * into opt.to, fetching it once for its host. RV_OK, or an error (each
 * file that failed named on stderr, the others still staged). */
rv_status_t stage_files(rv_worker_t *w);

#endif
